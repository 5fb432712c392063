"""The plain alternative to Chorus, built the way a careful user would: Piper's voice behind a
small streaming server that speaks each request sentence by sentence.

    python -m benchmarks.piper_sentence_server --port 8001 [--workers 2]

POST /synthesize {"text": "..."} → 200, headerless mono 16-bit PCM at the voice's rate, streamed:
each sentence (Piper's own split, through espeak-ng) is synthesized on a thread pool of
`--workers` threads, one onnxruntime intra-op thread each, and its audio leaves as soon as it
and the sentences before it are done. A request keeps one sentence in the pool at a time (the
next one is submitted when the one before it is done), so that the requests in flight share
the workers instead of the first long paragraph taking them all. GET /info answers when the
voice is loaded. It is a benchmark peer: 127.0.0.1 only, no limits, no admission control.
"""
from __future__ import annotations

import argparse
import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np
# NOTE: at module level: FastAPI reads the handlers' annotations (strings, with the __future__
# import) in this module's namespace.
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse


def build_app(workers: int) -> FastAPI:
    import onnxruntime
    from piper import PiperVoice

    from benchmarks.peers import piper_voice

    model, sample_rate = piper_voice()
    voice = PiperVoice.load(model)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # one core per sentence; the pool's threads are the parallelism
    options.inter_op_num_threads = 1
    voice.session = onnxruntime.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="piper-sentence")
    app = FastAPI()

    def sentence_pcm(phonemes: list[str]) -> bytes:
        audio = voice.phoneme_ids_to_audio(voice.phonemes_to_ids(phonemes))
        return (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()

    @app.get("/info")
    async def info() -> JSONResponse:
        return JSONResponse({"sample_rate": sample_rate, "workers": workers})

    @app.post("/synthesize")
    async def synthesize(request: Request) -> StreamingResponse:
        text = (await request.json())["text"]
        loop = asyncio.get_running_loop()
        sentences = await loop.run_in_executor(pool, voice.phonemize, text)

        async def body():
            for phonemes in sentences:
                yield await loop.run_in_executor(pool, sentence_pcm, phonemes)

        return StreamingResponse(body(), media_type="audio/pcm")

    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    uvicorn.run(build_app(args.workers), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
