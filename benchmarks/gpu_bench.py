"""The GPU benchmark: correctness on the device, then decode step time against the memory floor, streaming
load against concurrency, and transformers' continuous batching on the same model, in one run.

    python -m benchmarks.gpu_bench            # Orpheus-3B shape, random bf16 weights, on CUDA (see GPU_RUN.md)
    python -m benchmarks.gpu_bench --tiny     # the same code paths with tiny shapes on the CPU
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import fields, replace
from datetime import datetime, timezone
from pathlib import Path

import torch

from benchmarks.gpu_checkpoint import ORPHEUS_3B, TINY, write_random_checkpoint
from benchmarks.gpu_checks import (check_attention, check_codec_graphs, check_graph_sampling, check_qwen3_codec_step_graphs,
                                   check_qwen3_engine, check_qwen3_graph_emit, check_step, tiny_qwen3)
from benchmarks.gpu_load import baseline_sweep, engine_sweep
from benchmarks.gpu_plan import Plan
from model.attention import AttentionMetadata, get_attention_backend

HBM_BYTES_PER_S = 4.3e12  # measured device-to-device copy rate on the H200 (GPU.md)


FULL = dict(shape=ORPHEUS_3B, attention="triton", decode_batches=(1, 8, 64, 256), decode_context=512,
            concurrency=(1, 8, 64, 128, 256, 384, 512), baseline_concurrency=(1, 8, 64, 256),
            frames_per_request=40, requests_per_client=2, fusion_batches=(1, 64, 256),
            prefill_backends=("triton", "xformers"), prefill=(4, 128, 256))
TINY_PLAN = dict(shape=TINY, attention="torch", decode_batches=(1, 8), decode_context=32,
                 concurrency=(1, 4), baseline_concurrency=(1, 4), frames_per_request=4, requests_per_client=2,
                 fusion_batches=(1,), prefill_backends=("torch",), prefill=(2, 8, 8))


@torch.inference_mode()
def time_decode_steps(backbone: torch.nn.Module, plan: Plan) -> list[dict]:
    """Per batch size: median time of one decode step (backbone + LM head) over a random KV cache with
    `decode_context` cached tokens per sequence, and its floor (weight bytes + live KV bytes) / HBM rate."""
    rows = []
    for batch in plan.decode_batches:
        rows.append(_time_decode_step(backbone, plan, batch))
        if plan.device.type == "cuda":
            torch.cuda.empty_cache()  # the batch's KV cache and graphs went with its call
    return rows


def _time_decode_step(backbone: torch.nn.Module, plan: Plan, batch: int) -> dict:
    from engine.runner.decode_graphs import DecodeGraphs

    config, device, bs = backbone.config, plan.device, plan.block_size
    weight_bytes = sum(p.numel() * p.element_size() for p in backbone.parameters())
    dtype = next(backbone.parameters()).dtype
    blocks_per_seq = -(-(plan.decode_context + 1) // bs)
    caches = [torch.randn(2, batch * blocks_per_seq, bs, config.num_key_value_heads, config.head_dim,
                          device=device, dtype=dtype) for _ in backbone.layers]
    tables = [list(range(i * blocks_per_seq, (i + 1) * blocks_per_seq)) for i in range(batch)]
    meta = AttentionMetadata.build([1] * batch, [plan.decode_context] * batch, tables, bs, device=device)
    embeds = torch.randn(batch, config.hidden_size, device=device, dtype=dtype)
    positions = torch.full((batch,), plan.decode_context, device=device)
    if plan.tiny:
        def step():
            return backbone.compute_logits(backbone.forward(embeds, positions, caches, meta))
    else:
        graphs = DecodeGraphs(backbone, caches, bs, [batch], plan.decode_context + 1)
        graphs.capture()

        def step():
            return backbone.compute_logits(graphs.run(embeds, positions, meta))
    seconds = _median_seconds(step, plan.device, repeats=5 if plan.tiny else 30)
    kv_bytes = 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim \
        * torch.empty((), dtype=dtype).element_size() * batch * (plan.decode_context + 1)
    floor = (weight_bytes + kv_bytes) / HBM_BYTES_PER_S
    return dict(batch=batch, step_ms=1e3 * seconds, floor_ms=1e3 * floor, ratio=seconds / floor,
                weight_gb=weight_bytes / 1e9, kv_gb=kv_bytes / 1e9)


@torch.inference_mode()
def time_fusions(backbone: torch.nn.Module, plan: Plan) -> dict:
    """Decode step time with the plain layers, then with the fused ones (same weights, back to back) per
    batch in `fusion_batches`, and the fused first layer's max error relative to the plain one on a
    16-token prefill. The plain layers are put back afterwards."""
    from model.llama.fused import FusedDecoderLayer

    config, device, bs = backbone.config, plan.device, plan.block_size
    dtype = next(backbone.parameters()).dtype
    cache = torch.zeros(2, 1, bs, config.num_key_value_heads, config.head_dim, device=device, dtype=dtype)
    meta = AttentionMetadata.build([bs], [0], [[0]], bs, device=device)
    hidden = torch.randn(bs, config.hidden_size, device=device, dtype=dtype)
    positions = torch.arange(bs, device=device)
    plain_layer = backbone.layers[0]
    plain_out = plain_layer(hidden, positions, cache, meta).float()
    fused_out = FusedDecoderLayer(plain_layer)(hidden, positions, cache, meta).float()
    rel_error = ((fused_out - plain_out).abs().max() / plain_out.abs().max()).item()

    fusion_plan = replace(plan, decode_batches=plan.fusion_batches)
    plain_layers = list(backbone.layers)
    unfused = time_decode_steps(backbone, fusion_plan)
    backbone.fuse_ops()
    try:
        fused = time_decode_steps(backbone, fusion_plan)
    finally:
        for index, layer in enumerate(plain_layers):
            backbone.layers[index] = layer
    rows = [dict(batch=u["batch"], unfused_ms=u["step_ms"], fused_ms=f["step_ms"],
                 speedup=u["step_ms"] / f["step_ms"]) for u, f in zip(unfused, fused)]
    return {"layer_rel_error": rel_error, "decode": rows}


@torch.inference_mode()
def time_prefill(backbone: torch.nn.Module, plan: Plan) -> list[dict]:
    """One chunked-prefill step (plan.prefill: sequences x new tokens over cached tokens) per
    attention backend of `prefill_backends`: median time and the hidden states' relative error
    against the first backend's. A backend that cannot run here (xformers not installed, or its
    kernel refuses the shapes) gets its error instead: it is optional, the run goes on."""
    config, device, bs = backbone.config, plan.device, plan.block_size
    dtype = next(backbone.parameters()).dtype
    sequences, new_tokens, cached = plan.prefill
    blocks_per_seq = -(-(cached + new_tokens) // bs)
    caches = [torch.randn(2, sequences * blocks_per_seq, bs, config.num_key_value_heads, config.head_dim,
                          device=device, dtype=dtype) for _ in backbone.layers]
    tables = [list(range(i * blocks_per_seq, (i + 1) * blocks_per_seq)) for i in range(sequences)]
    meta = AttentionMetadata.build([new_tokens] * sequences, [cached] * sequences, tables, bs, device=device)
    embeds = torch.randn(sequences * new_tokens, config.hidden_size, device=device, dtype=dtype)
    positions = torch.arange(cached, cached + new_tokens, device=device).repeat(sequences)
    original = backbone.attention_backend
    rows, first = [], None
    try:
        for name in plan.prefill_backends:
            try:
                backbone.attention_backend = get_attention_backend(name)

                def step():
                    return backbone.forward(embeds, positions, caches, meta)
                hidden = step().float()
                first = hidden if first is None else first
                rel_error = ((hidden - first).norm() / first.norm()).item()
                seconds = _median_seconds(step, device, repeats=5 if plan.tiny else 20)
                rows.append(dict(backend=name, step_ms=1e3 * seconds, tokens=sequences * new_tokens,
                                 rel_error=rel_error))
            except Exception as exc:  # noqa: BLE001 - an optional backend may be missing or refuse
                rows.append(dict(backend=name, error=f"{type(exc).__name__}: {exc}"[:200]))
    finally:
        backbone.attention_backend = original
    return rows


def _median_seconds(step, device: torch.device, repeats: int) -> float:
    for _ in range(3):
        step()
    samples = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3)
        else:
            started = time.perf_counter()
            step()
            samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def run(plan: Plan, out: Path, command: str) -> dict:
    from model.config import ModelConfig
    from model.loader import load_family

    started_at = datetime.now(timezone.utc)
    phases: dict[str, float] = {}
    report: dict = {"date": started_at.isoformat(timespec="seconds"), "command": command,
                    "machine": _machine(plan.device), "plan": {f.name: str(getattr(plan, f.name)) for f in fields(plan)},
                    "prefill_shape": list(plan.prefill)}
    with tempfile.TemporaryDirectory(prefix="chorus-gpu-bench-") as tmp:
        # NOTE: first, the checks of paths no GPU has run yet (seconds), before the checkpoint
        # (most of a minute): a capture bug stops the run before it costs the device's time.
        clock = time.perf_counter()
        qwen3 = tiny_qwen3(plan.device, plan.attention)
        qwen3_checks = {**check_qwen3_graph_emit(*qwen3, plan.device),
                        **check_qwen3_codec_step_graphs(qwen3[0].codec, plan.device)}
        del qwen3
        qwen3_checks |= check_qwen3_engine(plan.device, plan.attention)
        phases["qwen3_checks_s"] = time.perf_counter() - clock

        clock = time.perf_counter()
        folder = write_random_checkpoint(Path(tmp) / "model", plan.shape, plan.device)
        # NOTE: float32 on the CPU, whose bf16 matmuls are several times slower than its float32 ones.
        model_config = ModelConfig(model=str(folder), device=plan.device.type,
                                   dtype="float32" if plan.tiny else "bfloat16", attention_backend=plan.attention)
        family = load_family(model_config)
        phases["checkpoint_s"] = time.perf_counter() - clock

        clock = time.perf_counter()
        shape = plan.shape
        report["correctness"] = {
            "attention_max_abs_error": check_attention(shape.num_attention_heads, shape.num_key_value_heads,
                                                       shape.head_dim, plan.device),
            **check_step(family.backbone, plan.block_size, plan.device),
            **check_graph_sampling(family, plan.device),
            **check_codec_graphs(family.codec, plan.device),
            **qwen3_checks,
        }
        family.backbone.attention_backend = get_attention_backend(plan.attention)  # check_step leaves triton
        phases["correctness_s"] = time.perf_counter() - clock

        clock = time.perf_counter()
        report["decode"] = time_decode_steps(family.backbone, plan)
        phases["decode_s"] = time.perf_counter() - clock

        clock = time.perf_counter()
        report["fusions"] = time_fusions(family.backbone, plan)
        phases["fusions_s"] = time.perf_counter() - clock

        clock = time.perf_counter()
        report["prefill"] = time_prefill(family.backbone, plan)
        phases["prefill_s"] = time.perf_counter() - clock

        clock = time.perf_counter()
        report["engine_load"] = engine_sweep(family, model_config, plan)
        phases["engine_load_s"] = time.perf_counter() - clock
        del family
        if plan.device.type == "cuda":
            torch.cuda.empty_cache()

        clock = time.perf_counter()
        report["baseline_load"] = baseline_sweep(folder, plan)
        phases["baseline_load_s"] = time.perf_counter() - clock
    report["phases"] = phases
    table = markdown_tables(report)
    _write(report, table, out, started_at)
    print(table)
    return report


def markdown_tables(report: dict) -> str:
    lines = ["| decode batch | step ms | floor ms | step ÷ floor |", "| ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['batch']} | {r['step_ms']:.2f} | {r['floor_ms']:.2f} | {r['ratio']:.2f} |"
              for r in report["decode"]]
    fusions = report["fusions"]
    lines += ["", f"| fused decode batch | unfused ms | fused ms | speedup (layer rel. error "
                  f"{fusions['layer_rel_error']:.1e}) |", "| ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['batch']} | {r['unfused_ms']:.2f} | {r['fused_ms']:.2f} | {r['speedup']:.2f} |"
              for r in fusions["decode"]]
    sequences, new_tokens, cached = report["prefill_shape"]
    lines += ["", f"| prefill backend ({sequences} x {new_tokens} new tokens over {cached} cached) | step ms | "
                  "rel. error vs first |", "| --- | ---: | ---: |"]
    lines += [f"| {r['backend']} | {r['step_ms']:.2f} | {r['rel_error']:.1e} |" if "error" not in r
              else f"| {r['backend']} | unavailable: {r['error'][:80]} | |" for r in report["prefill"]]
    lines += ["", "| system | streams | TTFA p50 ms | TTFA p95 ms | viable % | audio s / wall s |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for system, key in (("chorus", "engine_load"), ("transformers generate_batch", "baseline_load")):
        for r in report[key]:
            if "error" in r:
                lines.append(f"| {system} | {r['concurrency']} | error: {r['error'][:60]} | | | |")
                continue
            lines.append(f"| {system} | {r['concurrency']} | {_ms(r['ttfa_p50'])} | {_ms(r['ttfa_p95'])} | "
                         f"{r['viable_pct']:.0f} | {r['audio_s_per_wall_s']:.1f} |")
    phases = ", ".join(f"{k[:-2]} {v:.0f} s" for k, v in report["phases"].items())
    return "\n".join(lines + ["", f"correctness: {report['correctness']}", f"phases: {phases}"])


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1e3 * seconds:.0f}"


def _machine(device: torch.device) -> dict:
    def git(*args: str) -> str | None:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent)
        return done.stdout.strip() if done.returncode == 0 else None

    return {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
            "commit": git("rev-parse", "HEAD") or "no commit", "tree_dirty": bool(git("status", "--porcelain"))}


def _write(report: dict, table: str, out: Path, started_at: datetime) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"gpu-{'tiny-' if report['machine']['device'] == 'cpu' else ''}{started_at:%Y-%m-%d-%H%M}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    machine = report["machine"]
    stem.with_suffix(".md").write_text(
        f"# GPU benchmark, {report['date']}\n\n`{report['command']}`\n\n{machine['device']}, torch "
        f"{machine['torch']}, CUDA {machine['cuda']}, commit {machine['commit']}"
        f"{' (dirty tree)' if machine['tree_dirty'] else ''}.\n\n{table}\n"
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU (CI)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    if not args.tiny and not torch.cuda.is_available():
        parser.error("no CUDA device: run with --tiny on the CPU")
    plan = Plan(device=torch.device("cpu" if args.tiny else "cuda"), **(TINY_PLAN if args.tiny else FULL))
    if args.tiny:
        torch.set_num_threads(2)
    command = "python -m benchmarks.gpu_bench " + " ".join(sys.argv[1:] if argv is None else argv)
    return run(plan, args.out, command)


if __name__ == "__main__":
    main()
