# Fixtures shared by the joe voice's serving and training suites (autouse: one torch thread).
from tests.voice_packages import latent_frontend, one_torch_thread  # noqa: F401
