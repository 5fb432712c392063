"""`chorus`: say (text → WAV through the engine) and serve (the HTTP server). The load benchmark
and the profiler are the benchmarks' own commands: `chorus-bench bench|profile` (or
`python -m benchmarks bench|profile`).

`chorus serve` runs as a supervisor (api/http/supervisor.py) that starts this same command again
as the API process; this module therefore imports only what its flags need, and each command
loads the rest when it runs.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from api.config.engine_args import add_engine_args, engine_config_from_args
from api.config.serve_args import (add_lexicon_arg, add_prompt_args, add_serve_args, default_voices_dir,
                                  serve_settings_from_args)
from api.http import supervisor


def _serve(args: argparse.Namespace) -> int:
    if args.replicas is not None:
        from api.ray_serve.local import run_replicas

        return run_replicas(args, args.serve_flags)
    if not supervisor.supervised():
        return supervisor.supervise(args, args.serve_flags)
    return _serve_api(args)


def _serve_api(args: argparse.Namespace) -> int:
    """The API process: the app on the sockets its supervisor handed it."""
    import uvicorn

    from api.app import create_app
    from api.deepgram.socket import ws_max_size
    from api.http.protocol import BoundedWebSocketProtocol, bounded_h11
    from api.http.server import DrainingServer

    settings = serve_settings_from_args(args)
    app = create_app(engine_config_from_args(args), settings)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="info",
                            http=bounded_h11(args.head_timeout_seconds),
                            ws=BoundedWebSocketProtocol, ws_max_size=ws_max_size(settings))
    server = DrainingServer(config, app, args.drain_timeout, on_started=supervisor.report_ready)
    app.state.request_shutdown = lambda: setattr(server, "should_exit", True)
    server.run(sockets=supervisor.inherited_sockets())
    return getattr(app.state, "exit_code", 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chorus", description="Continuous-batching TTS serving")
    sub = parser.add_subparsers(dest="command", required=True)
    say = sub.add_parser("say", help="synthesize text to a WAV file through the engine")
    say.add_argument("text")
    say.add_argument("-o", "--output", type=Path, default=Path("out.wav"))
    say.add_argument("--voice", default=None, help="a voice of the model, an OpenAI voice name, or the name or id "
                                                  "of a voice of the library (default: the model's first)")
    say.add_argument("--voices-dir", default=os.environ.get("CHORUS_VOICES_DIR") or str(default_voices_dir()),
                     help="the voice library `chorus serve` keeps (default: as serve's)")
    say.add_argument("--api-key", default=None, help="with a library of several keys: the key whose voices --voice "
                                                    "names (default: the voices made without a key)")
    say.add_argument("--language", default=None, help="the language the text is read in (default: auto)")
    say.add_argument("--instructions", default=None,
                     help="how to speak, for a model that reads instructions (Qwen3-TTS CustomVoice: optional; "
                          "VoiceDesign: the voice's description, required)")
    say.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                     help="read the text through the English normalizer first ('$3.50' as 'three dollars and "
                          "fifty cents'): for models that read raw text (Orpheus, Qwen3-TTS); joe always does")
    add_lexicon_arg(say)
    say.add_argument("--seed", type=int, default=None)
    say.add_argument("--max-tokens", type=int, default=None, help="the most outputs of each segment")
    say.add_argument("--speed", type=float, default=1.0, help="speaking rate (models with rate control: joe)")
    add_prompt_args(say)
    add_engine_args(say)
    say.set_defaults(engine_mode="inproc")
    serve = sub.add_parser("serve", help="start the HTTP server")
    add_serve_args(serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "say":
        from api.say import say

        try:
            return asyncio.run(say(args))
        except ValueError as exc:  # bad text or voice, a refused request: say why, no traceback
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.max_api_restarts < 0:
        parser.error("--max-api-restarts must be >= 0")
    # The API process and Ray Serve replicas read the very flags this server was given.
    argv = sys.argv[1:] if argv is None else argv
    args.serve_flags = argv[argv.index("serve") + 1:]
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
