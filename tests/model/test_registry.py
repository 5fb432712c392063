"""The family registry: config.json's chorus.family picks the family, and only its modules load."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from model.families.joe.student import SHIPPED_WEIGHTS
from model.registry import family_name

REPO = Path(__file__).resolve().parents[2]


def test_the_family_is_the_chorus_section_s_and_orpheus_without_one(tmp_path):
    assert family_name(SHIPPED_WEIGHTS) == "joe"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))  # an upstream checkpoint
    assert family_name(tmp_path) == "orpheus"
    (tmp_path / "config.json").write_text(json.dumps({"chorus": {"family": "bark"}}))
    with pytest.raises(ValueError, match="unsupported model family 'bark'"):
        family_name(tmp_path)


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
