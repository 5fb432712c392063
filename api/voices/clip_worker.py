"""A decoder process: one upload in, one clip (or the reason it is none) out, then it exits.
Started by api/voices/clip_decoder.py as `python -m api.voices.clip_worker --memory-mb M
--cpu-seconds S`; it imports numpy, PyAV and api/voices/clip.py, nothing else of the server.

Before it reads a byte of input it limits itself: M MiB of address space (RLIMIT_AS), S CPU
seconds for its job beyond what starting took, rounded up to a whole second (RLIMIT_CPU: SIGXCPU
then ends it), no core dumps, no files written, a few file descriptors. Then it reads one job on
stdin and answers on stdout.

The framing, both ways: a message is a 4-byte big-endian length n, n bytes of UTF-8 JSON (its
header), a 4-byte big-endian length m, m bytes of payload.
  job     header {"sample_rate": int, "min_seconds": float, "max_seconds": float}; payload the upload
  answer  header {"sample_rate": int, "original_seconds": float}; payload the clip's samples,
          float32 little-endian
          or header {"reason": str, "message": str} (a ClipRejected); payload empty
Running out of memory exits with EXIT_OUT_OF_MEMORY; anything else that goes wrong ends the
process without an answer, which the parent reports as the decoder failing.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import sys
from typing import BinaryIO

from api.voices.clip import ClipRejected, prepare_clip

LENGTH = struct.Struct(">I")
EXIT_OUT_OF_MEMORY = 3
# stdin, stdout, stderr and the answer's duplicate of stdout: FFmpeg reads the upload from memory.
MAX_OPEN_FILES = 16


def message_head(header: dict, payload_size: int) -> bytes:
    """A message up to its payload: what comes before the payload's bytes."""
    body = json.dumps(header).encode()
    return LENGTH.pack(len(body)) + body + LENGTH.pack(payload_size)


def encode_message(header: dict, payload: bytes = b"") -> bytes:
    return message_head(header, len(payload)) + payload


def read_message(stream: BinaryIO) -> tuple[dict, bytes]:
    header = json.loads(_read_exactly(stream, LENGTH.unpack(_read_exactly(stream, LENGTH.size))[0]))
    return header, _read_exactly(stream, LENGTH.unpack(_read_exactly(stream, LENGTH.size))[0])


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError(f"the job ended after {len(data)} of {size} bytes")
    return data


def limit_resources(memory_mb: int, cpu_seconds: float) -> None:
    """This process's limits, for one job (soft and hard alike: it never raises them again)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    # NOTE: the hard CPU limit a second later ends with SIGKILL a job that ignores SIGXCPU.
    cpu = int(used.ru_utime + used.ru_stime + cpu_seconds) + 1
    for limit, value in ((resource.RLIMIT_AS, memory_mb * 2**20), (resource.RLIMIT_CPU, (cpu, cpu + 1)),
                         (resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, 0),
                         (resource.RLIMIT_NOFILE, MAX_OPEN_FILES)):
        resource.setrlimit(limit, value if isinstance(value, tuple) else (value, value))


def answer(job: dict, data: bytes) -> bytes:
    """The job's answer message (a refusal is an answer too)."""
    try:
        clip = prepare_clip(data, job["sample_rate"], min_seconds=job["min_seconds"], max_seconds=job["max_seconds"])
    except ClipRejected as refused:
        return encode_message({"reason": refused.reason, "message": str(refused)})
    return encode_message({"sample_rate": clip.sample_rate, "original_seconds": clip.original_seconds},
                          clip.samples.astype("<f4").tobytes())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m api.voices.clip_worker")
    parser.add_argument("--memory-mb", type=int, required=True)
    parser.add_argument("--cpu-seconds", type=float, required=True)
    args = parser.parse_args()
    # The answer gets stdout's pipe to itself: whatever a library prints goes to stderr instead.
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    limit_resources(args.memory_mb, args.cpu_seconds)
    try:
        answers.write(answer(*read_message(sys.stdin.buffer)))
        answers.flush()
    except MemoryError:
        os._exit(EXIT_OUT_OF_MEMORY)
    # NOTE: no clean-up: PyAV 18 frees a custom-order channel layout (a 7.1 AIFF's) twice when
    # its objects are deallocated, and the process has nothing left to release.
    os._exit(0)


if __name__ == "__main__":
    main()
