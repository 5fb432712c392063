"""Voice agents over the speak WebSocket: N agents, each streaming replies word by word at an
LLM's pace, with random barge-ins, against `chorus serve` started on 127.0.0.1 by this script.

    python -m benchmarks.agent               # joe; 1, 2, 4, 8 agents, 20 s each
    python -m benchmarks.agent --quick       # 1 agent for 4 s (the smoke test)

Each agent holds one connection (Deepgram's `/v1/speak`, linear16 at 24 kHz) and plays turns:
a reply of 2-4 eval sentences sent as one Speak per word at `--words-per-second`, then Flush;
with probability `--barge-in` the caller interrupts between 0.3 and 1.5 s after the turn's first
audio (Clear), as a voice agent's listener does. A second's pause (the caller speaking) separates
turns. Per level:
- first audio: from the moment the turn's first sentence is complete on the wire (its last word
  and the space after it sent) to the turn's first audio bytes;
- Clear to silence: from sending Clear to the last audio frame that still arrived (0 when none);
- viable: a listener who starts at the turn's first audio, with a 200 ms buffer, never runs dry
  (until the Clear, for a barged-in turn);
- refused: turns the server answered with an Error (at capacity) instead of audio;
- KV blocks in use once the level has drained (every aborted turn must have freed its blocks).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.report import machine_line, write_report_json
from benchmarks.server_process import chorus_server, free_port
from benchmarks.throughput import machine_info
from benchmarks.trace import RequestTrace, is_viable, percentile_or_none
from evaluation import eval_sentences

SAMPLE_RATE = 24000
BYTES_PER_SAMPLE = 2
SENTENCE_ENDS = (".", "!", "?")
QUICK = {"agents": [1], "level_seconds": 4.0}
# The targets (2-core CPU, joe): at 8 agents, first audio within 150 ms p95 of a
# sentence end, and silence within 50 ms p95 of a Clear.
TARGET_AGENTS, FIRST_AUDIO_P95_S, CLEAR_P95_S = 8, 0.150, 0.050


@dataclass
class Turn:
    """One reply as its agent saw it (monotonic seconds)."""

    sentence_end_at: float | None = None
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (arrival, samples)
    clear_sent_at: float | None = None
    last_audio_after_clear: float | None = None
    refused: bool = False

    @property
    def first_audio(self) -> float | None:
        if self.sentence_end_at is None or not self.chunks:
            return None
        return self.chunks[0][0] - self.sentence_end_at

    @property
    def clear_to_silence(self) -> float | None:
        if self.clear_sent_at is None:
            return None
        return 0.0 if self.last_audio_after_clear is None else self.last_audio_after_clear - self.clear_sent_at

    def viable(self, buffer_s: float = 0.2) -> bool | None:
        """Whether the audio before the Clear (all of it without one) plays without running dry."""
        if not self.chunks:
            return None
        trace = RequestTrace(self.chunks[0][0], SAMPLE_RATE)
        for arrival, samples in self.chunks:
            if self.clear_sent_at is None or arrival <= self.clear_sent_at:
                trace.record(arrival, samples)
        return is_viable(trace, buffer_s)


async def play_turn(ws, reply: str, words_per_second: float, barge_after: float | None) -> Turn:
    """Sends `reply` word by word and Flush; with `barge_after`, sends Clear that long after the
    turn's first audio instead of waiting for its end. Returns when Flushed (or Cleared) came."""
    turn = Turn()
    first_audio = asyncio.Event()
    stop_sending = asyncio.Event()

    async def send_words() -> None:
        for word in reply.split():
            if stop_sending.is_set():
                return
            await ws.send(json.dumps({"type": "Speak", "text": word + " "}))
            if turn.sentence_end_at is None and word.endswith(SENTENCE_ENDS):
                turn.sentence_end_at = time.monotonic()
            await asyncio.sleep(1.0 / words_per_second)
        if not stop_sending.is_set():
            await ws.send(json.dumps({"type": "Flush"}))

    async def barge_in() -> None:
        await first_audio.wait()
        await asyncio.sleep(barge_after)
        stop_sending.set()
        turn.clear_sent_at = time.monotonic()
        await ws.send(json.dumps({"type": "Clear"}))

    async def receive() -> None:
        while True:
            frame = await ws.recv()
            now = time.monotonic()
            if isinstance(frame, bytes):
                turn.chunks.append((now, len(frame) // BYTES_PER_SAMPLE))
                first_audio.set()
                if turn.clear_sent_at is not None:
                    turn.last_audio_after_clear = now
                continue
            kind = json.loads(frame)["type"]
            if kind == "Error":
                turn.refused = True
            if kind == "Cleared" or (kind == "Flushed" and barge_after is None):
                return
            if kind == "Flushed" and turn.clear_sent_at is None and not turn.chunks:
                return  # a refused turn: its Flushed comes without audio, and no Clear will follow

    sender = asyncio.create_task(send_words())
    barger = asyncio.create_task(barge_in()) if barge_after is not None else None
    try:
        await asyncio.wait_for(receive(), timeout=120)
    finally:
        for task in (sender, barger):
            if task is not None:
                task.cancel()
    return turn


async def run_agent(url: str, rng: random.Random, sentences: list[str], until: float, words_per_second: float,
                    barge_in: float) -> list[Turn]:
    import websockets

    turns = []
    async with websockets.connect(url, max_size=None) as ws:
        assert json.loads(await ws.recv())["type"] == "Metadata"
        while time.monotonic() < until:
            reply = " ".join(rng.sample(sentences, rng.randint(2, 4)))
            barge_after = rng.uniform(0.3, 1.5) if rng.random() < barge_in else None
            turns.append(await play_turn(ws, reply, words_per_second, barge_after))
            await asyncio.sleep(1.0)  # the caller's turn
    return turns


async def kv_blocks_used(base_url: str) -> float:
    import httpx

    async with httpx.AsyncClient() as client:
        metrics = (await client.get(f"{base_url}/metrics")).text
    return next(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("chorus_kv_blocks_used "))


def level_summary(agents: int, turns: list[Turn], blocks_after: float) -> dict:
    firsts = [t.first_audio for t in turns if t.first_audio is not None]
    clears = [t.clear_to_silence for t in turns if t.clear_to_silence is not None]
    viable = [t.viable() for t in turns if t.viable() is not None]
    p = percentile_or_none
    return {"agents": agents, "turns": len(turns), "refused_pct": 100 * sum(t.refused for t in turns) / max(1, len(turns)),
            "first_audio_p50": p(firsts, 50), "first_audio_p95": p(firsts, 95),
            "barge_ins": len(clears), "clear_to_silence_p50": p(clears, 50), "clear_to_silence_p95": p(clears, 95),
            "viable_pct_200ms": 100 * sum(viable) / len(viable) if viable else None,
            "kv_blocks_used_after": blocks_after, "turns_detail": [asdict(t) for t in turns]}


async def measure(args: argparse.Namespace) -> list[dict]:
    sentences = eval_sentences()
    levels = []
    with chorus_server(args.model, free_port(), args.server_flags.split()) as server:
        url = f"{server.base_url.replace('http', 'ws')}/v1/speak?model=aura-2-thalia-en&encoding=linear16&sample_rate={SAMPLE_RATE}"
        for agents in args.agents:
            server.wait_idle(args.settle_seconds)
            until = time.monotonic() + args.level_seconds
            per_agent = await asyncio.gather(*(
                run_agent(url, random.Random(args.seed * 1000 + i), sentences, until, args.words_per_second, args.barge_in)
                for i in range(agents)))
            server.wait_idle(args.settle_seconds)
            await asyncio.sleep(0.5)  # the engine's stats reach /metrics a few times a second
            level = level_summary(agents, [t for turns in per_agent for t in turns], await kv_blocks_used(server.base_url))
            print(f"  {agents} agents: {level['turns']} turns, first audio p95 {fmt_ms(level['first_audio_p95'])}, "
                  f"clear to silence p95 {fmt_ms(level['clear_to_silence_p95'])}, viable {level['viable_pct_200ms']}",
                  file=sys.stderr)
            levels.append(level)
    return levels


def fmt_ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{1000 * seconds:,.0f}"


def targets(levels: list[dict]) -> list[dict]:
    at = next((lv for lv in levels if lv["agents"] == TARGET_AGENTS), None)
    first = None if at is None else at["first_audio_p95"]
    clear = None if at is None else at["clear_to_silence_p95"]
    blocks = max(lv["kv_blocks_used_after"] for lv in levels)
    return [
        {"target": f"first audio after a sentence end, p95 at {TARGET_AGENTS} agents <= 150 ms", "measured": first,
         "met": None if first is None else first <= FIRST_AUDIO_P95_S},
        {"target": f"Clear to silence, p95 at {TARGET_AGENTS} agents <= 50 ms", "measured": clear,
         "met": None if clear is None else clear <= CLEAR_P95_S},
        {"target": "KV blocks in use after every level == 0", "measured": blocks, "met": blocks == 0},
    ]


def write_results(levels: list[dict], args: argparse.Namespace, command: str, started: datetime) -> dict[str, Path]:
    machine = machine_info() | {"load_average_after": os.getloadavg()}
    report = {"date": started.isoformat(timespec="seconds"), "command": command, "machine": machine,
              "workload": {"model": args.model, "words_per_second": args.words_per_second, "barge_in": args.barge_in,
                           "level_seconds": args.level_seconds}, "levels": levels, "targets": targets(levels)}
    paths = write_report_json(args.out, "agent", started, report, allow_nan=False)
    lines = [f"# Voice agents over the speak WebSocket, {report['date']}", "", f"`{command}`", "",
             machine_line(machine, f"model {args.model}"), "",
             f"Each agent streams replies of 2-4 eval sentences word by word at {args.words_per_second:g} words/s over one "
             f"connection, Flush at the end; {100 * args.barge_in:g} % of turns are interrupted (Clear) 0.3-1.5 s after "
             f"their first audio; levels of {args.level_seconds:g} s.", "",
             "| agents | turns | first audio after a sentence end p50 / p95 ms | Clear to silence p50 / p95 ms (barge-ins) "
             "| viable % (200 ms buffer) | refused % | KV blocks after |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for lv in levels:
        viable = "–" if lv["viable_pct_200ms"] is None else f"{lv['viable_pct_200ms']:.1f}"
        lines.append(f"| {lv['agents']} | {lv['turns']} | {fmt_ms(lv['first_audio_p50'])} / {fmt_ms(lv['first_audio_p95'])} "
                     f"| {fmt_ms(lv['clear_to_silence_p50'])} / {fmt_ms(lv['clear_to_silence_p95'])} ({lv['barge_ins']}) "
                     f"| {viable} | {lv['refused_pct']:.1f} | {lv['kv_blocks_used_after']:g} |")
    lines += ["", "| target | measured | met |", "| --- | ---: | :---: |"]
    for t in report["targets"]:
        measured = f"{t['measured']:g}" if t["target"].startswith("KV") else fmt_ms(t["measured"])
        measured += "" if t["target"].startswith("KV") or t["measured"] is None else " ms"
        lines.append(f"| {t['target']} | {measured} | {'–' if t['met'] is None else '✓' if t['met'] else '✗'} |")
    paths["markdown"].write_text("\n".join(lines) + "\n")
    return paths


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="joe")
    parser.add_argument("--server-flags", default="", help="more `chorus serve` flags, one string")
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--level-seconds", type=float, default=20.0)
    parser.add_argument("--settle-seconds", type=float, default=15.0)
    parser.add_argument("--words-per-second", type=float, default=30.0)
    parser.add_argument("--barge-in", type=float, default=0.3, help="share of turns interrupted")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="1 agent for 4 s: the smoke test")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    if args.quick:
        args.agents, args.level_seconds = QUICK["agents"], QUICK["level_seconds"]
    command = "python -m benchmarks.agent " + " ".join(argv if argv is not None else sys.argv[1:])
    started = datetime.now(timezone.utc)
    levels = asyncio.run(measure(args))
    print(write_results(levels, args, command.strip(), started)["markdown"], file=sys.stderr)
    return levels


if __name__ == "__main__":
    main()
