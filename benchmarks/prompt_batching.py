"""Whether the built-in voice's prompt graph (the teacher's text encoder and duration predictor)
costs less per sentence run in padded batches than one sentence at a time (issue 32, item 3).

    python -m benchmarks.prompt_batching        # the 30 evaluation sentences, ~1 minute

The sentences are sorted by length first, so each batch pads as little as it can: the best case
for batching, an upper bound on what a pool that batches prompts arriving together could save.
It first checks that a batch's durations equal each sentence's own (padding changes nothing).
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from evaluation import eval_sentences
from model.families.joe.frontend import TeacherFrontend
from model.families.joe.teacher import PHONEME_IDS, PHONEME_LENGTHS, SCALES, TeacherScales

ROUNDS = 5
BATCH_SIZES = (1, 2, 4, 8)


def run_batch(session, batch: list[np.ndarray], scales: np.ndarray) -> list[np.ndarray]:
    """One padded run of `batch`; each sentence's durations, cut to its own length."""
    padded = np.zeros((len(batch), max(ids.size for ids in batch)), np.int64)
    for row, ids in enumerate(batch):
        padded[row, :ids.size] = ids
    lengths = np.array([ids.size for ids in batch], np.int64)
    durations = session.run(None, {PHONEME_IDS: padded, PHONEME_LENGTHS: lengths, SCALES: scales})[0]
    return [durations[row].reshape(-1)[:ids.size] for row, ids in enumerate(batch)]


def main() -> None:
    front = TeacherFrontend()
    session, scales = front.teacher.session, TeacherScales().as_array()
    sentences = sorted((np.asarray(front.phonemizer.ids(p), np.int64)
                        for text in eval_sentences() for p in front.phonemizer.sentences(text)), key=len)
    alone = [run_batch(session, [ids], scales)[0] for ids in sentences]
    together = [d for i in range(0, len(sentences), 4) for d in run_batch(session, sentences[i:i + 4], scales)]
    print("a batch's durations equal each sentence's own:", all(map(np.array_equal, alone, together)))
    for size in BATCH_SIZES:
        rounds = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            for i in range(0, len(sentences), size):
                run_batch(session, sentences[i:i + size], scales)
            rounds.append(time.perf_counter() - started)
        print(f"batches of {size}: {1000 * statistics.median(rounds) / len(sentences):.1f} ms per sentence "
              f"(median of {ROUNDS} rounds)")


if __name__ == "__main__":
    main()
