"""`chorus serve --replicas N`: N replicas behind Serve's proxy at --host/--port, on a Ray instance
started here (or on the cluster RAY_ADDRESS names), until SIGINT or SIGTERM.

The first signal drains: the app is deleted, and Ray stops each replica once its streams end (at
most `--drain-timeout`). A second signal stops at once. Only what this command started is
stopped: on a cluster it joined, other applications and Serve itself keep running.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time

logger = logging.getLogger("chorus.api")
APP_NAME = "chorus"
# After the drain timeout, how long Ray may take to stop the replicas' processes.
_STOP_GRACE_S = 10.0


def run_replicas(args: argparse.Namespace, flags: list[str]) -> int:
    """Serves `flags` (`chorus serve`'s own) on `args.replicas` replicas; returns the exit code."""
    import ray
    from ray import serve

    from api.ray_serve.deployment import ReplicaSpec, chorus_application

    if args.replicas < 1:
        raise SystemExit("--replicas must be at least 1")
    spec = ReplicaSpec(flags=flags, num_cpus=args.replica_cpus, num_gpus=args.replica_gpus,
                       drain_timeout=args.drain_timeout)
    joined = os.environ.get("RAY_ADDRESS")  # e.g. "auto" on a node of a running cluster
    ray.init(address=joined)
    stop = threading.Event()

    def on_signal(signum, frame) -> None:
        if stop.is_set():
            raise KeyboardInterrupt  # the second signal: no more waiting
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    try:
        serve.start(http_options={"host": args.host, "port": args.port})  # a running Serve keeps its own
        serve.run(chorus_application(spec, num_replicas=args.replicas), name=APP_NAME, route_prefix="/")
        logger.info("serving %d replicas at http://%s:%d (Ctrl+C to stop)", args.replicas, args.host, args.port)
        stop.wait()
        logger.info("draining: the replicas finish their streams for up to %.0f s", args.drain_timeout)
        _delete_and_wait(serve, args.drain_timeout + _STOP_GRACE_S)
    except KeyboardInterrupt:
        logger.info("stopping now")
    finally:
        if not joined:
            serve.shutdown()
        ray.shutdown()
    return 0


def _delete_and_wait(serve, timeout: float) -> None:
    serve.delete(APP_NAME, _blocking=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        app = serve.status().applications.get(APP_NAME)
        if app is None or app.status == "NOT_STARTED":  # Ray's word for deleted
            return
        time.sleep(0.5)
