"""Streaming load against concurrency for the GPU benchmark: the in-process engine in a closed loop, and
transformers' continuous batching (`generate_batch`) on the same checkpoint and the same requests."""
from __future__ import annotations

import math
import random
import time
from pathlib import Path

import torch

from benchmarks.gpu_plan import Plan
from benchmarks.trace import RequestTrace, summarize
from capacity.config import CapacityConfig

FRAME_TOKENS, FRAME_SAMPLES, SAMPLE_RATE = 7, 2048, 24000
PROMPT_LEN = 32
LOOKAHEAD_FRAMES = 2  # a frame is audible once two later frames exist (the reference streaming window)
SAMPLING = dict(temperature=0.6, top_p=0.9)


def prompts(count: int, vocab: int, seed: int) -> list[list[int]]:
    """Distinct prompts, so the prefix cache cannot turn prefill into a lookup."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(PROMPT_LEN)] for _ in range(count)]


def engine_sweep(family, model_config, plan: Plan) -> list[dict]:
    from engine.config import EngineConfig
    from engine.core import EngineCore
    from memory.config import CacheConfig
    from scheduler.config import SchedulerConfig

    max_seqs = max(plan.concurrency)
    budget = max(2048, max_seqs)
    new_tokens = plan.frames_per_request * FRAME_TOKENS
    # GPU: the pool is sized from free memory after profiling; CPU: exactly what the run needs.
    num_blocks = None if plan.device.type == "cuda" else (
        max_seqs * math.ceil((PROMPT_LEN + new_tokens) / plan.block_size) + math.ceil(budget / plan.block_size))
    config = EngineConfig(
        model=model_config,
        cache=CacheConfig(block_size=plan.block_size, num_blocks=num_blocks),
        scheduler=SchedulerConfig(max_num_seqs=max_seqs, max_num_batched_tokens=budget),
        # Raw work: every stream admitted and stepped, whatever its listener.
        capacity=CapacityConfig(max_queue_delay=None, skip_slack_seconds=None),
        mode="inproc",
    )
    core = EngineCore(config, family=family)
    _closed_loop(core, plan, concurrency=min(2, max_seqs), requests_per_client=1, seed=-1)  # warm-up
    rows = []
    for concurrency in plan.concurrency:
        traces, wall = _closed_loop(core, plan, concurrency, plan.requests_per_client, seed=concurrency)
        rows.append({"concurrency": concurrency, "cuda_graphs": core.runner.decode_graphs is not None,
                     "kv_blocks": core.kv_manager.num_blocks, **summarize(traces, wall)})
    return rows


def _closed_loop(core, plan: Plan, concurrency: int, requests_per_client: int, seed: int):
    """`concurrency` clients each send `requests_per_client` requests one after another; returns the traces
    and the wall time from the first send to the last chunk."""
    from model.families.base import SpeechPrompt
    from model.sampling import SamplingParams

    new_tokens = plan.frames_per_request * FRAME_TOKENS
    params = SamplingParams(max_tokens=new_tokens, min_tokens=new_tokens, **SAMPLING)
    ids = prompts(concurrency * requests_per_client, plan.shape.special_base, seed)
    traces: dict[str, RequestTrace] = {}
    sent_by_client = [0] * concurrency

    def send(client: int) -> None:
        request_id = f"{seed}-{client}-{sent_by_client[client]}"
        traces[request_id] = RequestTrace(sent=time.monotonic(), sample_rate=core.sample_rate)
        core.add_request(request_id, SpeechPrompt(token_ids=ids[len(traces) - 1]), params)
        sent_by_client[client] += 1

    started = time.monotonic()
    for client in range(concurrency):
        send(client)
    while core.has_work:
        chunks = core.step()
        now = time.monotonic()
        for chunk in chunks:
            trace = traces[chunk.request_id]
            trace.record(now, len(chunk.pcm))
            if chunk.finished:
                trace.ok = chunk.error is None and chunk.finish_reason in ("stop", "length")
                client = int(chunk.request_id.split("-")[-2])
                if sent_by_client[client] < requests_per_client:
                    send(client)
    return list(traces.values()), time.monotonic() - started


def baseline_sweep(folder: Path, plan: Plan) -> list[dict]:
    """One generate_batch call per concurrency level with all its requests at once. Its audio is credited
    when the tokens of a frame and its look-ahead exist (token timestamps; the whole output at the end when
    transformers records none), with no codec time: a bound in the baseline's favour."""
    from transformers import ContinuousBatchingConfig, GenerationConfig, LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(str(folder), dtype=torch.bfloat16).to(plan.device).eval()
    new_tokens = plan.frames_per_request * FRAME_TOKENS
    generation = GenerationConfig(max_new_tokens=new_tokens, do_sample=True, eos_token_id=-1, top_k=0,
                                  **SAMPLING)
    rows = []
    for concurrency in plan.baseline_concurrency:
        # NOTE: on the CPU the cache is sized to the workload (its memory guess takes long to allocate).
        num_blocks = None if plan.device.type == "cuda" else concurrency * (PROMPT_LEN + new_tokens) // 256 + 2
        batching = ContinuousBatchingConfig(num_blocks=num_blocks, max_batch_tokens=2048)
        try:
            results = model.generate_batch(inputs=prompts(concurrency, plan.shape.special_base, concurrency),
                                            generation_config=generation, continuous_batching_config=batching)
        except Exception as exc:  # noqa: BLE001 - a failed baseline is reported, the run goes on
            rows.append({"concurrency": concurrency, "error": f"{type(exc).__name__}: {exc}"})
            continue
        outputs = list(results.values())
        wall = max(o.lifespan[1] for o in outputs) - min(o.created_time for o in outputs)
        rows.append({"concurrency": concurrency, "token_timestamps": outputs[0].timestamps is not None,
                     **summarize([baseline_trace(o) for o in outputs], wall)})
    del model
    return rows


def baseline_trace(output) -> RequestTrace:
    trace = RequestTrace(sent=output.created_time, sample_rate=SAMPLE_RATE, ok=output.error is None)
    frames = len(output.generated_tokens) // FRAME_TOKENS
    stamps = output.timestamps
    for frame in range(frames):
        needed = min(frame + 1 + LOOKAHEAD_FRAMES, frames) * FRAME_TOKENS
        arrival = stamps[needed - 1] if stamps else output.lifespan[1]
        trace.record(arrival, FRAME_SAMPLES)
    return trace
