"""Turns a load run into its result files: JSON (every raw figure), markdown tables, a PNG plot."""
from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Callable

from benchmarks.plot import plot_report
from benchmarks.throughput import machine_info

SEQUENTIAL, STATIC, CB, ENGINE = "sequential", "static", "cb", "engine"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{1000 * value:,.0f}"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def level_rows(system: str, levels: list[dict], load_name: str) -> list[str]:
    return [
        f"| {system} | {load_name} {lv['load']:g} | {lv['requests']} | {lv['failed']} | {_ms(lv['ttfa_p50'])} | "
        f"{_ms(lv['ttfa_p95'])} | {_ms(lv['ttfa_p99'])} | {_num(lv['viable_pct'], 1)} | {lv['underrun_s_total']:.2f} | "
        f"{lv['audio_s_per_wall_s']:.2f} | {_num(lv['rtf_p50'])} / {_num(lv['rtf_p95'])} | "
        f"{'yes' if lv['passes'] else 'no'} |"
        for lv in levels
    ]


def markdown_tables(report: dict) -> str:
    header = ["| system | load | requests | failed | TTFA p50 ms | p95 ms | p99 ms | viable % | underrun s | "
              "audio s / wall s | RTF p50 / p95 | passes |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    rows = []
    for system in report["systems"]:
        rows += level_rows(system["system"], system["closed_loop"], "streams")
        rows += level_rows(system["system"], system.get("poisson", []), "req/s")
        if system.get("burst"):
            rows += level_rows(system["system"] + " (burst 10 s)", [system["burst"]], "req/s")
    capacity = ["| system | capacity (streams) |", "| --- | ---: |"] + [
        f"| {s['system']} | {s['capacity_streams']:g} |" for s in report["systems"]]
    return "\n".join(header + rows) + "\n\n" + "\n".join(capacity)


def targets(report: dict) -> list[dict]:
    """The issue's targets, each with its measured value (None when the run did not measure it)."""
    by_key = {s["key"]: s for s in report["systems"]}
    cap = {key: s["capacity_streams"] for key, s in by_key.items()}
    engine = cap.get(ENGINE)

    def ratio(other: float | None) -> float | None:
        if engine is None or other is None or engine == other == 0:
            return None
        return float("inf") if other == 0 else engine / other

    better_transformers = max((cap[k] for k in (STATIC, CB) if k in cap), default=None)
    ttfa_ratio = None
    if ENGINE in by_key and engine and engine >= 2:
        p95 = {lv["load"]: lv["ttfa_p95"] for lv in by_key[ENGINE]["closed_loop"]}
        half, single = p95.get(engine / 2), p95.get(1)
        ttfa_ratio = half / single if half is not None and single else None
    checks = [("engine capacity ÷ sequential", ratio(cap.get(SEQUENTIAL)), ">=", 8.0),
              ("engine capacity ÷ better transformers baseline", ratio(better_transformers), ">=", 3.0),
              ("engine p95 TTFA at half capacity ÷ at 1 stream", ttfa_ratio, "<=", 2.0)]
    return [{"target": name, "value": value, "bound": f"{op} {bound}",
             "met": None if value is None else (value >= bound if op == ">=" else value <= bound)}
            for name, value, op, bound in checks]


def target_lines(checks: list[dict]) -> list[str]:
    return [f"- {c['target']} (target {c['bound']}): "
            + ("not measured" if c["value"] is None else f"{c['value']:.3g}, {'met' if c['met'] else 'missed'}")
            for c in checks]


def write_report_json(out: Path, name: str, started_at: datetime, report: dict,
                      allow_nan: bool = True) -> dict[str, Path]:
    """Creates `out` and writes `report` to `<name>-<date>.json` there; returns that path and the
    markdown page's beside it (`<name>-<date>.md`), which the caller writes."""
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{name}-{started_at:%Y-%m-%d-%H%M}"
    paths = {"json": stem.with_suffix(".json"), "markdown": stem.with_suffix(".md")}
    paths["json"].write_text(json.dumps(report, allow_nan=allow_nan) + "\n")
    return paths


def write_results(report: dict, command: str, started_at: datetime, out: Path, plot: bool = True,
                  load_before: tuple[float, float, float] | None = None) -> dict[str, Path]:
    """`load_before`: the load average as the run started (machine_info's is taken now, at its end)."""
    machine = machine_info() | {"load_average": load_before or os.getloadavg(), "load_average_after": os.getloadavg(),
                                "note": "shared machine: other jobs ran beside this one"}
    report = {"date": started_at.isoformat(timespec="seconds"), "command": command, "machine": machine,
              **report}
    report["targets"] = targets(report)
    paths = write_report_json(out, "load", started_at, report)
    criteria = report["criteria"]
    lines = [
        f"# Load benchmark, {report['date']}", "", f"`{command}`", "",
        machine_line(machine, f"transformers {machine['transformers']}"), "",
        f"Corpus: {report['corpus']['size']} seeded texts, mean {report['corpus']['mean_tokens']:.0f} audio tokens "
        f"({report['corpus']['mean_tokens'] / 82:.1f} s) per request, at most {report['corpus']['max_audio_seconds']} s. "
        f"A level passes with ≥ {criteria['min_viable_pct']} % viable streams (client buffer "
        f"{criteria['client_buffer_ms']:g} ms) and p95 TTFA ≤ {criteria['max_ttfa_p95_s']} s.", "",
        markdown_tables(report), "", *target_lines(report["targets"]), "",
    ]
    draw = (lambda png: plot_report(report, png)) if plot else None
    return write_markdown(paths, lines, draw, "TTFA and viability against load")


def machine_line(machine: dict, libraries: str) -> str:
    """Where a run was measured, for the top of its page: the machine, its load before and after,
    torch, the other `libraries` that matter (e.g. "transformers 4.56"), the commit."""
    return (f"{machine['processor']}, {machine['cpus_usable']} usable CPUs, load average "
            f"{machine['load_average'][0]:.1f} before / {machine['load_average_after'][0]:.1f} after, the latter with this "
            f"run's own processes (shared machine); "
            f"torch {machine['torch']}, {libraries}, commit {machine['commit'][:10]}"
            f"{' (dirty tree)' if machine['tree_dirty'] else ''}.")


def write_markdown(paths: dict[str, Path], lines: list[str], draw: Callable[[Path], None] | None,
                   caption: str) -> dict[str, Path]:
    """Writes `lines` to `paths["markdown"]`; with `draw`, the plot it draws into a PNG beside it
    (added to `paths`) closes the page. Returns `paths`."""
    if draw is not None:
        paths["png"] = paths["markdown"].with_suffix(".png")
        draw(paths["png"])
        lines = [*lines, f"![{caption}]({paths['png'].name})", ""]
    paths["markdown"].write_text("\n".join(lines))
    return paths
