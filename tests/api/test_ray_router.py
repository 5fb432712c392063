"""The router's choice among replicas by their reported headroom (api/ray_serve/router.py):
constructed reports and clocks, no Ray instance."""
from __future__ import annotations

import random

import pytest

pytest.importorskip("ray.serve")

from api.ray_serve.router import Headroom, RoutedLog, rank_replicas  # noqa: E402

NOW = 1_000.0
MAX_AGE = 3.0


def report(room: int, ready: bool = True, until_room: float = 0.0, kv_free: float = 0.5,
           age: float = 0.1) -> Headroom:
    return Headroom(at=NOW - age, ready=ready, room=room, until_room=until_room, kv_free=kv_free)


def rank(reports: dict[str, Headroom | None], routed: dict[str, int] | None = None, seed: int = 0):
    routed = routed or {}
    return rank_replicas(list(reports), reports.get, lambda replica, since: routed.get(replica, 0), NOW, MAX_AGE,
                         random.Random(seed))


def test_a_replica_with_room_goes_before_one_that_would_refuse():
    for seed in range(20):
        assert rank({"full": report(0, until_room=0.4), "roomy": report(1)}, seed=seed) == ["roomy", "full"]


def test_of_two_with_room_the_roomier_first_then_kv_free_breaks_ties():
    assert rank({"a": report(1), "b": report(3)}) == ["b", "a"]
    assert rank({"a": report(2, kv_free=0.9), "b": report(2, kv_free=0.2)}) == ["a", "b"]


def test_requests_routed_since_a_report_use_up_its_room():
    # b reported 2 rooms, but this router has sent it 2 streams since: a is the one with room.
    assert rank({"a": report(1), "b": report(2)}, routed={"b": 2}) == ["a", "b"]


def test_when_all_would_refuse_the_soonest_room_comes_first_and_a_down_replica_last():
    ranked = rank({"down": report(5, ready=False), "later": report(0, until_room=2.0),
                   "sooner": report(0, until_room=0.3)})
    assert ranked == ["sooner", "later", "down"]


def test_stale_reports_rank_after_room_and_before_full_and_none_fresh_means_no_opinion():
    ranked = rank({"stale": report(9, age=MAX_AGE + 1), "full": report(0), "roomy": report(1), "new": None})
    assert ranked[0] == "roomy" and set(ranked[1:3]) == {"stale", "new"} and ranked[3] == "full"
    assert rank({"stale": report(9, age=MAX_AGE + 1), "new": None}) is None


def test_power_of_two_choices_spreads_the_first_choice_but_never_takes_the_least_roomy():
    reports = {f"r{room}": report(room) for room in range(1, 6)}
    firsts = {rank(reports, seed=seed)[0] for seed in range(200)}
    # Many routers acting on the same reports must not all pick the roomiest one...
    assert len(firsts) >= 3
    # ...but the first choice is the roomier of two, so never the least roomy.
    assert "r1" not in firsts
    for seed in range(50):
        ranked = rank(reports, seed=seed)
        assert sorted(ranked) == sorted(reports)  # every candidate exactly once


def test_routed_log_counts_since_a_time_and_forgets_past_its_horizon():
    log = RoutedLog(horizon_s=10.0)
    for at in (100.0, 101.0, 102.0):
        log.add("a", at)
    assert log.count_since("a", 100.5, now=103.0) == 2
    assert log.count_since("a", 0.0, now=111.5) == 1  # 100 and 101 are past the horizon
    log.forget("a")
    assert log.count_since("a", 0.0, now=111.5) == 0


def test_headroom_parses_a_report_and_none_before_the_first():
    assert Headroom.parse({}) is None and Headroom.parse(None) is None
    parsed = Headroom.parse({"at": 5.0, "ready": True, "room": 3, "until_room": 0.0, "kv_free": 0.75})
    assert parsed == Headroom(5.0, True, 3, 0.0, 0.75)
