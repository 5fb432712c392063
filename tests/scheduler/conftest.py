from __future__ import annotations

from capacity.config import CapacityConfig
from capacity.listener import Listener
from capacity.step_cost import StepCostModel
from memory.block_hash import hash_full_blocks
from memory.kv_cache_manager import KVCacheManager
from scheduler import Scheduler, SchedulerConfig, Sequence


def due_at(seq: Sequence, deadline: float) -> None:
    """Gives `seq` the deadline `deadline` by hand (the engine's request table keeps its listener
    current): a listener still waiting for its first audio, due then (inf: no listener)."""
    seq.listener = Listener(first_audio_due=deadline)


def runs_dry_at(seq: Sequence, moment: float, received: int = 2) -> None:
    """Gives `seq` a playing listener that has heard `received` seconds of audio and runs dry at
    `moment` (in the past: it has run dry)."""
    seq.listener = Listener(sample_rate=1, first_audio_at=moment - received, samples_received=received)


class Simulator:
    """Drives a real Scheduler + KVCacheManager the way the engine does, with each request's
    output count fixed in advance (its `max_output_tokens`) instead of a model deciding when it
    stops."""

    def __init__(self, num_blocks: int, block_size: int = 4, step_cost: StepCostModel | None = None,
                 capacity: CapacityConfig | None = None, **config) -> None:
        self.kv = KVCacheManager(num_blocks, block_size)
        self.scheduler = Scheduler(SchedulerConfig(**config), self.kv, step_cost, capacity)
        self.block_size = block_size
        self.sequences: dict[str, Sequence] = {}
        self.finished: list[str] = []
        self.steps: list = []

    def add(self, request_id: str, prompt_len: int, outputs: int, priority: int = 0, tokens=None) -> Sequence:
        tokens = tokens or [hash((request_id, i)) % 1000 for i in range(prompt_len)]
        seq = Sequence(
            request_id,
            num_prompt_tokens=len(tokens),
            max_output_tokens=outputs,
            priority=priority,
            prompt_block_hashes=hash_full_blocks(tokens, self.block_size),
        )
        self.scheduler.add(seq)
        self.sequences[request_id] = seq
        return seq

    def step(self, now: float | None = None):
        out = self.scheduler.schedule(now)
        self.steps.append(out)
        self.finished += self.scheduler.update_from_output(out)
        return out

    def run(self, max_steps: int = 10_000) -> None:
        for _ in range(max_steps):
            if not self.scheduler.num_unfinished:
                return
            self.step()
        raise AssertionError("requests did not finish")
