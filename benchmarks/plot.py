"""The load plot: TTFA percentiles (log scale) and viable streams against concurrency, per system."""
from __future__ import annotations

from pathlib import Path


def plot_report(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ttfa_ax, viable_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    for index, system in enumerate(report["systems"]):
        levels = [lv for lv in system["closed_loop"] if lv["ttfa_p50"] is not None]
        loads = [lv["load"] for lv in levels]
        color = f"C{index}"
        for key, style in (("ttfa_p50", ":"), ("ttfa_p95", "-"), ("ttfa_p99", "--")):
            ttfa_ax.plot(loads, [lv[key] for lv in levels], style, color=color, marker="o", markersize=3,
                         label=f"{system['system']} {key[-3:]}")
        viable_ax.plot([lv["load"] for lv in system["closed_loop"]],
                       [lv["viable_pct"] for lv in system["closed_loop"]], "-o", color=color, label=system["system"])
    target = report["criteria"]["max_ttfa_p95_s"]
    ttfa_ax.axhline(target, color="grey", linewidth=0.8)
    viable_ax.axhline(report["criteria"]["min_viable_pct"], color="grey", linewidth=0.8)
    for ax in (ttfa_ax, viable_ax):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent streams (closed loop)")
        ax.grid(True, alpha=0.3)
    ttfa_ax.set_yscale("log")
    ttfa_ax.set_ylabel("time to first audio, s")
    ttfa_ax.legend(fontsize=6, ncol=2)
    viable_ax.set_ylabel("viable streams, %")
    viable_ax.set_ylim(0, 105)
    viable_ax.legend(fontsize=7)
    fig.suptitle(f"Chorus load benchmark, {report['date']} ({report['machine']['cpus_usable']} CPUs, shared)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_serving(report: dict, path: Path) -> None:
    """TTFA p95 (log scale) and viable streams at 0 and 200 ms client buffer against closed-loop
    concurrency, one colour per server; the title says where and how it was measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, (ttfa_ax, viable_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    for index, system in enumerate(report["systems"]):
        levels, color = system["closed_loop"], f"C{index}"
        timed = [lv for lv in levels if lv["ttfa_p95"] is not None]
        ttfa_ax.plot([lv["load"] for lv in timed], [lv["ttfa_p95"] for lv in timed], "-o", color=color,
                     label=f"{system['system']} p95")
        for buffer_ms, style in ((0, ":"), (200, "-")):
            viable_ax.plot([lv["load"] for lv in levels], [lv[f"viable_pct_{buffer_ms}ms"] or 0 for lv in levels],
                           style, color=color, marker="o", label=f"{system['system']}, {buffer_ms} ms buffer")
    ttfa_ax.axhline(report["criteria"]["max_ttfa_p95_s"], color="grey", linewidth=0.8)
    viable_ax.axhline(report["criteria"]["min_viable_pct"], color="grey", linewidth=0.8)
    loads = sorted({lv["load"] for system in report["systems"] for lv in system["closed_loop"]})
    for ax in (ttfa_ax, viable_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(loads, [f"{load:g}" for load in loads])
        ax.set_xlabel("concurrent clients (closed loop)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    ttfa_ax.set_yscale("log")
    ttfa_ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    # Minor ticks labelled at 2 and 5 only: every one labelled overlaps at the bottom of a decade.
    ttfa_ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: f"{value:g}" if f"{value:e}"[0] in "25" else ""))
    ttfa_ax.set_ylabel("time to first audio p95, s (admitted requests)")
    viable_ax.set_ylabel("viable streams, % of admitted")
    viable_ax.set_ylim(0, 105)
    machine = report["machine"]
    fig.suptitle(f"Chorus vs Piper over HTTP on 127.0.0.1, voice joe, {report['date']}: {machine['processor']}, "
                 f"{machine['cpus_usable']} CPUs (shared), commit {machine['commit'][:10]}\nclosed loop, "
                 f"{report['workload']['level_seconds']:g} s per level, each server alone; grey: the capacity "
                 f"bounds (p95 TTFA, viable %)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
