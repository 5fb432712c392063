"""The baselines: the same tiny model, texts, token counts and audio path as the engine, with
only the scheduling changed. Each one streams its audio as a server built on it would:

- `sequential`: one request at a time, `generate` on a batch of one; each token is handed to
  the audio path as it is sampled (a generate streamer), so chunks leave as frames complete.
- `static batching`: whatever is waiting when the worker is free (up to the batch size) goes
  into one left-padded `generate`; the batch's tokens reach the audio path after every step,
  so its chunks stream during the call; newcomers wait for the whole batch to end.
- `transformers continuous batching`: a `ContinuousBatchingManager` (the machinery behind
  `generate_batch`) with streaming requests; each token reaches the audio path when the
  manager delivers it to the event loop.
All are greedy (as the engine is here) and never stop before their budget.
"""
from __future__ import annotations

import asyncio
import itertools
import math
import queue
import threading
import time
from dataclasses import dataclass

import torch

from benchmarks.audio_path import StreamingAudio
from benchmarks.corpus import BenchRequest
from benchmarks.trace import RequestTrace
from engine.audio.config import StreamingConfig
from model.config import ModelConfig
from model.loader import load_family, load_frontend, resolve_model_path

# How long a static batcher waits for its batch to fill once the first request is in.
BATCH_COLLECT_S = 0.05


@dataclass(slots=True)
class _Job:
    request: BenchRequest
    prompt: list[int]
    trace: RequestTrace
    done: asyncio.Future
    loop: asyncio.AbstractEventLoop


class SharedModel:
    """What every baseline loads once: the frontend that tokenizes exactly as the engine does,
    the codec and token layout of the engine's own family, and the checkpoint folder."""

    def __init__(self, model_config: ModelConfig) -> None:
        self.frontend = load_frontend(model_config)
        family = load_family(ModelConfig(model=model_config.model, codec=model_config.codec, device="cpu"))
        self.codec = family.codec
        self.layout = family.layout
        self.folder = str(resolve_model_path(model_config.model))
        self.sample_rate = self.codec.sample_rate

    def causal_lm(self):
        from transformers import LlamaForCausalLM

        return LlamaForCausalLM.from_pretrained(self.folder).eval()


class GenerateBatchDriver:
    """A worker thread that runs `generate` on up to `max_batch` waiting requests at a time
    (`max_batch=1` is the sequential baseline). Invariant: a request's future completes after its
    last chunk, or with an error; nothing runs after `close`."""

    def __init__(self, shared: SharedModel, streaming: StreamingConfig, max_batch: int, name: str) -> None:
        self.name = name
        self.sample_rate = shared.sample_rate
        self.shared = shared
        self.streaming = streaming
        self.max_batch = max_batch
        self.model = shared.causal_lm()
        self._jobs: queue.Queue = queue.Queue()
        self._closing = threading.Event()
        self._worker = threading.Thread(target=self._serve, name=f"baseline-{name}", daemon=True)

    async def start(self) -> None:
        self._worker.start()

    async def run(self, request: BenchRequest, trace: RequestTrace) -> None:
        loop = asyncio.get_running_loop()
        prompt = self.shared.frontend.prepare(request.text, request.voice).token_ids
        job = _Job(request, prompt, trace, loop.create_future(), loop)
        self._jobs.put(job)
        await job.done

    async def close(self) -> None:
        self._closing.set()
        self._jobs.put(None)
        await asyncio.to_thread(self._worker.join, 30)

    def _serve(self) -> None:
        torch.set_grad_enabled(False)
        while not self._closing.is_set():
            first = self._jobs.get()
            if first is None:
                return
            batch = [first]
            # NOTE: a batcher waits a moment for the batch to fill; without it, the first client
            # to come back after a batch would start a batch of one and hold the others up.
            collect_until = time.monotonic() + BATCH_COLLECT_S
            while len(batch) < self.max_batch:
                try:
                    job = self._jobs.get(timeout=max(0.0, collect_until - time.monotonic()))
                except queue.Empty:
                    break
                if job is None:
                    return
                batch.append(job)
            # NOTE: a request its client gave up on while it waited is not served.
            batch = [job for job in batch if not job.done.done()]
            if not batch:
                continue
            try:
                self._generate(batch)
                outcome = None
            except Exception as exc:  # noqa: BLE001 - handed to each waiting request
                outcome = exc
            for job in batch:
                job.loop.call_soon_threadsafe(_settle, job.done, outcome)

    def _generate(self, batch: list[_Job]) -> None:
        from transformers import StoppingCriteria, StoppingCriteriaList
        from transformers.generation.streamers import BaseStreamer

        audio = StreamingAudio(self.shared.codec, self.shared.layout, self.streaming)
        for index, job in enumerate(batch):
            audio.open(index, job.trace, job.request.max_tokens)
        closing = self._closing

        class StepStreamer(BaseStreamer):
            prompt_seen = False

            def put(self, value: torch.Tensor) -> None:
                if not self.prompt_seen:  # generate first hands over the prompt
                    self.prompt_seen = True
                    return
                for index, token in enumerate(value.view(-1).tolist()):
                    if audio.is_open(index):
                        audio.push(index, [token])
                audio.flush()

            def end(self) -> None:
                audio.flush()

        class StopWhenAbandoned(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs) -> torch.Tensor:
                stop = closing.is_set() or all(job.done.done() for job in batch)
                return torch.full((input_ids.shape[0],), stop, dtype=torch.bool)

        pad = self.shared.layout.end_of_speech
        width = max(len(job.prompt) for job in batch)
        ids = torch.tensor([[pad] * (width - len(job.prompt)) + job.prompt for job in batch])
        mask = (torch.arange(width)[None, :] >= torch.tensor([width - len(j.prompt) for j in batch])[:, None]).long()
        new_tokens = max(job.request.max_tokens for job in batch)
        self.model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
            do_sample=False, pad_token_id=pad, streamer=StepStreamer(),
            stopping_criteria=StoppingCriteriaList([StopWhenAbandoned()]),
        )


class ContinuousBatchingDriver:
    """transformers' `ContinuousBatchingManager` with streaming requests; per-token outputs come
    back on the event loop, where the shared audio path decodes them. Invariant: a request's trace
    has received all its audio when `run` returns."""

    def __init__(self, shared: SharedModel, streaming: StreamingConfig, max_batch_tokens: int,
                 max_context: int, max_streams: int, name: str = "transformers continuous batching") -> None:
        from transformers import ContinuousBatchingConfig, GenerationConfig

        self.name = name
        self.sample_rate = shared.sample_rate
        self.shared = shared
        self.audio = StreamingAudio(shared.codec, shared.layout, streaming)
        page = 256
        cb_config = ContinuousBatchingConfig(
            # NOTE: the default cache is sized from a memory guess and takes tens of seconds to
            # allocate on a CPU; size it to the workload as the engine's is.
            num_blocks=math.ceil(max_streams * max_context / page) + 1, max_batch_tokens=max_batch_tokens,
        )
        gen_config = GenerationConfig(do_sample=False, eos_token_id=-1)
        self.manager = shared.causal_lm().init_continuous_batching(gen_config, cb_config)
        self._ids = itertools.count()

    async def start(self) -> None:
        self.manager.start()

    async def run(self, request: BenchRequest, trace: RequestTrace) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()
        request_id = f"bench-{next(self._ids)}"
        prompt = self.shared.frontend.prepare(request.text, request.voice).token_ids
        self.audio.open(request_id, trace, request.max_tokens)
        delivered = 0

        def on_output(output) -> None:
            nonlocal delivered
            if done.done():
                return
            if output.error:
                done.set_exception(RuntimeError(output.error))
                return
            new = output.generated_tokens[delivered:]
            delivered = len(output.generated_tokens)
            self.audio.push(request_id, new)
            self.audio.flush()
            if not self.audio.is_open(request_id) or output.is_finished():
                done.set_result(None)

        self.manager.register_result_handler(request_id, on_output)
        self.manager.add_request(prompt, request_id=request_id, max_new_tokens=request.max_tokens,
                                 streaming=True, eos_token_id=-1)
        try:
            await done
        except asyncio.CancelledError:
            self.manager.cancel_request(request_id)
            self.audio.discard(request_id)
            raise

    async def close(self) -> None:
        await asyncio.to_thread(self.manager.stop, True, 30)


def _settle(future: asyncio.Future, error: Exception | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
