"""benchmarks/prompt_batching.py's premise: a padded batch through the voice's prompt graph gives
each sentence the durations it gets alone (so a batching pool would change no prompt)."""
from __future__ import annotations

import numpy as np

from tests.voice_packages import require_voice_packages

require_voice_packages()

from benchmarks.prompt_batching import run_batch
from model.families.joe.frontend import TeacherFrontend
from model.families.joe.teacher import TeacherScales


def test_a_padded_batch_gives_each_sentence_its_own_durations():
    front = TeacherFrontend()
    texts = ("Hi.", "A somewhat longer sentence than the first one.", "And a third, in between.")
    sentences = [np.asarray(front.phonemizer.ids(p), np.int64) for t in texts for p in front.phonemizer.sentences(t)]
    scales = TeacherScales().as_array()
    alone = [run_batch(front.teacher.session, [ids], scales)[0] for ids in sentences]
    together = run_batch(front.teacher.session, sentences, scales)
    assert len({ids.size for ids in sentences}) == 3  # really padded
    for one, batched, ids in zip(alone, together, sentences):
        assert one.shape == (ids.size,) and np.array_equal(one, batched)
