"""`chorus`: say (text → WAV through the engine), serve (the HTTP server), bench and profile
(the load benchmark and the profiler in benchmarks/, which take their own flags)."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import wave
from pathlib import Path

import numpy as np

from api.engine_args import add_engine_args, engine_config_from_args
from engine.client import EngineClient


def pcm16(samples: np.ndarray) -> bytes:
    """float32 in [-1, 1] → 16-bit signed little-endian."""
    return (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


async def _say(args: argparse.Namespace) -> int:
    config = engine_config_from_args(args)
    async with EngineClient(config) as client:
        voice = args.voice or client.frontend.voices[0]
        if client.frontend.model_speed(args.speed) != args.speed:
            low, high = client.frontend.speed_range
            print(f"error: {client.frontend.model_name} speaks at speeds {low}-{high}; the HTTP API "
                  "time-stretches beyond that", file=sys.stderr)
            return 2
        params = client.frontend.default_sampling()
        if args.seed is not None:
            params.seed = args.seed
        if args.max_tokens is not None:
            params.max_tokens = args.max_tokens
        with wave.open(str(args.output), "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(client.sample_rate)
            async for chunk in client.synthesize(args.text, voice, params, speed=args.speed):
                wav.writeframes(pcm16(chunk.pcm))
                if chunk.finished:
                    m = chunk.metrics
                    print(
                        f"wrote {args.output}: {m.audio_seconds:.2f} s of audio, finish={chunk.finish_reason}, "
                        f"time to first audio {m.time_to_first_audio or 0:.3f} s, "
                        f"RTF {m.real_time_factor or 0:.3f}",
                        file=sys.stderr,
                    )
                    if chunk.error:
                        print(f"error: {chunk.error}", file=sys.stderr)
                        return 1
    return 0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from api.app import create_app
    from api.settings import ApiSettings

    app = create_app(engine_config_from_args(args), ApiSettings(api_key=args.api_key or None))
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chorus", description="Continuous-batching TTS serving")
    sub = parser.add_subparsers(dest="command", required=True)
    say = sub.add_parser("say", help="synthesize text to a WAV file through the engine")
    say.add_argument("text")
    say.add_argument("-o", "--output", type=Path, default=Path("out.wav"))
    say.add_argument("--voice", default=None)
    say.add_argument("--seed", type=int, default=None)
    say.add_argument("--max-tokens", type=int, default=None)
    say.add_argument("--speed", type=float, default=1.0, help="speaking rate (models with rate control: joe)")
    add_engine_args(say)
    say.set_defaults(engine_mode="inproc")
    serve = sub.add_parser("serve", help="start the HTTP server")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--api-key",
        default=os.environ.get("CHORUS_API_KEY"),
        help="require 'Authorization: Bearer KEY' on /v1 and /metrics (default: $CHORUS_API_KEY)",
    )
    add_engine_args(serve)
    # NOTE: bench and profile hand every further flag to benchmarks/ (see `chorus bench --help`).
    sub.add_parser("bench", help="load benchmark: TTFA, viability, capacity against baselines", add_help=False)
    sub.add_parser("profile", help="profile the server under load with py-spy", add_help=False)
    return parser


def _bench(rest: list[str]) -> int:
    from benchmarks.load import main as bench_main

    bench_main(rest)
    return 0


def _profile(rest: list[str]) -> int:
    import subprocess

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "profile.sh"
    return subprocess.call(["bash", str(script), *rest], env={**os.environ, "PYTHON": sys.executable})


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "bench":
        return _bench(rest)
    if args.command == "profile":
        return _profile(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "say":
        try:
            return asyncio.run(_say(args))
        except ValueError as exc:  # bad text or voice, a refused request: say why, no traceback
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
