"""Text that streams in over the speak socket: a client sends a reply word by word at `--words-per-second`,
then a Flush, to a server on a model that reads live text (Qwen3-TTS), once with live text (one
engine request per turn, fed word by word) and once sentence by sentence (`live_text=false`), the
two alternating for `--rounds`.

    python -m benchmarks.live_text --model tiny-random-qwen3 --words-per-second 3 --rounds 3

Per mode: engine steps between the turn's request reaching the engine core and its first audio
(the core's own steps, counted in process), the time from the first Speak to the first audio at
the client, engine requests per turn, and gaps: the client plays the audio from its first byte in
real time, and a gap is any moment it had nothing left to play before the turn's last audio came
(the longest and their sum; under 20 ms, a frame's scheduling jitter, is not counted).
The server runs in process (Starlette's test client over the real ASGI app and engine core).
"""
from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

# A voice agent's reply (12 words, two sentences): within what one live request of the tiny
# checkpoint reads (its generation config caps a request at 256 frames, so 64 text ids; its small
# vocabulary takes about 4 ids a word). Longer text goes on in a request after it.
REPLY = "Thanks for calling. I can help you with that order right now."
GAP_FLOOR_SECONDS = 0.02


def _turn(client, words: list[str], pause: float, query: str, sample_rate: int) -> dict:
    """One turn: the words `pause` seconds apart (from a thread of their own), then a Flush;
    when the first Speak left and when each audio frame came."""
    arrivals: list[tuple[float, int]] = []  # (when, samples)
    with client.websocket_connect(f"/v1/speak?model=ryan&encoding=linear16&sample_rate={sample_rate}{query}") as ws:
        json.loads(ws.receive_text())
        started = time.monotonic()

        def send() -> None:
            for word in words:
                ws.send_text(json.dumps({"type": "Speak", "text": word}))
                time.sleep(pause)
            ws.send_text(json.dumps({"type": "Flush"}))

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        while True:
            message = ws.receive()
            if message.get("bytes"):
                arrivals.append((time.monotonic(), len(message["bytes"]) // 2))
            elif message.get("text") and json.loads(message["text"])["type"] == "Flushed":
                break
        sender.join()
    return {"started": started, "arrivals": arrivals}


def gaps(arrivals: list[tuple[float, int]], sample_rate: int) -> list[float]:
    """Each time the listener, playing from the first audio in real time, ran out before
    more came: its length in seconds (those under GAP_FLOOR_SECONDS left out)."""
    found = []
    plays_until = None
    for when, samples in arrivals:
        if plays_until is not None and when - plays_until >= GAP_FLOOR_SECONDS:
            found.append(when - plays_until)
        start = when if plays_until is None else max(plays_until, when)
        plays_until = start + samples / sample_rate
    return found


def measure(model: str, words_per_second: float, rounds: int) -> dict:
    from starlette.testclient import TestClient

    from api.app import create_app
    from api.config.settings import ApiSettings
    from engine.client import EngineClient
    from engine.config import EngineConfig
    from engine.core import EngineCore
    from engine.messages import AddRequest
    from model.config import ModelConfig

    steps = {"count": 0}
    added: dict[str, int] = {}  # request id → the step count when it reached the core
    first_audio: dict[str, int] = {}
    step, add, post = EngineCore.step, EngineCore.add, EngineClient._post

    def counting_step(core):
        chunks = step(core)
        steps["count"] += 1
        for chunk in chunks:
            if len(chunk.pcm) and chunk.request_id not in first_audio:
                first_audio[chunk.request_id] = steps["count"] - added.get(chunk.request_id, steps["count"])
        return chunks

    def noting_add(core, message):
        added[message.request_id] = steps["count"]
        return add(core, message)

    turn_requests: list[str] = []

    def noting_post(client, command):
        if isinstance(command, AddRequest):
            turn_requests.append(command.request_id)
        return post(client, command)

    EngineCore.step, EngineCore.add, EngineClient._post = counting_step, noting_add, noting_post
    sample_rate = 24000
    words = [w + " " for w in REPLY.split()]
    results: dict[str, list[dict]] = {"live": [], "sentences": []}
    try:
        config = EngineConfig(model=ModelConfig(model=model, device="cpu", dtype="float32"), mode="inproc")
        with TestClient(create_app(config, ApiSettings(prompt_cache_mb=0))) as client:
            _turn(client, ["Warm up. "], 0.0, "", sample_rate)
            for _ in range(rounds):
                for mode, query in (("live", ""), ("sentences", "&live_text=false")):
                    turn_requests.clear()
                    seen = _turn(client, words, 1.0 / words_per_second, query, sample_rate)
                    arrivals = seen["arrivals"]
                    found = gaps(arrivals, sample_rate)
                    results[mode].append({
                        "requests": len(turn_requests),
                        "steps_to_first_audio": first_audio.get(turn_requests[0]) if turn_requests else None,
                        "first_audio_s": arrivals[0][0] - seen["started"] if arrivals else None,
                        "audio_s": sum(n for _, n in arrivals) / sample_rate,
                        "longest_gap_s": max(found, default=0.0),
                        "gaps_s": sum(found),
                    })
    finally:
        EngineCore.step, EngineCore.add, EngineClient._post = step, add, post
    return {"model": model, "words_per_second": words_per_second, "words": len(words), "rounds": rounds,
            "modes": {mode: _summary(runs) for mode, runs in results.items()}, "runs": results}


def _summary(runs: list[dict]) -> dict:
    def median(key):
        values = [r[key] for r in runs if r[key] is not None]
        return statistics.median(values) if values else None

    return {key: median(key) for key in ("requests", "steps_to_first_audio", "first_audio_s", "audio_s",
                                         "longest_gap_s", "gaps_s")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny-random-qwen3")
    parser.add_argument("--words-per-second", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    report = measure(args.model, args.words_per_second, args.rounds)
    print(f"{report['words']} words at {args.words_per_second:g} a second, {args.rounds} rounds, medians:")
    print("| mode | engine requests | steps to first audio | first audio after the first Speak | audio | longest gap | gaps |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mode, s in report["modes"].items():
        print(f"| {mode} | {s['requests']:g} | {s['steps_to_first_audio']} | {s['first_audio_s'] * 1000:.0f} ms "
              f"| {s['audio_s']:.2f} s | {s['longest_gap_s'] * 1000:.0f} ms | {s['gaps_s'] * 1000:.0f} ms |")
    print(json.dumps(report["modes"]))


if __name__ == "__main__":
    main()
