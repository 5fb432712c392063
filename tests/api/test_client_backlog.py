"""The backpressure rule on a fake engine client: each request judged by its own waiting audio."""
from __future__ import annotations

import asyncio

from api.speech.backpressure import ClientBacklog

RATE = 100  # samples a second: 1 s is 100 samples


class FakeEngine:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    def pause(self, request_id: str, paused: bool) -> None:
        self.calls.append((request_id, paused))


def test_the_request_being_read_is_never_held_back_by_the_one_running_ahead():
    async def run():
        engine, stalled = FakeEngine(), []
        backlog = ClientBacklog(engine, RATE, limit_seconds=2, stall_seconds=60, on_stall=lambda: stalled.append(1) or True)
        backlog.added("next", 250)  # the next segment runs 2.5 s ahead: it pauses
        assert engine.calls == [("next", True)]
        for _ in range(3):  # the current one flows: taken as fast as it comes
            backlog.added("current", 50)
            backlog.taken("current", 50)
        assert ("current", True) not in engine.calls
        backlog.taken("next", 200)  # its turn: once under half the limit it resumes
        assert engine.calls[-1] == ("next", False)
        backlog.close()
        assert not stalled

    asyncio.run(run())


def test_a_client_that_takes_nothing_while_paused_is_given_up_on_once():
    async def run():
        engine, stalled = FakeEngine(), []
        backlog = ClientBacklog(engine, RATE, limit_seconds=1, stall_seconds=0.05, on_stall=lambda: stalled.append(1) or True)
        backlog.added("r", 150)
        await asyncio.sleep(0.2)
        assert stalled == [1]

    asyncio.run(run())


def test_a_stall_the_owner_does_not_act_on_is_asked_again():
    async def run():
        engine, asked = FakeEngine(), []
        # A speak-socket turn waiting for the one before it: not its turn to be read yet.
        backlog = ClientBacklog(engine, RATE, limit_seconds=1, stall_seconds=0.05, on_stall=lambda: asked.append(1) and False)
        backlog.added("r", 150)
        await asyncio.sleep(0.2)
        assert len(asked) >= 2
        backlog.close()

    asyncio.run(run())


def test_a_slow_but_reading_client_is_not_a_stall():
    async def run():
        engine, stalled = FakeEngine(), []
        backlog = ClientBacklog(engine, RATE, limit_seconds=1, stall_seconds=0.1, on_stall=lambda: stalled.append(1) or True)
        backlog.added("r", 150)
        for _ in range(5):
            await asyncio.sleep(0.06)
            backlog.taken("r", 1)  # a little, often
            backlog.added("r", 1)
        assert not stalled
        backlog.close()

    asyncio.run(run())
