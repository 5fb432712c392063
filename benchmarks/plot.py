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
