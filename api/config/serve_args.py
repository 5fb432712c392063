"""The flags of `chorus serve`, and the API settings they ask for: shared by the server and by
each Ray Serve replica (api/ray_serve/), which reads the very flags the server was given."""
from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from api.config.engine_args import add_engine_args
from api.http.protocol import DEFAULT_HEAD_TIMEOUT_SECONDS
from api.config.settings import ApiSettings


def add_serve_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--api-key", action="append", dest="api_keys", default=None,
        help="require 'Authorization: Bearer KEY' on /v1 and /metrics; repeat it for several keys, each "
             "owning its own stored voices (default: $CHORUS_API_KEY)",
    )
    parser.add_argument("--api-keys-file", type=Path, default=None,
                        help="a file of accepted API keys, one a line (blank lines and lines starting with # "
                             "are skipped), with or besides --api-key")
    parser.add_argument("--voices-dir", default=os.environ.get("CHORUS_VOICES_DIR") or str(default_voices_dir()),
                        help="where the voice library keeps uploaded voices (default: $CHORUS_VOICES_DIR, else "
                             "$XDG_DATA_HOME/chorus/voices, else ~/.local/share/chorus/voices)")
    parser.add_argument("--max-voices-per-owner", type=int, default=ApiSettings().max_voices_per_owner,
                        help="the most voices one API key (or, without keys, the server) may store")
    parser.add_argument("--normalize-text", action="store_true",
                        help="normalize the text of requests to a model that reads raw text (Orpheus, Qwen3-TTS: "
                             "'$3.50' as 'three dollars and fifty cents') unless a request says normalize false; "
                             "joe always does")
    add_lexicon_arg(parser)
    parser.add_argument("--max-voice-upload-bytes", type=int, default=ApiSettings().max_voice_upload_bytes,
                        help="the largest voice upload (POST /v1/audio/voices) in bytes; larger ones get a 413")
    parser.add_argument("--clip-decoders", type=int, default=ApiSettings().clip_decoders,
                        help="voice uploads decoded at once, each in a process of its own (default %(default)d)")
    parser.add_argument("--clip-decoder-memory-mb", type=int, default=ApiSettings().clip_decoder_memory_mb,
                        help="the address space of a decoder process, in MiB (default %(default)d)")
    parser.add_argument("--clip-decoder-cpu-seconds", type=float, default=ApiSettings().clip_decoder_cpu_seconds,
                        help="CPU seconds a decoder process may spend on one upload (default %(default)g)")
    parser.add_argument("--clip-decoder-timeout-seconds", type=float,
                        default=ApiSettings().clip_decoder_timeout_seconds,
                        help="wall-clock seconds one upload's decoding may take (default %(default)g)")
    parser.add_argument("--max-uploads-in-progress", type=int, default=ApiSettings().max_uploads_in_progress,
                        help="voice uploads the server takes at once; one more gets a 429 before its body is read "
                             "(default %(default)d)")
    parser.add_argument("--max-uploads-per-key", type=int, default=ApiSettings().max_uploads_per_key,
                        help="voice uploads one API key may have in progress at once (default %(default)d)")
    parser.add_argument("--head-timeout-seconds", type=float, default=DEFAULT_HEAD_TIMEOUT_SECONDS,
                        help="close a connection whose request line and headers take longer than this")
    parser.add_argument("--body-timeout-seconds", type=float, default=ApiSettings().body_timeout_seconds,
                        help="answer 408 to a request whose body takes longer than this to arrive")
    parser.add_argument("--drain-timeout", type=float, default=30.0,
                        help="on SIGTERM, seconds to let speeches in flight finish before ending them")
    parser.add_argument("--max-api-restarts", type=int, default=5,
                        help="restarts of a dead API process (killed by a signal, or a crash after it was ready) "
                             "allowed within --restart-window-seconds; one more death and the server exits "
                             "non-zero (0: never restart; with --replicas, Ray Serve restarts them instead)")
    parser.add_argument("--enable-docs", action="store_true",
                        help="serve FastAPI's /docs and /redoc pages (they load JavaScript from a CDN)")
    parser.add_argument("--replicas", type=int, default=None,
                        help="serve through Ray Serve with this many replicas, each its own engine, behind one "
                             "endpoint at --host/--port (needs `pip install chorus-tts[ray]`; "
                             "docs/operations.md \"Scaling out\")")
    parser.add_argument("--replica-cpus", type=float, default=1.0,
                        help="with --replicas: CPUs Ray reserves for each replica")
    parser.add_argument("--replica-gpus", type=float, default=0.0,
                        help="with --replicas: GPUs Ray gives each replica (1 on a GPU machine)")
    add_prompt_args(parser)
    parser.add_argument(
        "--prompt-cache-mb", type=float, default=ApiSettings().prompt_cache_mb,
        help="keep the prompts of short texts said again (greetings, fillers) within this many MiB, so a "
             "repeat needs no preparation (default %(default)g; 0: keep none)",
    )
    add_limit_args(parser)
    add_engine_args(parser)


# The limits on one request's cost and on the speak socket (docs/operations.md, "Limits"): each
# an ApiSettings field of the same name, whose default the flag takes.
LIMIT_FLAGS = {
    "max_segment_words": "the most words of one segment (an engine request) of a speech",
    "max_prompt_tokens": "the most tokens of one segment's prompt: longer ones are cut before they are prepared",
    "first_segment_max_tokens": "the same for a speech's first segment, whose first audio waits on it",
    "max_word_chars": "the longest run of characters without whitespace an input may hold (400 beyond)",
    "max_spoken_chars": "the most characters one request (or speak-socket turn) may say, counted after SSML, "
                        "pronunciations and normalization (400 beyond)",
    "max_speech_seconds": "the most seconds of speech one request (or speak-socket turn) may ask for, at its "
                          "speed and with its pauses (400 beyond)",
    "socket_max_speak_chars": "the most characters of text one speak-socket Speak message may carry",
    "socket_max_turn_chars": "the most characters of text one speak-socket turn (between Flushes) may carry",
    "socket_max_message_bytes": "the largest speak-socket message, in bytes",
    "socket_idle_seconds": "close a speak socket with no message and nothing to send for this long",
    "socket_send_timeout_seconds": "close a speak socket whose client reads nothing for this long",
}


def add_limit_args(parser: argparse.ArgumentParser) -> None:
    defaults = ApiSettings()
    for name, help_text in LIMIT_FLAGS.items():
        default = getattr(defaults, name)
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default,
                            help=f"{help_text} (default {default:g})")


def serve_settings_from_args(args: argparse.Namespace) -> ApiSettings:
    """The API settings `chorus serve` flags ask for (also each Ray Serve replica's)."""
    limits = {name: getattr(args, name) for name in LIMIT_FLAGS}
    return ApiSettings(api_keys=api_keys_from_args(args), prompt_workers=args.prompt_workers,
                       prompt_cache_mb=args.prompt_cache_mb,
                       enable_docs=args.enable_docs, body_timeout_seconds=args.body_timeout_seconds,
                       voices_dir=args.voices_dir, max_voices_per_owner=args.max_voices_per_owner,
                       max_voice_upload_bytes=args.max_voice_upload_bytes, normalize_text=args.normalize_text,
                       clip_decoders=args.clip_decoders, clip_decoder_memory_mb=args.clip_decoder_memory_mb,
                       clip_decoder_cpu_seconds=args.clip_decoder_cpu_seconds,
                       clip_decoder_timeout_seconds=args.clip_decoder_timeout_seconds,
                       max_uploads_in_progress=args.max_uploads_in_progress,
                       max_uploads_per_key=args.max_uploads_per_key,
                       lexicon=args.lexicon, **limits)


def api_keys_from_args(args: argparse.Namespace) -> tuple[str, ...]:
    """--api-key (or $CHORUS_API_KEY when none is given) and the keys of --api-keys-file, each once."""
    keys = list(args.api_keys or ([os.environ["CHORUS_API_KEY"]] if os.environ.get("CHORUS_API_KEY") else []))
    if args.api_keys_file is not None:
        lines = args.api_keys_file.read_text().splitlines()
        keys += [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    return tuple(dict.fromkeys(key.strip() for key in keys if key.strip()))


def add_lexicon_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lexicon", default=None,
                        help="a pronunciation lexicon for every request: a JSON array of {\"word\", \"phonemes\" (IPA) "
                             "or \"say_as\" (a respelling)}, as a request's `pronunciations` (docs/api.md)")


def default_voices_dir() -> Path:
    """A per-user place for data that should outlive the process (the XDG base directory spec)."""
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "chorus" / "voices"


def add_prompt_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prompt-workers", type=int, default=ApiSettings().prompt_workers,
        help="threads preparing prompts (text to phonemes, durations), first segments before later ones "
             "(default 2: with one, a speech's first segment waits whenever another speech's segment is "
             "being prepared; see docs/operations.md \"Prompt workers\")",
    )


def parse_serve_flags(flags: list[str] | str) -> argparse.Namespace:
    """`chorus serve`'s flags (a list, or one shell-quoted string) as the server reads them."""
    parser = argparse.ArgumentParser(prog="chorus serve")
    add_serve_args(parser)
    return parser.parse_args(shlex.split(flags) if isinstance(flags, str) else flags)
