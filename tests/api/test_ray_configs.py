"""The Serve configs in deploy/ are what Ray accepts, and name a builder whose arguments parse."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

pytest.importorskip("ray.serve")

from ray.serve.schema import ServeDeploySchema  # noqa: E402

from api.ray_serve.deployment import ReplicaSpec  # noqa: E402

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def serve_configs() -> dict[str, dict]:
    service = yaml.safe_load((DEPLOY / "kuberay" / "rayservice.yaml").read_text())
    assert service["kind"] == "RayService" and service["apiVersion"] == "ray.io/v1"
    return {"ray/serve.yaml": yaml.safe_load((DEPLOY / "ray" / "serve.yaml").read_text()),
            "kuberay/rayservice.yaml": yaml.safe_load(service["spec"]["serveConfigV2"])}


@pytest.mark.parametrize("name", list(serve_configs()))
def test_config_is_valid_for_ray_and_its_builder_args_parse(name):
    config = ServeDeploySchema.model_validate(serve_configs()[name])
    (app,) = config.applications
    module, _, attribute = app.import_path.partition(":")
    assert callable(getattr(importlib.import_module(module), attribute))
    spec = ReplicaSpec(**app.args)  # the flags parse as `chorus serve` flags, or this raises
    assert spec.max_streams > 0
    (deployment,) = app.deployments
    assert deployment.name == "ChorusReplica"
    autoscaling = deployment.autoscaling_config
    assert autoscaling["target_ongoing_requests"] < spec.max_streams


def test_a_bad_flag_fails_in_the_driver_not_in_every_replica():
    with pytest.raises(ValueError, match="chorus serve"):
        ReplicaSpec(flags="--no-such-flag")
