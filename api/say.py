"""`chorus say`: text → a WAV file, through an engine of its own (no server), planned and
refused as the HTTP API would."""
from __future__ import annotations

import argparse
import sys
import time
import wave
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from api.config.engine_args import engine_config_from_args
from api.config.settings import ApiSettings
from api.http.auth import owner_of
from api.http.draining import Drain
from api.speech.catalog import Catalog
from api.speech.early_refusal import EarlyRefusal
from api.speech.errors import ENGINE_DEAD, UNSPEAKABLE, SpeechError
from api.speech.markup import server_lexicon
from api.speech.planning import SegmentPlanner
from api.speech.prompt_pool import PromptPool
from api.speech.start import start_speech
from api.speech.synthesis import SynthesisFailed
from api.voices.library import VoiceLibrary
from engine.client import EngineClient


def pcm16(samples: np.ndarray) -> bytes:
    """float32 in [-1, 1] → 16-bit signed little-endian."""
    return (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


async def say(args: argparse.Namespace) -> int:
    """Speaks `args.text` into `args.output`; returns the exit code."""
    settings = ApiSettings(prompt_workers=args.prompt_workers)
    config = engine_config_from_args(args)
    config.capacity.pace_slack_seconds = None  # one speech, written out: nothing to share steps with
    async with EngineClient(config) as client, \
            PromptPool(client.frontend.prepare, settings.prompt_workers) as pool:
        if client.frontend.model_speed(args.speed) != args.speed:
            low, high = client.frontend.speed_range
            print(f"error: {client.frontend.model_name} speaks at speeds {low}-{high}; the HTTP API "
                  "time-stretches beyond that", file=sys.stderr)
            return 2
        # One speech on an engine of its own: no drain ever refuses it, nor does early refusal
        # (admission off, as the engine would admit it).
        try:
            lexicon = server_lexicon(args.lexicon, client.frontend)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        services = SimpleNamespace(engine=client, planner=SegmentPlanner(pool, client.frontend, settings, client.limits),
                                   settings=settings, drain=Drain(), early_refusal=EarlyRefusal(admission_on=False),
                                   lexicon=lexicon)
        started = time.monotonic()
        try:
            library = VoiceLibrary.open(Path(args.voices_dir).expanduser(), client.frontend, pool.run)
            catalog = Catalog(client.frontend, library)
            owner = owner_of(args.api_key) if args.api_key else None
            voice = catalog.voice_choice(args.voice or catalog.default_voice, args.language, args.instructions,
                                         owner=owner, normalize=args.normalize)
            synthesis, _ = await start_speech(services, args.text, voice, args.speed, args.seed, args.max_tokens)
        except SpeechError as exc:
            print(f"error: {exc.reason}", file=sys.stderr)
            # 1: the speech failed (nothing to speak, the engine gone); 2: a request refused.
            return 1 if exc.code in (UNSPEAKABLE, ENGINE_DEAD) else 2
        try:
            first_audio = time.monotonic() - started
            samples = 0
            with wave.open(str(args.output), "wb") as wav:
                wav.setnchannels(1)
                wav.setsampwidth(2)
                wav.setframerate(client.sample_rate)
                async for pcm in synthesis.pcm():
                    wav.writeframes(pcm16(pcm))
                    samples += pcm.size
        except SynthesisFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            synthesis.close()
    seconds = samples / client.sample_rate
    print(f"wrote {args.output}: {seconds:.2f} s of audio, time to first audio {first_audio:.3f} s, "
          f"RTF {(time.monotonic() - started) / max(seconds, 1e-9):.3f}", file=sys.stderr)
    return 0
