"""Turns a serving run into its result files: JSON (every trace), a markdown table ready to be the
benchmarks/README.md's serving results, the issue's targets with ✓/✗, and the plot."""
from __future__ import annotations

import os
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from benchmarks.plot import plot_serving
from benchmarks.report import machine_line, write_markdown, write_report_json
from benchmarks.throughput import machine_info

NAMES = {"chorus": "Chorus (`chorus serve --model {model}`)", "piper": "Piper (`piper.http_server`, same voice)",
         "piper-sentences": "Piper's voice sentence by sentence (`benchmarks/piper_sentence_server.py`, 2 threads)",
         "vllm-omni": "vLLM-Omni (`vllm serve <folder> --omni`, the same checkpoint folder)"}


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{1000 * value:,.0f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}" if value in (0.0, 100.0) else f"{value:.1f}"


def _errors(errors: dict) -> str:
    kinds = [f"{kind} {count}" for kind, count in errors.items() if count]
    return f"{sum(errors.values())} ({', '.join(kinds)})" if kinds else "0"


def _cpu(lv: dict) -> str:
    """Server CPU % (machine CPU %), audio seconds per server CPU-second; '–' for a run without them."""
    if lv.get("server_cpu_pct") is None:
        return "– | –"
    per_cpu = lv["audio_s_per_cpu_s"]
    return (f"{lv['server_cpu_pct']:.0f} ({lv['machine_cpu_pct']:.0f}) | "
            f"{'–' if per_cpu is None else f'{per_cpu:.1f}'}")


def _held(lv: dict, min_held_pct: float) -> str:
    """Nominal clients → mean clients holding load over the window (mean streams in flight), ⚠ under
    `min_held_pct` % of nominal; '–' for a level without clients (Poisson)."""
    if lv.get("held_clients") is None:
        return "–"
    flag = "" if lv["held_pct"] >= min_held_pct else " ⚠"
    return f"{lv['load']:g} → {lv['held_clients']:.1f} ({lv['streams_in_flight']:.1f}){flag}"


def _row(system: str, label: str, lv: dict, min_held_pct: float) -> str:
    return (f"| {system} | {label} | {_held(lv, min_held_pct)} | {lv['requests']} | {_ms(lv['ttfa_p50'])} / "
            f"{_ms(lv['ttfa_p95'])} / {_ms(lv['ttfa_p99'])} | {_pct(lv['viable_pct_0ms'])} / {_pct(lv['viable_pct_200ms'])} | "
            f"{_pct(lv['refused_pct'])} | {lv['audio_s_per_wall_s']:.2f} | {_cpu(lv)} | {_errors(lv['errors'])} |")


_LEVEL_HEADER = ["| system | load | held: clients → mean (in flight) | requests | TTFA p50 / p95 / p99 ms | "
                 "viable % (0 / 200 ms buffer) | 429 % | audio s per s | CPU % server (machine) | audio s per CPU s | "
                 "errors |",
                 "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]


def level_table(report: dict) -> list[str]:
    rows, held = list(_LEVEL_HEADER), report["criteria"]["min_held_pct"]
    for s in report["systems"]:
        rows += [_row(s["system"], f"{lv['load']:g} streams", lv, held) for lv in s["closed_loop"]]
        rows += [_row(s["system"], f"Poisson {lv['load']:g}/s", lv, held) for lv in s["poisson"]]
    return rows


def paced_table(report: dict) -> list[str]:
    """Paced listeners: each asks for its next reply once the last has played out."""
    rows, held = list(_LEVEL_HEADER), report["criteria"]["min_held_pct"]
    for s in report["systems"]:
        rows += [_row(s["system"], f"{lv['load']:g} listeners", lv, held) for lv in s.get("paced", [])]
    return rows


def levels_line(report: dict) -> str:
    """How a level of clients is run and read (benchmarks/workloads.py, benchmarks/serving_metrics.py)."""
    work, held = report["workload"], report["criteria"]["min_held_pct"]
    longest = f"the longest text's ~{work['longest_text_speech_s']:g} s of speech"
    covers = (f"at least twice {longest}" if work["window_covers_every_length"]
              else f"⚠ under twice {longest}: the longest replies are under-sampled")
    return (f"Closed-loop and paced levels: the clients start at random moments over a {work['ramp_seconds']:g} s "
            f"warm-up, then all of them keep sending through a {work['level_seconds']:g} s measured window ({covers}), "
            f"then up to {work['drain_seconds']:g} s "
            "for open requests to finish (later: timeouts). Their figures are of the requests sent in the window "
            "(the warm-up's are in the JSON, `counted` false). Held: the nominal clients → the mean over the window "
            "of those holding load (a client holds load from sending a request until it may send its next: in "
            "flight, its reply playing for a listener, waiting as Retry-After says when refused), and in parentheses "
            "the mean requests in flight at the server; ⚠: under "
            f"{held:g} % of nominal, a level not measured at its load, which fails the capacity rule. Audio s per s: "
            "of these levels, the audio that arrived in the window ÷ its length; of Poisson levels, all the audio ÷ "
            "the run's wall time.")


def burst_table(report: dict) -> list[str]:
    rows = ["| system | burst (requests at once) | TTFA p50 / p95 / p99 ms | viable % (0 / 200 ms) | 429 % | "
            "429 answered in p99 ms | as many GET /health at once, p99 ms | Retry-After % | errors |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for s in report["systems"]:
        for multiple, lv in zip(s["loads"]["burst_multiples"], s["bursts"]):
            rows.append(f"| {s['system']} | {lv['load']:g} ({multiple:g}× capacity) | {_ms(lv['ttfa_p50'])} / "
                        f"{_ms(lv['ttfa_p95'])} / {_ms(lv['ttfa_p99'])} | {_pct(lv['viable_pct_0ms'])} / "
                        f"{_pct(lv['viable_pct_200ms'])} | {_pct(lv['refused_pct'])} | {_ms(lv['refusal_p99_s'])} | "
                        f"{_ms(lv.get('connection_floor_p99_s'))} | {_pct(lv['retry_after_pct'])} | {_errors(lv['errors'])} |")
    return rows


def input_length_table(report: dict) -> list[str]:
    rows = ["| system | format | TTFA p50, 1 sentence ms | TTFA p50, 30 sentences ms | ratio |",
            "| --- | --- | ---: | ---: | ---: |"]
    for s in report["systems"]:
        rows += [f"| {s['system']} | {r['format']} | {_ms(r['one_sentence_ttfa_p50'])} | "
                 f"{_ms(r['thirty_sentences_ttfa_p50'])} | {r['ratio']:.2f} |" for r in s["input_length"]]
    return rows


def targets(report: dict) -> list[dict]:
    """The latency issue's targets, each with its measured value (None: this run did not measure it)."""
    by_name = {s["system"]: s for s in report["systems"]}
    chorus, piper = by_name.get("chorus"), by_name.get("piper")
    checks: list[tuple[str, float | None, str, float]] = []
    for fmt in ("pcm", "mp3"):
        row = next((r for r in chorus["input_length"] if r["format"] == fmt), None) if chorus else None
        checks.append((f"input length, {fmt}: 30-sentence ÷ 1-sentence TTFA p50", row and row["ratio"], "<=", 1.2))
    cap = chorus["capacity_streams"] if chorus else None
    checks.append(("capacity (concurrent streams)", cap, ">=", 16))
    within = [lv for lv in chorus["closed_loop"] if lv["load"] <= cap] if chorus else []
    single = within[0]["ttfa_p95"] if within and within[0]["load"] == 1 else None
    worst = max(lv["ttfa_p95"] / single for lv in within) if single else None
    checks.append(("worst TTFA p95 up to capacity ÷ single-stream p95", worst, "<=", 2.0))
    burst = _burst_at(chorus, 4.0) if chorus else None
    if burst is None:
        checks += [(name, None, op, bound) for name, op, bound in _BURST_CHECKS]
    else:
        checks += [("burst 4× capacity: 5xx + dropped connections", burst["errors"]["5xx"] + burst["errors"]["dropped"], "<=", 0),
                   ("burst 4× capacity: admitted streams viable % (200 ms buffer)", burst["viable_pct_200ms"], ">=", 99.0),
                   ("burst 4× capacity: admitted streams' TTFA p95 s", burst["ttfa_p95"], "<=", 0.25),
                   ("burst 4× capacity: 429s with Retry-After %", burst["retry_after_pct"], ">=", 100.0),
                   ("burst 4× capacity: 429 p99 − as many GET /health's p99 (the connection floor), s",
                    _refusal_over_floor(burst), "<=", 0.05)]
    if chorus:
        closed16 = {lv["load"]: lv for lv in chorus["closed_loop"]}.get(16)
        checks += [("closed loop 16 streams: refused %", closed16 and closed16["refused_pct"], "<=", 1.0),
                   ("closed loop 16 streams: TTFA p95 s", closed16 and closed16["ttfa_p95"], "<=", 0.25),
                   ("paced capacity (listeners)", chorus.get("paced_capacity"), ">=", 64)]
    sentences = by_name.get("piper-sentences")
    if chorus and sentences:
        ours, theirs = ({lv["load"]: lv for lv in s.get("paced", [])}.get(16) for s in (chorus, sentences))
        ratio = (ours["audio_s_per_cpu_s"] / theirs["audio_s_per_cpu_s"]
                 if ours and theirs and ours.get("audio_s_per_cpu_s") and theirs.get("audio_s_per_cpu_s") else None)
        checks.append(("16 paced listeners: audio s per server CPU s ÷ Piper by sentence's", ratio, ">=", 2.0))
    if chorus and piper:
        at_cap = {lv["load"]: lv for lv in chorus["closed_loop"]}.get(cap)
        piper_best = max(lv["audio_s_per_wall_s"] for lv in piper["closed_loop"])
        checks.append(("audio s per wall s at capacity ÷ Piper's best level",
                       at_cap and piper_best and at_cap["audio_s_per_wall_s"] / piper_best, ">=", 1.5))
        pcap = piper["capacity_streams"]
        checks.append(("capacity ÷ Piper's capacity", (float("inf") if cap else None) if pcap == 0 else cap / pcap, ">=", 8.0))
        p95 = [{lv["load"]: lv["ttfa_p95"] for lv in s["closed_loop"]}.get(8) for s in (chorus, piper)]
        checks.append(("TTFA p95 at 8 streams ÷ Piper's", p95[0] / p95[1] if None not in p95 else None, "<=", 0.1))
    if chorus and by_name.get("vllm-omni"):
        checks += peer_latency_checks(chorus, by_name["vllm-omni"], "vLLM-Omni")
    # NOTE: JSON has no infinity: a ratio over a capacity of 0 is written as the string "inf".
    return [{"target": name, "value": "inf" if value == float("inf") else value, "bound": f"{op} {bound:g}",
             "met": None if value is None else (value >= bound if op == ">=" else value <= bound)}
            for name, value, op, bound in checks]


def peer_latency_checks(chorus: dict, peer: dict, name: str) -> list[tuple[str, float | None, str, float]]:
    """Chorus against a peer serving the same checkpoint (issue 29: vLLM-Omni's figures are the ones
    to beat): at each closed-loop level both ran, TTFA p50 and p95 as Chorus's ÷ the peer's (≤ 1),
    and at the highest such level the audio served per wall second, Chorus's ÷ the peer's (≥ 1)."""
    ours, theirs = ({lv["load"]: lv for lv in s["closed_loop"]} for s in (chorus, peer))
    loads = sorted(set(ours) & set(theirs))
    checks: list[tuple[str, float | None, str, float]] = []
    for load in loads:
        for figure, label in (("ttfa_p50", "p50"), ("ttfa_p95", "p95")):
            mine, other = ours[load][figure], theirs[load][figure]
            checks.append((f"TTFA {label} at {load:g} streams ÷ {name}'s",
                           mine / other if mine is not None and other else None, "<=", 1.0))
    if loads:
        mine, other = (side[loads[-1]]["audio_s_per_wall_s"] for side in (ours, theirs))
        checks.append((f"audio s per wall s at {loads[-1]:g} streams ÷ {name}'s", mine / other if other else None,
                       ">=", 1.0))
    return checks


_BURST_CHECKS = (("burst 4× capacity: 5xx + dropped connections", "<=", 0),
                 ("burst 4× capacity: admitted streams viable % (200 ms buffer)", ">=", 99.0),
                 ("burst 4× capacity: admitted streams' TTFA p95 s", "<=", 0.25),
                 ("burst 4× capacity: 429s with Retry-After %", ">=", 100.0),
                 ("burst 4× capacity: 429 p99 − as many GET /health's p99 (the connection floor), s", "<=", 0.05))


def _refusal_over_floor(burst: dict) -> float | None:
    """How much longer a burst's 429s took (p99) than opening as many connections costs (0: none refused)."""
    if not burst["refused_pct"]:
        return 0.0
    floor = burst.get("connection_floor_p99_s")
    return None if floor is None or burst["refusal_p99_s"] is None else burst["refusal_p99_s"] - floor


def _burst_at(system: dict, multiple: float) -> dict | None:
    return next((lv for m, lv in zip(system["loads"]["burst_multiples"], system["bursts"]) if m == multiple), None)


def target_table(checks: list[dict]) -> list[str]:
    def shown(value: float | str | None) -> str:
        return "not measured" if value is None else "∞" if value == "inf" else f"{value:.3g}"

    return ["| target | measured | met |", "| --- | ---: | :---: |"] + [
        f"| {c['target']} {c['bound']} | {shown(c['value'])} | {'–' if c['met'] is None else '✓' if c['met'] else '✗'} |"
        for c in checks]


# The package each peer system runs, whose version the results record.
PEER_PACKAGES = {"piper": "piper-tts", "piper-sentences": "piper-tts", "vllm-omni": "vllm-omni"}


def peer_versions(report: dict) -> dict[str, str]:
    """The installed version of each measured peer's package (a GPU image has no Piper, a CPU
    one no vLLM-Omni: only what ran is asked for)."""
    packages = {PEER_PACKAGES[s["system"]] for s in report["systems"] if s["system"] in PEER_PACKAGES}
    found = {}
    for package in sorted(packages):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def write_serving_results(report: dict, command: str, started_at: datetime, out: Path, plot: bool = True,
                          load_before: tuple[float, float, float] | None = None) -> dict[str, Path]:
    """`load_before`: the load average as the run started (machine_info's is taken now, at its end)."""
    machine = machine_info() | {"load_average": load_before or os.getloadavg(), "load_average_after": os.getloadavg(),
                                "peers": peer_versions(report),
                                "note": "shared machine: other jobs may have run beside this one"}
    report = {"date": started_at.isoformat(timespec="seconds"), "command": command, "machine": machine, **report}
    report["targets"] = targets(report)
    paths = write_report_json(out, "serving", started_at, report, allow_nan=False)
    work = report["workload"]
    capacities = ", ".join(f"{s['system']} {s['capacity_streams']:g}" for s in report["systems"])
    paced = ", ".join(f"{s['system']} {s['paced_capacity']:g}" for s in report["systems"] if s.get("paced_capacity") is not None)
    lines = [
        f"# Serving benchmark, {report['date']}", "", f"`{command}`", "",
        machine_line(machine, ", ".join(f"{name} {v}" for name, v in machine["peers"].items()) or "no peer"), "",
        f"Over HTTP on 127.0.0.1, each server alone on the machine: {', '.join(NAMES[s['system']].format(model=work.get('model', 'joe')) for s in report['systems'])}. "
        f"{work['texts']} texts cycled (30 eval sentences, 10 paragraphs), voice `{work['voice']}`. "
        f"TTFA: first audio bytes (Piper: of the WAV's data). TTFA and viable % are of admitted (non-429) "
        f"requests; a failed one is not viable. Capacity: the largest level that, with every level below it, had "
        f"≥ 99 % of all requests admitted and viable at a 200 ms client buffer and p95 TTFA ≤ 250 ms.", "",
        levels_line(report), "",
        *level_table(report), "", f"Capacity (streams): {capacities}.", "",
        "Paced listeners: each asks for its next reply once the last has played out (in real time from its "
        "first byte); capacity: the most listeners with ≥ 99 % of "
        "requests served and viable at a 200 ms buffer and p95 TTFA ≤ 150 ms, every level below passing too.", "",
        *paced_table(report), "", f"Paced capacity (listeners): {paced}.", "", *burst_table(report), "",
        *input_length_table(report), "", *target_table(report["targets"]), "",
    ]
    draw = (lambda png: plot_serving(report, png)) if plot else None
    return write_markdown(paths, lines, draw, "TTFA p95 and viability against concurrency")
