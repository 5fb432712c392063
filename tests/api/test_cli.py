"""`chorus serve` flags that belong to the HTTP layer."""
from __future__ import annotations

from api.cli import build_parser


def test_api_key_flag_and_environment(monkeypatch):
    assert build_parser().parse_args(["serve", "--api-key", "k1"]).api_key == "k1"
    monkeypatch.setenv("CHORUS_API_KEY", "from-env")
    assert build_parser().parse_args(["serve"]).api_key == "from-env"
    monkeypatch.delenv("CHORUS_API_KEY")
    assert build_parser().parse_args(["serve"]).api_key is None
