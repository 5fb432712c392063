"""The Ray Serve deployment: replicas that each own one Chorus engine behind the same HTTP app.

Each replica runs `create_app`'s FastAPI app (the OpenAI speech route, SSE, the Deepgram routes
and socket, /metrics) with its own engine-core process, started by the app's lifespan inside the
replica. Ray Serve's proxy streams each response through as the replica sends it. The replica
reports its headroom for the router (api/ray_serve/router.py), fails Ray's health check once its
engine core is beyond saving, and copies its Prometheus series into Ray's metrics with its
replica id (api/ray_serve/metrics.py).

    serve run deploy/ray/serve.yaml                     # or, from Python / `chorus serve --replicas N`:
    serve.run(chorus_application(ReplicaSpec(flags="--model joe"), num_replicas=2))
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from fastapi import FastAPI
from ray import serve
from ray.serve import Application
from ray.serve.config import RequestRouterConfig

from api.app import create_app
from api.config.engine_args import engine_config_from_args
from api.ray_serve.metrics import RayMetricsMirror
from api.ray_serve.replica_header import ReplicaHeader
from api.ray_serve.router import AT, DEFAULT_MAX_STATS_AGE_S, KV_FREE, READY, ROOM, UNTIL_ROOM
from api.config.serve_args import parse_serve_flags, serve_settings_from_args
from api.config.settings import ApiSettings
from engine.config import EngineConfig

# How often each replica's headroom reaches the routers: a new stream every few tenths of a
# second per replica is usual, so reports much older than that route on stale room.
ROUTING_STATS_PERIOD_S = 0.5
# An engine core that died is restarted inside the replica in about 4 s; Ray only needs to act
# when it gave up, so the check can be slow and cheap. The check answers on the replica's event
# loop, which on a loaded CPU machine can be busy for seconds (starting its engine, serving
# streams); a late answer is not a dead replica, and replacing a busy one would cut every stream
# it holds, so the timeout is generous. An engine that gave up fails the check at once.
HEALTH_CHECK_PERIOD_S = 2.0
HEALTH_CHECK_TIMEOUT_S = 30.0


@dataclass(slots=True)
class ReplicaSpec:
    """What every replica runs: `flags` are `chorus serve`'s own (model, engine, API settings; of
    the server's own flags --host, --port and --head-timeout-seconds are the proxy's business, and
    `drain_timeout` here replaces --drain-timeout), `max_streams` caps the requests Ray sends one
    replica at once (streams and sockets; its engine refuses beyond its room anyway). Invariant:
    `flags` parse as `chorus serve` flags (checked when the spec is made, in the driver)."""

    flags: str | list[str] = ""
    max_streams: int = 64
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    drain_timeout: float = 30.0

    def __post_init__(self) -> None:
        self.app_config()

    def app_config(self) -> tuple[EngineConfig, ApiSettings]:
        """The engine config and API settings of the flags, exactly as `chorus serve` reads them.
        Raises ValueError for flags `chorus serve` would refuse."""
        try:
            args = parse_serve_flags(self.flags)
        except SystemExit as exc:  # argparse has already said why on stderr
            raise ValueError(f"not `chorus serve` flags: {self.flags!r}") from exc
        return engine_config_from_args(args), serve_settings_from_args(args)

    def build_app(self) -> FastAPI:
        """The replica's app, built in the replica (its environment, e.g. CHORUS_API_KEY, and its
        install paths), with every response naming the replica."""
        config, settings = self.app_config()
        app = create_app(config, settings)
        app.add_middleware(ReplicaHeader)
        return app


def routing_stats(app) -> dict:
    """This replica's headroom as the router reads it (api/ray_serve/router.py's keys)."""
    engine = getattr(app.state, "engine", None)
    if engine is None:  # the lifespan has not started the engine yet
        return {AT: time.time(), READY: False, ROOM: 0, UNTIL_ROOM: 1.0, KV_FREE: 0.0}
    stats = engine.stats
    total = max(1, stats.kv_blocks_total)
    ready = engine.is_ready and engine.failure is None
    return {AT: time.time(), READY: ready, ROOM: app.state.early_refusal.room_left(stats) if ready else 0,
            UNTIL_ROOM: stats.room.seconds_until, KV_FREE: 1.0 - stats.kv_blocks_used / total}


def chorus_application(spec: ReplicaSpec, num_replicas: int | str | None = None,
                       autoscaling_config: dict | None = None) -> Application:
    """The Chorus Serve application: `num_replicas` fixed replicas, or `autoscaling_config`
    (Ray's; see docs/operations.md "Scaling out"), each with its own engine as `spec` says."""
    actor_options = {"num_cpus": spec.num_cpus, "num_gpus": spec.num_gpus}

    def replica_app() -> FastAPI:  # Serve calls it in each replica
        return spec.build_app()

    options = dict(
        max_ongoing_requests=spec.max_streams,
        ray_actor_options=actor_options,
        health_check_period_s=HEALTH_CHECK_PERIOD_S,
        health_check_timeout_s=HEALTH_CHECK_TIMEOUT_S,
        # Ray stops sending a replica new requests before stopping it, then waits this long for
        # those in flight: the same drain `chorus serve` gives on SIGTERM.
        graceful_shutdown_timeout_s=spec.drain_timeout,
        request_router_config=RequestRouterConfig(
            request_router_class="api.ray_serve.router:HeadroomRouter",
            request_router_kwargs={"max_stats_age_s": DEFAULT_MAX_STATS_AGE_S},
            request_routing_stats_period_s=ROUTING_STATS_PERIOD_S,
            request_routing_stats_timeout_s=2 * ROUTING_STATS_PERIOD_S,
        ),
    )
    if autoscaling_config is not None:
        options["autoscaling_config"] = autoscaling_config
    elif num_replicas is not None:
        options["num_replicas"] = num_replicas

    @serve.deployment(**options)
    @serve.ingress(replica_app)
    class ChorusReplica:
        """One engine behind the app. Invariant: healthy while its engine core runs or is being
        restarted within the core's restart budget; unhealthy (Ray replaces it) once that budget
        is spent."""

        def __init__(self) -> None:
            self._metrics = RayMetricsMirror(lambda: getattr(self.app.state, "metrics", None))

        # NOTE: async, so Ray runs them on the replica's event loop with the app (a plain def
        # would run on a worker thread, beside the loop that updates what they read).
        async def check_health(self) -> None:
            engine = getattr(self.app.state, "engine", None)
            if engine is not None and engine.gave_up.is_set():
                raise RuntimeError(f"the engine core cannot be kept running: {engine.failure}")

        async def record_routing_stats(self) -> dict:
            self._metrics.copy()  # at most every COPY_INTERVAL_S; no task of its own to manage
            return routing_stats(self.app)

    return ChorusReplica.bind()


def build(args: dict) -> Application:
    """The builder `serve run` / `serve deploy` call with a config file's `args` (see
    deploy/ray/serve.yaml): `flags`, `max_streams`, `num_cpus`, `num_gpus`, `drain_timeout`.
    Replica counts and autoscaling come from the file's `deployments` section, which Ray applies
    over these defaults."""
    return chorus_application(ReplicaSpec(**args))
