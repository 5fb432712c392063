"""Qwen3-TTS checkpoints of each type for the API tests: the tiny CustomVoice checkpoint, and copies
of it typed voice_design and base (its files linked, its config.json rewritten: the engine runs
any type on the same weights; only prompt preparation differs)."""
from __future__ import annotations

import json
from pathlib import Path

from model.families.qwen3_tts.tiny_random import ensure_tiny_qwen3


def qwen3_checkpoint(root: Path, model_type: str = "custom_voice") -> Path:
    """The tiny checkpoint as `model_type`: itself for custom_voice, else a typed copy under `root`."""
    source = ensure_tiny_qwen3()
    if model_type == "custom_voice":
        return source
    folder = root / f"tiny-qwen3-{model_type}"
    folder.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.name != "config.json" and not (folder / item.name).exists():
            (folder / item.name).symlink_to(item)
    config = json.loads((source / "config.json").read_text())
    config["tts_model_type"] = model_type
    config["talker_config"] |= {"spk_id": {}, "spk_is_dialect": {}}
    (folder / "config.json").write_text(json.dumps(config))
    return folder
