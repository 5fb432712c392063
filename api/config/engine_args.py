"""Command-line flags that map one-to-one onto the engine's config dataclasses."""
from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from capacity.config import CapacityConfig
from engine.allocator import ALLOCATORS
from engine.gpu_config import GpuConfig
from memory.config import CacheConfig
from model.config import CPU_BATCH_PRECISIONS, TEXT_SPLITS, ModelConfig
from scheduler.config import SchedulerConfig

if TYPE_CHECKING:
    from engine.config import EngineConfig


# NOTE: slots dataclasses keep no class-level defaults, so defaults come from instances.
_MODEL, _CACHE, _SCHED, _CAPACITY = ModelConfig(), CacheConfig(), SchedulerConfig(), CapacityConfig()


def _seconds_or_none(text: str) -> float | None:
    return None if text.lower() == "none" else float(text)


def add_engine_args(parser: argparse.ArgumentParser) -> None:
    model = parser.add_argument_group("model")
    model.add_argument("--model", default=_MODEL.model, help="model folder or built-in name (joe, tiny-random, ...: docs/voices.md lists them)")
    model.add_argument("--codec", default=None, help="Orpheus: SNAC codec folder (default: <model>/codec); "
                       "joe: istft (default) or hifigan")
    model.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    model.add_argument("--dtype", default="auto", help="auto, float32, bfloat16 or float16")
    model.add_argument("--attention-backend", default="auto",
                       help="auto (triton on CUDA, torch otherwise), torch, triton, or xformers "
                            "(CUDA: xformers for prefill, triton for decode)")
    model.add_argument("--max-model-len", type=int, default=None)
    model.add_argument("--cpu-batch-precision", default=_MODEL.cpu_batch_precision, choices=CPU_BATCH_PRECISIONS,
                       help="a float32 model's products of several rows on the CPU: bfloat16 (AVX-512 BF16 or "
                            "AMX), float32, or auto (bfloat16 where the CPU has those; the joe student only)")
    model.add_argument("--text-split", default=_MODEL.text_split, choices=TEXT_SPLITS,
                       help="Qwen3-TTS: how text is cut into words before its tokens: auto (as the reference "
                            "does for this folder: at inner capitals, i|Phone, for the released checkpoints), "
                            "qwen2 (Qwen2's split, iPhone whole) or mistral-fix (at inner capitals)")
    cache = parser.add_argument_group("KV cache")
    cache.add_argument("--block-size", type=int, default=_CACHE.block_size)
    cache.add_argument("--gpu-memory-utilization", type=float, default=_CACHE.gpu_memory_utilization)
    cache.add_argument("--cpu-kv-cache-mib", type=int, default=_CACHE.cpu_kv_cache_bytes // 2**20)
    cache.add_argument("--voices-codec-states-mib", type=float, default=_CACHE.codec_primer_bytes / 2**20,
                       help="host memory for the codec states cloned voices start from (Qwen3-TTS in-context "
                            "voices: ~5.2 MiB each at the released size), least recently used dropped and "
                            "decoded again when next used (default %(default)g)")
    cache.add_argument("--num-kv-blocks", type=int, default=None, help="fix the pool size (overrides profiling)")
    cache.add_argument("--no-prefix-caching", action="store_true")
    cache.add_argument("--kv-cache-dtype", choices=("auto", "fp8_e4m3"), default=_CACHE.kv_cache_dtype,
                       help="fp8_e4m3: half the bytes of bf16 per cached token (CUDA)")
    sched = parser.add_argument_group("scheduler")
    sched.add_argument("--max-num-seqs", type=int, default=_SCHED.max_num_seqs)
    sched.add_argument("--max-num-batched-tokens", type=int, default=_SCHED.max_num_batched_tokens)
    sched.add_argument("--max-prefill-chunk", type=int, default=None)
    sched.add_argument("--max-waiting", type=int, default=_SCHED.max_waiting)
    sched.add_argument("--policy", choices=("fcfs", "priority"), default="fcfs")
    capacity = parser.add_argument_group("capacity (admission and slack thresholds)")
    capacity.add_argument("--max-queue-delay", type=_seconds_or_none, default=_CAPACITY.max_queue_delay,
                          help="seconds a new request may wait for its first audio before it is refused (429); "
                               "'none': no admission control, every request waits its turn")
    capacity.add_argument("--skip-slack-seconds", type=_seconds_or_none, default=_CAPACITY.skip_slack_seconds,
                          help="a stream whose listener holds more than this much audio sits out steps that "
                               "others need; 'none': every stream takes every step")
    capacity.add_argument("--pace-slack-seconds", type=_seconds_or_none, default=_CAPACITY.pace_slack_seconds,
                          help="batch-aware pacing: while two or more streams play, one whose listener holds more "
                               "than this much audio takes no step of its own and joins steps others need (less CPU "
                               "per audio second; clients that save the audio rather than play it get it at about "
                               "real time past this lead); default: off, every stream steps as fast as it can")
    capacity.add_argument("--urgent-slack-seconds", type=float, default=None,
                          help="send what is ready (in first-chunk-sized pieces) when a stream's emitted audio "
                               "would run out within this many seconds; 0 disables (default: the codec's own)")
    capacity.add_argument("--defer-slack-seconds", type=float, default=None,
                          help="a codec window past the step's share may wait for a later step while its "
                               "listener holds more than this much audio; inf: never (default: the codec's own)")
    capacity.add_argument("--feed-slack-seconds", type=float, default=_CAPACITY.feed_slack_seconds,
                          help="incremental decoding feeds a stream every step while its listener holds at most "
                               "this much audio, else in longer pieces")
    stream = parser.add_argument_group("streaming codec")
    stream.add_argument("--first-chunk-frames", type=int, default=None,
                        help="frames in a stream's first chunk of audio (default: the codec's own)")
    stream.add_argument("--chunk-frames", type=int, default=None,
                        help="frames in each later chunk (default: the codec's own)")
    stream.add_argument("--grow-chunks", action=argparse.BooleanOptionalAction, default=None,
                        help="later chunks as long as all the audio before them, up to --chunk-frames "
                             "(default: the codec's own)")
    stream.add_argument("--left-context-frames", type=int, default=None,
                        help="frames decoded before each chunk for context (default: the codec's own)")
    stream.add_argument("--lookahead-frames", type=int, default=None,
                        help="frames decoded after each chunk for context (default: the codec's own)")
    stream.add_argument("--first-lookahead-frames", type=int, default=None,
                        help="the same for a stream's first chunk, whose audio waits for them "
                             "(default: the codec's own)")
    stream.add_argument("--crossfade-samples", type=int, default=None,
                        help="samples blended across each seam between chunks (default: the codec's own)")
    stream.add_argument("--incremental", action=argparse.BooleanOptionalAction, default=True,
                        help="decode each stream's frames once through the codec's incremental decoder, "
                             "where it has one and decoding runs in the step (default: yes)")
    stream.add_argument("--codec-thread", action=argparse.BooleanOptionalAction, default=False,
                        help="on the CPU, decode audio on a thread of its own beside the next step's "
                             "model forward, a step later but for first chunks (default: no; "
                             "benchmarks/results/codec-thread-2026-12-04.md)")
    gpu = parser.add_argument_group("GPU (ignored on the CPU)")
    gpu.add_argument("--no-cuda-graphs", action="store_true", help="run decode steps eagerly on CUDA")
    gpu.add_argument("--no-sample-in-graph", action="store_true",
                     help="decode graphs hold the backbone only; head and sampling run after the replay")
    gpu.add_argument("--no-overlap-codec", action="store_true",
                     help="decode codec windows in the step, not on their own stream beside the next one")
    gpu.add_argument("--no-codec-graphs", action="store_true", help="decode codec windows eagerly")
    gpu.add_argument("--fused-ops", action="store_true", help="Triton-fused RMSNorm + residual and SiLU-and-multiply")
    parser.add_argument("--engine-mode", choices=("process", "inproc"), default="process")
    parser.add_argument("--num-threads", type=int, default=None, help="torch threads of the engine core")
    parser.add_argument("--allocator", choices=ALLOCATORS, default="auto",
                        help="malloc of the engine core process: auto preloads tcmalloc into a CPU core when "
                             "the system has it (CPU steps 9-22 %% shorter in our runs), tcmalloc requires it, "
                             "system keeps the C library's")
    parser.add_argument("--max-core-restarts", type=int, default=5,
                        help="restarts of a dead engine core allowed within --restart-window-seconds; one "
                             "more death and the server exits non-zero (0: never restart)")
    parser.add_argument("--restart-window-seconds", type=float, default=300.0)


def engine_config_from_args(args: argparse.Namespace) -> EngineConfig:
    # NOTE: imported here, not above: the engine's config loads torch (through the codecs), and
    # `chorus serve`'s supervisor builds these flags without it (api/http/supervisor.py).
    from engine.audio.config import StreamingConfig
    from engine.config import EngineConfig

    return EngineConfig(
        model=ModelConfig(
            model=args.model,
            codec=args.codec,
            device=args.device,
            dtype=args.dtype,
            attention_backend=args.attention_backend,
            max_model_len=args.max_model_len,
            cpu_batch_precision=args.cpu_batch_precision,
            text_split=args.text_split,
        ),
        cache=CacheConfig(
            block_size=args.block_size,
            gpu_memory_utilization=args.gpu_memory_utilization,
            cpu_kv_cache_bytes=args.cpu_kv_cache_mib * 2**20,
            codec_primer_bytes=int(args.voices_codec_states_mib * 2**20),
            num_blocks=args.num_kv_blocks,
            enable_prefix_caching=not args.no_prefix_caching,
            kv_cache_dtype=args.kv_cache_dtype,
        ),
        scheduler=SchedulerConfig(
            max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_prefill_chunk=args.max_prefill_chunk,
            policy=args.policy,
            max_waiting=args.max_waiting,
        ),
        capacity=CapacityConfig(
            max_queue_delay=args.max_queue_delay,
            skip_slack_seconds=args.skip_slack_seconds,
            pace_slack_seconds=args.pace_slack_seconds,
            urgent_slack_seconds=args.urgent_slack_seconds,
            defer_slack_seconds=args.defer_slack_seconds,
            feed_slack_seconds=args.feed_slack_seconds,
        ),
        # Each streaming flag is named after its field (None: the codec's own value).
        streaming=StreamingConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(StreamingConfig)}),
        gpu=GpuConfig(cuda_graphs=not args.no_cuda_graphs, sample_in_graph=not args.no_sample_in_graph,
                      overlap_codec=not args.no_overlap_codec, codec_graphs=not args.no_codec_graphs,
                      fused_ops=args.fused_ops),
        mode=args.engine_mode,
        num_threads=args.num_threads,
        allocator=args.allocator,
        max_core_restarts=args.max_core_restarts,
        restart_window_seconds=args.restart_window_seconds,
    )
