from model.sampling.params import SamplingParams
from model.sampling.sampler import Sampler, SamplingState, apply_penalties, apply_warpers

__all__ = ["Sampler", "SamplingParams", "SamplingState", "apply_penalties", "apply_warpers"]
