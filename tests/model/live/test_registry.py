"""The family registry in a fresh interpreter: serving orpheus imports none of joe's voice packages
(in this process other tests have imported them already)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_serving_orpheus_loads_no_voice_package(chorus_cache):
    code = (
        "import sys\n"
        "from model.config import ModelConfig\n"
        "from model.loader import load_family, load_frontend\n"
        "config = ModelConfig(model='tiny-random', device='cpu')\n"
        "load_frontend(config), load_family(config)\n"
        "print([m for m in ('piper', 'onnxruntime') if m in sys.modules])\n"
    )
    env = {**os.environ, "CHORUS_CACHE": str(chorus_cache)}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

