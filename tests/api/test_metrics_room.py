"""/metrics carries the engine's room for new streams, as the early refusal and the router see it."""
from __future__ import annotations

from api.metrics import ApiMetrics
from engine.outputs import EngineStats


def test_room_and_seconds_until_room_are_the_engines_last_report():
    stats = EngineStats(ready=True, room_streams=3, room_in_time=3, seconds_until_room=0.0)
    metrics = ApiMetrics(lambda: stats)
    assert metrics.registry.get_sample_value("chorus_room_streams") == 3
    stats.room_streams, stats.room_in_time, stats.seconds_until_room = 0, 2, 1.5
    assert metrics.registry.get_sample_value("chorus_room_streams") == 0
    assert metrics.registry.get_sample_value("chorus_room_in_time_streams") == 2
    assert metrics.registry.get_sample_value("chorus_seconds_until_room") == 1.5
