"""`chorus serve --replicas N`: a Ray instance on this machine (or the cluster RAY_ADDRESS names),
N replicas behind Serve's proxy at --host/--port, until SIGINT or SIGTERM."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import threading

logger = logging.getLogger("chorus.api")
APP_NAME = "chorus"


def run_replicas(args: argparse.Namespace, flags: list[str]) -> int:
    """Serves `flags` (`chorus serve`'s own) on `args.replicas` replicas; returns the exit code."""
    import ray
    from ray import serve

    from api.ray_serve.deployment import ReplicaSpec, chorus_application

    if args.replicas < 1:
        raise SystemExit("--replicas must be at least 1")
    spec = ReplicaSpec(flags=flags, num_cpus=args.replica_cpus, num_gpus=args.replica_gpus,
                       drain_timeout=args.drain_timeout)
    # NOTE: RAY_ADDRESS (e.g. "auto" on a node of a running cluster) joins that cluster; without
    # it a Ray instance starts here and stops with this command.
    ray.init(address=os.environ.get("RAY_ADDRESS"))
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": args.host, "port": args.port})
        serve.run(chorus_application(spec, num_replicas=args.replicas), name=APP_NAME, route_prefix="/")
        logger.info("serving %d replicas at http://%s:%d (Ctrl+C to stop)", args.replicas, args.host, args.port)
        stop.wait()
        logger.info("stopping: replicas finish their streams for up to %.0f s", args.drain_timeout)
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0
