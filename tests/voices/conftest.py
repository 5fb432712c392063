from __future__ import annotations

import pytest

@pytest.fixture(scope="session")
def latent_frontend(chorus_cache):
    from model.voices.joe.frontend import TeacherFrontend
    from model.voices.joe.teacher import LATENT_CUT

    return TeacherFrontend(LATENT_CUT)


@pytest.fixture(scope="package", autouse=True)
def one_torch_thread():
    # NOTE: on the shared 2-core machine (load ~7) two intra-op threads spin against each other
    # and the decoder runs 20-30x slower than on one (measured: 1.9 s vs 0.06 s for 36 frames).
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
