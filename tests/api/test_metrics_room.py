"""/metrics carries the engine's room for new streams, as the early refusal and the router see it."""
from __future__ import annotations

from api.http.metrics import ApiMetrics
from capacity.room import Room
from engine.outputs import EngineStats


def test_room_and_seconds_until_room_are_the_engines_last_report():
    stats = EngineStats(ready=True, room=Room(now=3, in_time=3))
    metrics = ApiMetrics(lambda: stats)
    assert metrics.registry.get_sample_value("chorus_room_streams") == 3
    stats.room = Room(now=0, in_time=2, seconds_until=1.5)
    assert metrics.registry.get_sample_value("chorus_room_streams") == 0
    assert metrics.registry.get_sample_value("chorus_room_in_time_streams") == 2
    assert metrics.registry.get_sample_value("chorus_seconds_until_room") == 1.5
    assert metrics.registry.get_sample_value("chorus_room_in_time_short_streams") == 2  # not projected: in_time
    stats.room = Room(now=0, in_time=2, seconds_until=1.5, short_in_time=5)
    assert metrics.registry.get_sample_value("chorus_room_in_time_short_streams") == 5
