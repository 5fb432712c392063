from model.sampling.params import SamplingParams
from model.sampling.penalties import apply_penalties
from model.sampling.sampler import Sampler, apply_warpers
from model.sampling.state import SamplingState

__all__ = ["Sampler", "SamplingParams", "SamplingState", "apply_penalties", "apply_warpers"]
