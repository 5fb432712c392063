"""The scale-out benchmark's verdicts, from constructed results (the runs themselves start Ray
and servers: `python -m benchmarks.scale_out --quick` is the smoke run)."""
from __future__ import annotations

from benchmarks.scale_out import markdown, targets


def system(name: str, replicas: int, capacity: float, ttfa_p50: float, ttfa_p95: float) -> dict:
    level = {"load": 1, "requests": 10, "ttfa_p50": ttfa_p50, "ttfa_p95": ttfa_p95, "viable_pct_200ms": 100.0,
             "refused_pct": 0.0, "audio_s_per_wall_s": 3.0}
    return {"system": name, "replicas": replicas, "closed_loop": [level], "capacity_streams": capacity}


def test_scaling_and_proxy_cost_are_judged_against_the_direct_server():
    systems = {"direct": system("direct", 1, 4, 0.080, 0.100), "ray-1": system("ray-1", 1, 4, 0.085, 0.115),
               "ray-2": system("ray-2", 2, 6, 0.090, 0.120)}
    scaling = next(row for row in targets(systems) if "capacity" in row["target"])
    assert scaling["measured"] == 1.5 and scaling["met"]
    p50, p95 = (row for row in targets(systems) if "proxy" in row["target"])
    assert round(p50["measured"], 6) == 5.0 and p50["met"] is None
    assert round(p95["measured"], 6) == 15.0 and p95["met"] is False


def test_a_direct_server_with_no_capacity_gives_no_ratio_and_the_report_says_so():
    systems = {"direct": system("direct", 1, 0, 0.3, 0.5), "ray-2": system("ray-2", 2, 2, 0.2, 0.3)}
    (scaling,) = targets(systems)
    assert scaling["measured"] is None and scaling["met"] is False
    report = {"started_at": "t", "command": "c", "machine": "m", "systems": list(systems.values()),
              "targets": targets(systems)}
    assert "| – | ✗ |" in markdown(report)
