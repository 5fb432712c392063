"""`python -m benchmarks.agent --quick` end to end against `chorus serve --model joe`: turns
played over the speak WebSocket, figures that agree with the turns, the engine's blocks back."""
from __future__ import annotations

import json

from benchmarks.agent import main
from tests.voice_packages import require_voice_packages

require_voice_packages()


# Starts `chorus serve --model joe` (about half a minute) for a 4 s level.
def test_quick_agent_run(tmp_path, chorus_cache):
    (level,) = main(["--quick", "--barge-in", "0.5", "--out", str(tmp_path)])
    written = json.loads(next(tmp_path.glob("agent-*.json")).read_text())
    assert written["levels"][0]["turns"] == level["turns"] >= 1
    assert "| agents | turns |" in next(tmp_path.glob("agent-*.md")).read_text()
    turns = level["turns_detail"]
    assert all(t["sentence_end_at"] is not None for t in turns)
    spoken = [t for t in turns if t["chunks"]]
    assert spoken and level["first_audio_p50"] is not None and 0 < level["first_audio_p50"] < 5
    assert level["kv_blocks_used_after"] == 0 and level["refused_pct"] == 0
    for turn in spoken:  # chunks in arrival order, after the sentence that started them
        arrivals = [at for at, _ in turn["chunks"]]
        assert arrivals == sorted(arrivals) and arrivals[0] > turn["sentence_end_at"]
