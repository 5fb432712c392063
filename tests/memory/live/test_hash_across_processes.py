"""Block hashes are the same in every process (whatever PYTHONHASHSEED), so a prefix cached by one
engine process is found by the next."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memory.block_hash import hash_full_blocks

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_hash_is_stable_across_processes():
    script = (
        "from memory.block_hash import hash_full_blocks;"
        "print(hash_full_blocks(list(range(8)), 4, extra_key=('model', 'voice')))"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.add(result.stdout.strip())
    local = str(hash_full_blocks(list(range(8)), 4, extra_key=("model", "voice")))
    assert outputs == {local}

