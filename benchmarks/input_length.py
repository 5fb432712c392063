"""Does a long input delay the first audio? Single stream, TTFA of one sentence against the 30
eval sentences joined into one input, per response format.

A server that plans the whole text before speaking, or a peer that answers whole files, shows it
as a ratio far above 1; a server that speaks the first sentence first keeps it near 1.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable

from benchmarks.corpus import BenchRequest
from benchmarks.http_drivers import HttpDriver
from benchmarks.trace import RequestTrace
from evaluation import eval_sentences


def input_length_texts() -> tuple[list[str], str]:
    """(the single sentences, one per repetition in turn; the 30-sentence input)."""
    sentences = eval_sentences()
    return sentences, " ".join(sentences)


async def _ttfa(driver: HttpDriver, text: str, voice: str) -> dict:
    trace = RequestTrace(time.monotonic(), driver.sample_rate)
    await driver.run(BenchRequest(text, voice), trace)
    if not trace.ok or trace.ttfa is None:
        raise RuntimeError(f"{driver.name}: the input-length request failed ({trace.error or 'refused'})")
    return {"ttfa": trace.ttfa, "audio_seconds": trace.audio_seconds, "total_seconds": trace.finished_at - trace.sent}


async def input_length_run(driver_for: Callable[[str], HttpDriver], formats: tuple[str, ...],
                           args: argparse.Namespace) -> list[dict]:
    """For each format, `args.input_length_reps` alternating pairs (one sentence, then all 30);
    the requests run one at a time, each to its end, so no two overlap."""
    sentences, joined = input_length_texts()
    rows = []
    for response_format in formats:
        driver = driver_for(response_format)
        await driver.start()
        try:
            short, long = [], []
            for rep in range(args.input_length_reps):
                short.append(await _ttfa(driver, sentences[rep % len(sentences)], args.voice))
                long.append(await _ttfa(driver, joined, args.voice))
        finally:
            await driver.close()
        short_p50 = statistics.median(r["ttfa"] for r in short)
        long_p50 = statistics.median(r["ttfa"] for r in long)
        rows.append({"format": response_format, "one_sentence": short, "thirty_sentences": long,
                     "one_sentence_ttfa_p50": short_p50, "thirty_sentences_ttfa_p50": long_p50,
                     "ratio": long_p50 / short_p50})
        print(f"  input length {response_format}: TTFA p50 {1000 * short_p50:.0f} ms (1 sentence), "
              f"{1000 * long_p50:.0f} ms (30), ratio {long_p50 / short_p50:.2f}", file=sys.stderr)
    return rows
