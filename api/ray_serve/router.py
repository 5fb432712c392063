"""Which replica a new speech goes to: the one with the most room for another stream.

Ray Serve's own router balances requests in flight, but a speech replica's real load is what its
engine's admission sees: how many streams of the usual size would start by their first audio's
due time (`room`: the room in time its engine publishes, less what its API started since, the
very figure its early refusal acts on; capacity/room.py), how soon there will be room when there
is none (`until_room`), and its free KV blocks. Each replica reports these (`routing_stats`); the
router samples two replicas that have room and takes the roomier (power of two choices, so that many
routers acting on the same slightly old reports do not all pile onto one replica), and counts the
requests it chose each replica for since that replica's report. Replicas whose report is stale come
after those with room; a replica that would refuse (429) is chosen only when every replica would,
the one with room soonest first, so the client's 429 carries the shortest Retry-After.

This module imports only the standard library, Ray and `capacity.room` (pure Python): the Serve
proxy imports it, and must not load torch to route a request.
"""
from __future__ import annotations

import dataclasses
import random
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence, TypeVar

from ray.serve.request_router import FIFOMixin, RequestRouter

from capacity.room import room_left

# The keys of a replica's routing stats (api/ray_serve/deployment.py writes them).
AT, READY, ROOM, UNTIL_ROOM, KV_FREE = "at", "ready", "room", "until_room", "kv_free"
# Reports older than this (wall-clock seconds) are not trusted: the replica may be stuck.
DEFAULT_MAX_STATS_AGE_S = 3.0

Replica = TypeVar("Replica", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Headroom:
    """One replica's report: `room` streams of the usual size would start in time, as of
    wall-clock time `at` (0 when none would: the replica would refuse), or else in `until_room`
    seconds; `kv_free` is the share of its KV blocks
    free. A replica that is not `ready` (its engine core is down or restarting) has no room."""

    at: float
    ready: bool
    room: int
    until_room: float
    kv_free: float

    @classmethod
    def parse(cls, stats: dict | None) -> Headroom | None:
        """The report in `stats`, or None when there is none (a replica reports `{}` until Ray
        first asks it)."""
        if not stats or AT not in stats:
            return None
        return cls(float(stats[AT]), bool(stats.get(READY, False)), int(stats.get(ROOM, 0)),
                   float(stats.get(UNTIL_ROOM, 0.0)), float(stats.get(KV_FREE, 0.0)))


def rank_replicas(candidates: Sequence[Replica], headroom: Callable[[Replica], Headroom | None],
                  routed_since: Callable[[Replica, float], int], now: float, max_age_s: float,
                  rng: random.Random) -> list[Replica] | None:
    """`candidates` best first, or None when no replica has a fresh report (then Ray's default
    choice, by requests in flight, is as good as any). Replicas with room (their reported room
    less the requests routed to them since the report) come first: two of them sampled, the
    roomier first, then the rest roomiest first; then those with stale reports; then the ready
    ones without room, soonest room first; then those not ready."""
    fresh: list[tuple[Replica, Headroom]] = []
    stale: list[Replica] = []
    for replica in candidates:
        report = headroom(replica)
        if report is None or now - report.at > max_age_s:
            stale.append(replica)
        else:
            fresh.append((replica, report))
    if not fresh:
        return None
    with_room: list[tuple[int, float, Replica]] = []
    full: list[tuple[float, Replica]] = []
    down: list[Replica] = []
    for replica, report in fresh:
        room = room_left(report.room, routed_since(replica, report.at))
        if not report.ready:
            down.append(replica)
        elif room > 0:
            with_room.append((room, report.kv_free, replica))
        else:
            full.append((report.until_room, replica))
    sampled = rng.sample(with_room, min(2, len(with_room)))
    rest = [entry for entry in with_room if entry not in sampled]
    ordered = sorted(sampled, key=_roominess, reverse=True) + sorted(rest, key=_roominess, reverse=True)
    return ([replica for *_, replica in ordered] + stale + [replica for _, replica in sorted(full, key=lambda e: e[0])]
            + down)


def _roominess(entry: tuple[int, float, object]) -> tuple[int, float]:
    room, kv_free, _ = entry
    return room, kv_free


class RoutedLog:
    """When this router chose each replica for a request, for the last `horizon_s` seconds: a
    replica's report does not yet count the requests sent to it since. Invariant: each replica's
    times are in order and none is older than `horizon_s` after `count_since` prunes."""

    def __init__(self, horizon_s: float) -> None:
        self.horizon_s = horizon_s
        self._times: dict[Hashable, deque[float]] = defaultdict(deque)

    def add(self, replica: Hashable, at: float) -> None:
        self._times[replica].append(at)

    def count_since(self, replica: Hashable, since: float, now: float) -> int:
        times = self._times.get(replica)
        if times is None:
            return 0
        while times and times[0] < now - self.horizon_s:
            times.popleft()
        if not times:
            del self._times[replica]  # a replica no longer sent to leaves nothing behind
            return 0
        return sum(1 for at in times if at >= since)

    def forget(self, replica: Hashable) -> None:
        self._times.pop(replica, None)


class HeadroomRouter(FIFOMixin, RequestRouter):
    """Ray Serve's request router for Chorus replicas (see the module docstring). Invariant: with
    a fresh report from any candidate, every candidate appears in exactly one rank (Ray falls
    back rank by rank); a report's age is counted from when this router first saw it, on its own
    clock (replicas on other machines have other clocks).

    A choice is counted against the replica ranked first when it is made: if that replica turns
    the request away (Serve's own `max_ongoing_requests` is full), Ray sends it to the next rank
    uncounted until that replica's next report. Unlike Ray's default router this one does not
    prefer replicas on the proxy's own node: room decides."""

    def initialize_state(self, max_stats_age_s: float = DEFAULT_MAX_STATS_AGE_S) -> None:
        self._max_age_s = max_stats_age_s
        self._rng = random.Random()
        self._routed = RoutedLog(horizon_s=4 * max_stats_age_s)
        self._seen: dict = {}  # replica id -> (its latest report's `at`, when this router first saw it)

    async def choose_replicas(self, candidate_replicas, pending_request=None):
        now = time.time()
        reports = {r.replica_id: self._as_seen(r.replica_id, Headroom.parse(r.routing_stats), now)
                   for r in candidate_replicas}
        self._seen = {replica_id: self._seen[replica_id] for replica_id in reports if replica_id in self._seen}
        ranked = rank_replicas(
            candidate_replicas, lambda r: reports[r.replica_id],
            lambda r, since: self._routed.count_since(r.replica_id, since, now), now, self._max_age_s, self._rng)
        if ranked is None:
            # No fresh report at all: Ray takes whichever of two has fewer requests in flight.
            return [self._rng.sample(candidate_replicas, min(2, len(candidate_replicas)))]
        # NOTE: counted when chosen, not when Ray reports it routed: a burst's requests are all
        # chosen before the first is routed, and would all go to the same roomiest replica.
        self._routed.add(ranked[0].replica_id, now)
        return [[replica] for replica in ranked]

    def on_replica_actor_died(self, replica_id) -> None:
        super().on_replica_actor_died(replica_id)
        self._routed.forget(replica_id)
        self._seen.pop(replica_id, None)

    def _as_seen(self, replica_id, report: Headroom | None, now: float) -> Headroom | None:
        """`report` dated when this router first saw it."""
        if report is None:
            return None
        at, seen = self._seen.get(replica_id, (None, now))
        if at != report.at:
            at, seen = report.at, now
            self._seen[replica_id] = (at, seen)
        return dataclasses.replace(report, at=seen)
