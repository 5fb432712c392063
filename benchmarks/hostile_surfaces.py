"""Issue 51's attacks on the surfaces added with the voice library, pronunciations, SSML's
`say-as` and phonemes written inline, one at a time against a server started here, each with a
normal stream beside it:

    python -m benchmarks.hostile_surfaces                                     # this checkout
    python -m benchmarks.hostile_surfaces --checkout /tmp/old --label before  # another, its own .venv

Results: `results/hostile-surfaces[-label]-<date>.{json,md}`.

Each attack is answered (an HTTP status line, a socket's first message, or first audio) or not
within `--read-seconds`, with the answer a sound server gives (`Attack.expect`) or another;
meanwhile /health is probed every 20 ms, the API process's RSS is sampled every 50 ms, and a
normal request (an evaluation sentence) is sent 0.2 s in and read whole. After it: the API
process's RSS `--after-seconds` later, and whether the API process died (a supervised server
starts a new one; an unsupervised one is started again here for the next attack).

The text attacks run on `--model` (joe: the voice that reads phonemes), without a key; the upload
attacks on UPLOAD_MODEL (a model that clones voices) with `--api-key` KEY and a voice library.
Only 127.0.0.1 is ever targeted. Part of the reliability benchmark's hostile phase.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Awaitable, Callable

import httpx

from benchmarks.hostile import (HealthProbe, RssSampler, read_speech, rss_mb, socket_status, speak_session, speech,
                                ws_url)
from benchmarks.hostile_media import channels_of, encoded, wav_of
from benchmarks.report import machine_line, write_report_json
from benchmarks.server_process import HOST, ServerProcess, chorus_server, free_port
from benchmarks.throughput import machine_info
from evaluation import eval_sentences

UPLOAD_MODEL = "tiny-random-qwen3-base"
KEY = "hostile-surfaces-key"
VOICES = "/v1/audio/voices"
NORMAL_AFTER_S = 0.2
# Issue 51's targets: each attack answered within 1 s (a 4xx, or audio where the input is
# speakable), the API process within +300 MB during it and within 10 % of before after it, /health
# p99 within 100 ms, the normal stream beside it whole with its first audio within 2x idle, and no
# API process death.
ANSWER_S, RSS_GROWTH_MB, RSS_AFTER_RATIO, HEALTH_P99_MS, TTFA_RATIO = 1.0, 300.0, 1.10, 100.0, 2.0

# An attack: sends itself to the server at the base URL and reads for at most `read_s`; returns
# its outcome in a word or two and the seconds until it was answered (None: never).
Send = Callable[[str, float], Awaitable[tuple[str, float | None]]]


@dataclass(frozen=True)
class Attack:
    """One of the issue's attacks. `expect` is what a sound server answers: "served" (a clip a
    voice can be made of, a text it can say: 200 or 201) or "refused" (a 4xx for each request)."""

    name: str
    on: str  # "text" or "upload": which server
    send: Send
    expect: str = "refused"


def answered_as(outcome: str) -> str:
    """What an outcome in a word or two was: "served", "refused" (every answer a 4xx, or a
    socket's Error), or "other" (a drop, no answer, a 5xx)."""
    if outcome.startswith(("200", "201", "audio")):
        return "served"
    codes = [part.split()[0] for part in outcome.split(", ")]
    if outcome.startswith("Error") or all(code.isdigit() and 400 <= int(code) < 500 for code in codes):
        return "refused"
    return "other"


# --- raw HTTP: bodies sent as slowly as an attacker likes, answers read as soon as they come --------

async def raw_post(base_url: str, path: str, headers: dict[str, str], chunks, read_s: float,
                   chunk_delay_s: float = 0.0) -> tuple[str, float | None]:
    """POSTs `chunks` (bytes pieces) as a chunked body with `headers`, `chunk_delay_s` apart,
    while reading the answer: (status or "no answer", seconds to the status line). The client
    leaves as soon as the status line came, whatever it had left to send."""
    port = int(base_url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection(HOST, port)
    head = f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nTransfer-Encoding: chunked\r\n" + \
        "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    started = time.monotonic()

    async def send_body() -> None:
        writer.write(head.encode())
        for chunk in chunks:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
            await asyncio.sleep(chunk_delay_s)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    sending = asyncio.create_task(send_body())
    try:
        line = await asyncio.wait_for(reader.readline(), read_s)
        answered = time.monotonic() - started
        return (line.split()[1].decode() if line.startswith(b"HTTP/") else "closed"), answered
    except (asyncio.TimeoutError, ConnectionError):
        return "no answer", None
    finally:
        sending.cancel()
        writer.close()


def multipart(fields: dict[str, str], filename: str, data: bytes, boundary: str = "hostile") -> tuple[str, bytes]:
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
             for name, value in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="audio"; filename="{filename}"\r\n'
                 f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    return f"multipart/form-data; boundary={boundary}", b"".join(parts) + f"--{boundary}--\r\n".encode()


def upload(media: bytes, filename: str) -> Send:
    """A voice upload of `media` with the key, as a client would send it (one request, sized)."""
    async def send(base_url: str, read_s: float) -> tuple[str, float | None]:
        content_type, body = multipart({"name": f"v{time.monotonic_ns()}"}, filename, media)
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=base_url, timeout=read_s) as client:
            try:
                answer = await client.post(VOICES, content=body, headers={"content-type": content_type,
                                                                          "authorization": f"Bearer {KEY}"})
            except httpx.HTTPError as exc:
                return f"dropped ({type(exc).__name__})", None
        return str(answer.status_code), time.monotonic() - started
    return send


def json_without_key(megabytes: float) -> Send:
    """The issue's body: `[[],[],...]` of `megabytes` MiB as JSON to the upload route, no key."""
    body = b"[" + b",".join([b"[]"] * int(megabytes * 2**20 / 3)) + b"]"
    chunks = [body[i:i + 2**16] for i in range(0, len(body), 2**16)]

    async def send(base_url: str, read_s: float) -> tuple[str, float | None]:
        return await raw_post(base_url, VOICES, {"Content-Type": "application/json"}, chunks, read_s)
    return send


def held_uploads(count: int, megabytes: int, key: str | None) -> Send:
    """`count` multipart uploads of `megabytes` MiB at once (not audio), each chunked with no
    declared size and sent over ~10 s, with `key` or none: a tally of the answers, and the
    slowest refusal (401, 413, 429); the uploads the server takes answer once their whole body
    has come, as slowly as their client sends it."""
    content_type, body = multipart({"name": "held"}, "held.wav", b"\0" * (megabytes * 2**20))
    chunks = [body[i:i + 2**20] for i in range(0, len(body), 2**20)]
    headers = {"Content-Type": content_type, **({"Authorization": f"Bearer {key}"} if key else {})}
    delay = 10.0 / len(chunks)

    async def send(base_url: str, read_s: float) -> tuple[str, float | None]:
        answers = await asyncio.gather(*(raw_post(base_url, VOICES, headers, chunks, read_s + 10.0, delay)
                                         for _ in range(count)))
        tally = ", ".join(f"{outcome} x{sum(o == outcome for o, _ in answers)}"
                          for outcome in sorted({o for o, _ in answers}))
        refusals = [answered for outcome, answered in answers if outcome in ("401", "413", "429")]
        slowest = None if not refusals or None in refusals else max(refusals)
        return tally, slowest
    return send


def spoken(body: dict, path: str = "/v1/audio/speech") -> Send:
    """A speech request: its status, answered at its status line for an error or at its first
    audio; a 200 is read for `read_s` after its first audio (the audio it would go on making is
    what a client would get, and the server would spend)."""
    async def send(base_url: str, read_s: float) -> tuple[str, float | None]:
        async with httpx.AsyncClient(base_url=base_url, timeout=read_s) as client:
            started = time.monotonic()
            read = await read_speech(client, path, read_s, json=body)
        if read.dropped == "ReadTimeout" and read.status is None:
            return "no answer", None
        answered = read.first_audio_s if read.status == 200 else (time.monotonic() - started)
        return (f"200, {read.audio_bytes / 48000:.0f} s read" if read.status == 200 else read.outcome), answered
    return send


def socket_turn(text: str, pronunciations: list[dict]) -> Send:
    """One speak-socket turn: a Speak carrying `pronunciations`, then a Flush."""
    async def send(base_url: str, read_s: float) -> tuple[str, float | None]:
        script = [{"type": "Speak", "text": text, "pronunciations": pronunciations}, {"type": "Flush"}]
        started = time.monotonic()
        outcome = await speak_session(ws_url(base_url, encoding="linear16"), script, read_s, read_s=read_s)
        first = next((m for m in outcome.messages if m.get("type") in ("Error", "Warning")), None)
        answered = outcome.first_audio_s if first is None else time.monotonic() - started
        return socket_status(outcome), answered
    return send


# Three evaluation sentences joined by "and": one sentence of 35 words, its first segment 30 (as
# long as one may be).
LONG_SENTENCE = " and ".join(sentence.rstrip(".") for sentence in eval_sentences()[:3]) + "."
# The respelling: "a" said as a phrase of 299 characters (words: no run too long to cut).
RESPELLING = [{"word": "a", "say_as": ("and so on " * 30)[:299]}]
CARDINAL = '<say-as interpret-as="cardinal">1' + "0" * 1000 + "</say-as>"  # 1,042 characters


def attacks() -> list[Attack]:
    """The issue's cases, in its order; what each sends is made here, before any is measured (so
    that making it takes no time from the client's measurements)."""
    def wav(channels: int) -> bytes:
        return wav_of(channels_of(channels, 2.0, 16000), 16000)

    return [
        Attack("upload: 8-channel WAV", "upload", upload(wav(8), "c8.wav"), "served"),
        Attack("upload: 12-channel WAV", "upload", upload(wav(12), "c12.wav")),
        Attack("upload: 255-channel WAV (15.6 MB)", "upload", upload(wav(255), "c255.wav")),
        Attack("upload: 7.1 FLAC", "upload", upload(encoded("flac", "flac", channels_of(8, 2.0, 24000), 24000),
                                                    "c8.flac"), "served"),
        Attack("15.7 MiB JSON to the upload route, no key", "upload", json_without_key(15.7)),
        Attack("40 held 15 MiB uploads, no key", "upload", held_uploads(40, 15, None)),
        Attack("40 held 15 MiB uploads, with the key (slowest refusal)", "upload", held_uploads(40, 15, KEY)),
        Attack("[[ ə x 250 ]] (OpenAI)", "text", spoken(speech("[[ " + "ə" * 250 + " ]]")), "served"),
        # Not an attack: a first sentence as long as one may be (30 words), for what a legitimately
        # long prompt does to the normal stream beside it.
        Attack("control: a sentence of 35 words (OpenAI)", "text", spoken(speech(LONG_SENTENCE)), "served"),
        Attack("'a ' x 2000, 'a' said in 299 characters (OpenAI)", "text",
               spoken(speech("a " * 2000, pronunciations=RESPELLING))),
        Attack("the same (Deepgram REST)", "text", spoken({"text": "a " * 2000, "pronunciations": RESPELLING},
                                                          "/v1/speak?encoding=linear16&container=none")),
        Attack("the same, 'a ' x 1000 (speak socket)", "text", socket_turn("a " * 1000, RESPELLING)),
        Attack("say-as cardinal 10^1000, 1,057 characters", "text", spoken(speech(f"<speak>{CARDINAL}</speak>"))),
        Attack("say-as cardinal 10^1000 x 3 and prose, 4,092 characters", "text",
               spoken(speech(f"<speak>{CARDINAL * 3} {'And so on, and so forth. ' * 38}</speak>"))),
    ]


# --- servers, and one attack measured -------------------------------------------------------------

class Servers:
    """One server of each kind, started on first use and again once its process has exited (an
    unsupervised API process that died). Invariant: each server `ensure` returns speaks in
    `NORMAL_VOICES[kind]` (the upload server's model speaks only voices made from a clip: one is
    made when it starts)."""

    NORMAL_VOICES = {"text": "alloy", "upload": "normal"}

    def __init__(self, model: str, checkout: Path | None, voices_dir: Path) -> None:
        self.flags = {"text": (model, []),
                      "upload": (UPLOAD_MODEL, ["--api-key", KEY, "--voices-dir", str(voices_dir)])}
        self.checkout = checkout
        self._running: dict[str, ServerProcess] = {}

    def __enter__(self) -> "Servers":
        return self

    def __exit__(self, *exc_info) -> None:
        for server in self._running.values():
            server.stop()

    def ensure(self, kind: str) -> ServerProcess:
        server = self._running.get(kind)
        if server is not None and server.exited:
            server.stop()
            server = None
        if server is None:
            model, flags = self.flags[kind]
            server = self._running[kind] = chorus_server(model, free_port(), flags, checkout=self.checkout).__enter__()
            if kind == "upload":
                content_type, body = multipart({"name": self.NORMAL_VOICES[kind]}, "normal.wav",
                                               wav_of(channels_of(1, 3.0, 24000), 24000))
                made = httpx.post(server.base_url + VOICES, content=body, timeout=60,
                                  headers={"content-type": content_type, "authorization": f"Bearer {KEY}"})
                if made.status_code not in (201, 409):  # 409: made already, before a restart
                    raise RuntimeError(f"could not make the normal voice: {made.status_code} {made.text}")
        return server


async def normal_ttfa(base_url: str, voice: str) -> float | None:
    """A normal request's first audio, read whole (None: it failed); with the key, which a server
    without keys ignores."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60, headers={"authorization": f"Bearer {KEY}"}) as client:
        read = await read_speech(client, "/v1/audio/speech", json=speech(eval_sentences()[0], voice=voice))
    return read.first_audio_s if read.status == 200 and read.dropped is None else None


async def measure(servers: Servers, attack: Attack, read_s: float, after_s: float) -> dict:
    server = servers.ensure(attack.on)
    server.wait_idle(30.0)
    voice = servers.NORMAL_VOICES[attack.on]
    idle = statistics.median([await normal_ttfa(server.base_url, voice) or float("inf") for _ in range(3)])
    api_pid = server.api_pid
    with HealthProbe(server.base_url) as probe, RssSampler(api_pid) as rss:
        hostile = asyncio.create_task(attack.send(server.base_url, read_s))
        await asyncio.sleep(NORMAL_AFTER_S)
        normal = await normal_ttfa(server.base_url, voice)
        outcome, answered = await hostile
    await asyncio.sleep(after_s)
    died = server.exited or server.api_pid != api_pid
    return {"attack": attack.name, "expect": attack.expect, "outcome": outcome, "answered_s": answered,
            "answered_as": answered_as(outcome), "rss_before_mb": rss.before_mb,
            "rss_peak_mb": rss.peak_mb, "rss_after_mb": None if died else rss_mb(api_pid),
            "health": probe.summary(), "ttfa_idle_s": idle, "ttfa_s": normal,
            "ttfa_ratio": None if normal is None else normal / idle, "api_died": died}


def met(record: dict) -> bool:
    """Whether one attack met every target, its answer the one expected among them."""
    after = record["rss_after_mb"]
    return (record["answered_as"] == record["expect"]
            and record["answered_s"] is not None and record["answered_s"] <= ANSWER_S
            and record["rss_peak_mb"] - record["rss_before_mb"] <= RSS_GROWTH_MB
            and after is not None and after <= RSS_AFTER_RATIO * record["rss_before_mb"]
            and record["health"]["p99_ms"] <= HEALTH_P99_MS and record["health"]["failures"] == 0
            and record["ttfa_ratio"] is not None and record["ttfa_ratio"] <= TTFA_RATIO and not record["api_died"])


def run(model: str, checkout: Path | None, read_s: float, after_s: float,
        only: list[str] | None = None) -> list[dict]:
    """Every attack (or those whose name holds one of `only`), each measured alone."""
    chosen = [attack for attack in attacks() if not only or any(part in attack.name for part in only)]
    # NOTE: this client times first audio in tens of milliseconds; one full collection of what it
    # has imported (torch among it) takes as long. Frozen out, as the server's are.
    gc.collect()
    gc.freeze()
    with tempfile.TemporaryDirectory(prefix="chorus-voices-") as voices, \
            Servers(model, checkout, Path(voices)) as servers:
        records = []
        for attack in chosen:
            print(f"  {attack.name} ...", file=sys.stderr)
            records.append(asyncio.run(measure(servers, attack, read_s, after_s)))
        return records


def table(records: list[dict]) -> list[str]:
    lines = ["| attack | expected | answer | answered | API RSS before → peak → after | /health p99 / max | "
             "normal TTFA (vs idle) | API died | met |",
             "| --- | --- | --- | ---: | --- | ---: | ---: | :---: | :---: |"]
    for r in records:
        answered = "never" if r["answered_s"] is None else f"{1000 * r['answered_s']:.0f} ms"
        after = "–" if r["rss_after_mb"] is None else f"{r['rss_after_mb']:.0f}"
        ttfa = "failed" if r["ttfa_s"] is None else f"{1000 * r['ttfa_s']:.0f} ms ({r['ttfa_ratio']:.2f}x)"
        health = r["health"]
        lines.append(f"| {r['attack']} | {r['expect']} | {r['outcome']} | {answered} | {r['rss_before_mb']:.0f} → "
                     f"{r['rss_peak_mb']:.0f} → {after} MB | {health['p99_ms']:.0f} / {health['max_ms']:.0f} ms | "
                     f"{ttfa} | {'yes' if r['api_died'] else 'no'} | {'✓' if met(r) else '✗'} |")
    return lines


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="joe", help="the model of the text attacks")
    parser.add_argument("--checkout", type=Path, default=None,
                        help="serve another checkout of Chorus (its own .venv), to compare before and after")
    parser.add_argument("--read-seconds", type=float, default=10.0)
    parser.add_argument("--after-seconds", type=float, default=5.0)
    parser.add_argument("--only", nargs="+", default=None, help="only the attacks whose name holds one of these")
    parser.add_argument("--label", default="", help="added to the result files' names (e.g. before, after)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.hostile_surfaces " + " ".join(argv if argv is not None else sys.argv[1:])
    started = datetime.now(timezone.utc)
    load_before = os.getloadavg()
    records = run(args.model, args.checkout, args.read_seconds, args.after_seconds, args.only)
    served = "this checkout" if args.checkout is None else f"the checkout {args.checkout} at {_commit(args.checkout)}"
    machine = machine_info() | {"load_average": load_before, "load_average_after": os.getloadavg()}
    report = {"date": started.isoformat(timespec="seconds"), "command": command.strip(), "served": served,
              "machine": machine, "attacks": records}
    name = "hostile-surfaces" + (f"-{args.label}" if args.label else "")
    paths = write_report_json(args.out, name, started, report)
    lines = [f"# Hostile surfaces, {report['date']}", "", f"`{command.strip()}`", "",
             machine_line(machine, f"serving {served}"), "", *table(records)]
    paths["markdown"].write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return records


def _commit(checkout: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=checkout)
    return done.stdout.strip() or "an unknown commit"


if __name__ == "__main__":
    main()
