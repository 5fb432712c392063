"""A prompt crosses to the engine core by value: no tensor storage is shared through /dev/shm."""
from __future__ import annotations

import pickle
from multiprocessing.reduction import ForkingPickler

import torch
import torch.multiprocessing  # noqa: F401 - registers torch's sharing reductions, as the server has

from engine.messages import AddRequest
from model.families.base import SpeechPrompt, SpokenWord
from model.sampling import SamplingParams


def test_a_prompt_pickles_by_value_through_the_pipe_pickler():
    prompt = SpeechPrompt([4, 5, 6], torch.randn(7, 3), 7, "salt", 3, (SpokenWord("hi", 0.0, 0.2),))
    data = bytes(ForkingPickler.dumps(AddRequest("r", prompt, SamplingParams())))
    # torch's reductions would have written a rebuild function that opens a shared segment.
    assert b"rebuild_storage" not in data and b"torch.multiprocessing" not in data
    received = pickle.loads(data).prompt
    assert torch.equal(received.conditioning, prompt.conditioning)
    assert (received.token_ids, received.num_frames, received.cache_salt, received.num_text_tokens, received.words) == (
        [4, 5, 6], 7, "salt", 3, prompt.words)
    assert pickle.loads(pickle.dumps(SpeechPrompt([1]))).conditioning is None
