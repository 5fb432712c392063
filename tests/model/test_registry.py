"""The family registry: config.json's chorus.family picks the family, and only its modules load."""
from __future__ import annotations

import json

import pytest

from model.families.joe.student import SHIPPED_WEIGHTS
from model.registry import family_name


def test_the_family_is_the_chorus_section_s_and_orpheus_without_one(tmp_path):
    assert family_name(SHIPPED_WEIGHTS) == "joe"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))  # an upstream checkpoint
    assert family_name(tmp_path) == "orpheus"
    (tmp_path / "config.json").write_text(json.dumps({"chorus": {"family": "bark"}}))
    with pytest.raises(ValueError, match="unsupported model family 'bark'"):
        family_name(tmp_path)
