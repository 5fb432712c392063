"""Chorus on Ray Serve: a local Ray instance, two tiny-random replicas behind Serve's proxy.

The official `openai` client streams through the proxy; requests spread over both replicas; a
replica whose engine core died gets no new speech while the other has room, fails its health
check and is replaced; a replica killed mid-stream ends its client's stream with an error, and
Ray brings it back; each replica's series reach Ray's metrics export with its replica id. The
instance is this module's alone, and no process of it outlives the module.
"""
from __future__ import annotations

import asyncio
import glob
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass

import httpx
import pytest

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

from openai import OpenAI  # noqa: E402

from api.app import create_app  # noqa: E402
from api.ray_serve.deployment import ReplicaSpec, chorus_application  # noqa: E402
from api.ray_serve.local import APP_NAME  # noqa: E402
from api.ray_serve.replica_header import REPLICA_HEADER  # noqa: E402
from benchmarks.scale_out import parent_pid, stat_fields  # noqa: E402
from model.tiny_random import ensure_tiny_random  # noqa: E402
from tests.api.conftest import LiveServer  # noqa: E402

# Fixed chunking (as the other API tests) so two runs of a seed give the same bytes; no core
# restarts, so a replica whose core dies stays down until Ray replaces it. Admission is off (as
# in the other API tests: two replicas and the proxy on two cores step too slowly for its
# real-time projection), so a replica's room is its free stream slots.
FLAGS = ("--model {model} --device cpu --num-threads 1 --num-kv-blocks 256 --max-num-seqs 4 "
         "--max-queue-delay none --urgent-slack-seconds 0 --defer-slack-seconds inf --max-core-restarts 0")
TEXT = "Hello there."
LONG_TEXT = " ".join(["The quick brown fox jumps over the lazy dog."] * 80)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def engine_cores() -> set[int]:
    found = subprocess.run(["pgrep", "-f", "chorus-engine-core"], capture_output=True, text=True).stdout
    return {int(pid) for pid in found.split()}


def replicas_running(expected: int) -> bool:
    status = serve.status().applications.get(APP_NAME)
    if status is None or status.status != "RUNNING":
        return False
    deployment = next(iter(status.deployments.values()))
    return deployment.replica_states.get("RUNNING", 0) == expected


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}\n{cluster_state()}")
        time.sleep(0.25)


def cluster_state() -> str:
    """What a failed wait saw: Serve's view of the app, the engine cores (with their parents and
    states) and the end of the controller's log, so a failure on CI explains itself."""
    lines = []
    try:
        status = serve.status().applications.get(APP_NAME)
        lines.append(f"app: {status and status.status} {status and status.message!r}")
        for name, deployment in (status.deployments.items() if status else ()):
            lines.append(f"deployment {name}: {deployment.status} {dict(deployment.replica_states)} "
                         f"{deployment.message!r}")
    except Exception as exc:  # noqa: BLE001 - a diagnostic must not hide the failure it explains
        lines.append(f"serve.status() failed: {exc!r}")
    for pid in sorted(engine_cores()):
        try:
            stat = stat_fields(pid)
            lines.append(f"engine core {pid}: state {stat[0]}, parent {stat[1]}")
        except OSError:
            lines.append(f"engine core {pid}: gone")
    # Every replica process with its children as `ps` names them: a core that lost its title, or a
    # replica whose core is gone, shows here (the engine cores above are found by title only).
    found = subprocess.run(["pgrep", "-f", "ServeReplica"], capture_output=True, text=True).stdout
    for replica in sorted(int(pid) for pid in found.split()):
        lines.append(f"replica process {replica}: children {children_of(replica)}")
    logs = sorted(glob.glob("/tmp/ray/session_latest/logs/serve/controller_*.log"))
    if logs:
        lines.append("controller log (last 25 lines):")
        lines.extend(line.rstrip()[:300] for line in open(logs[-1]).readlines()[-25:])
    # The replicas' own stderr (the engine's log lines: a core that died, restarted or gave up).
    for log in sorted(glob.glob("/tmp/ray/session_latest/logs/worker-*.err")):
        text = open(log, errors="replace").readlines()
        if any(line.startswith(":actor_name:ServeReplica") for line in text[:3]):
            lines.append(f"{os.path.basename(log)} (last 8 lines):")
            lines.extend(line.rstrip()[:300] for line in text[-8:])
    return "\n".join(lines)


def children_of(parent: int) -> list[str]:
    """`pid: command line` of each live child of `parent`."""
    children = []
    for pid in (int(entry) for entry in os.listdir("/proc") if entry.isdigit()):
        try:
            if parent_pid(pid) != parent:
                continue
            command = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            children.append(f"{pid}: {command.strip()[:120]}")
        except OSError:
            continue  # gone while we looked
    return sorted(children)


@dataclass
class Cluster:
    url: str
    metrics_url: str
    spec: ReplicaSpec
    cores_before: set[int]


@pytest.fixture(scope="module")
def cluster(chorus_cache):
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # before ray.init: its processes inherit it
    spec = ReplicaSpec(flags=FLAGS.format(model=ensure_tiny_random()), max_streams=16, num_cpus=1)
    cores_before = engine_cores()
    # Ray binds its own metrics port: one picked here and released could be taken before Ray's agent
    # binds it (it once was, and the node never started).
    ray.init(num_cpus=4, include_dashboard=False, object_store_memory=100 * 2**20, log_to_driver=False,
             _system_config={"metrics_report_interval_ms": 1000})
    try:
        metrics_port = ray.nodes()[0]["MetricsExportPort"]
        http_port = free_port()  # after Ray's start, which binds many ports of the same range
        serve.start(http_options={"host": "127.0.0.1", "port": http_port})
        serve.run(chorus_application(spec, num_replicas=2), name=APP_NAME, route_prefix="/")
        yield Cluster(f"http://127.0.0.1:{http_port}", f"http://127.0.0.1:{metrics_port}/metrics", spec,
                      cores_before)
    finally:
        serve.shutdown()
        ray.shutdown()
    # Every engine core the replicas started has ended with them.
    wait_for(lambda: engine_cores() <= cores_before, 30, "the replicas' engine cores exit")
    leftovers = subprocess.run(["pgrep", "-f", "raylet|gcs_server|ray::"], capture_output=True, text=True).stdout
    assert leftovers.strip() == "", f"Ray processes left behind: {leftovers}"


def speech(text: str = TEXT, seed: int = 7) -> dict:
    return {"model": "tts-1", "input": text, "voice": "alloy", "response_format": "pcm", "seed": seed}


def test_openai_client_through_the_proxy_gets_the_audio_of_a_direct_server(cluster):
    client = OpenAI(base_url=f"{cluster.url}/v1", api_key="unused")
    chunks = []
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="pcm", extra_body={"seed": 7}
    ) as response:
        assert response.status_code == 200
        assert response.headers[REPLICA_HEADER]
        chunks = list(response.iter_bytes())
    config, settings = cluster.spec.app_config()
    with LiveServer(create_app(config, settings)) as direct:
        expected = httpx.post(f"{direct.url}/v1/audio/speech", json=speech(), timeout=60)
    assert expected.status_code == 200 and len(expected.content) > 0
    assert b"".join(chunks) == expected.content


def test_concurrent_requests_spread_over_both_replicas(cluster):
    async def main():
        async with httpx.AsyncClient(base_url=cluster.url, timeout=60) as client:
            async def one(seed: int) -> tuple[int, str, int]:
                async with client.stream("POST", "/v1/audio/speech", json=speech(seed=seed)) as response:
                    body = await response.aread()
                    return response.status_code, response.headers.get(REPLICA_HEADER), len(body)
            return await asyncio.gather(*(one(seed) for seed in range(8)))

    results = asyncio.run(main())
    assert all(status == 200 and size > 0 for status, _, size in results), results
    assert len({replica for _, replica, _ in results}) == 2


def replica_ids() -> set[str]:
    return {actor["name"].rpartition("#")[2] for actor in ray.util.list_named_actors(all_namespaces=True)
            if actor["namespace"] == "serve" and actor["name"].startswith("SERVE_REPLICA::")}


def test_a_replica_whose_engine_died_gets_no_speech_and_ray_stops_it(cluster):
    ours = sorted(engine_cores() - cluster.cores_before)
    assert len(ours) == 2
    before = replica_ids()
    dead_replica_process = parent_pid(ours[0])
    os.kill(ours[0], signal.SIGKILL)
    # The next routing reports (every 0.5 s) say that replica is not ready; Ray's health check
    # (every 2 s) needs three failures in a row before it replaces it.
    time.sleep(3.0)
    served_by = set()
    for seed in range(6):
        response = httpx.post(f"{cluster.url}/v1/audio/speech", json=speech(seed=seed), timeout=60)
        assert response.status_code == 200, response.text  # never routed to the dead engine (a 503)
        served_by.add(response.headers[REPLICA_HEADER])
    # Its health check fails and Ray stops it (the next test waits for Ray's replacement).
    wait_for(lambda: not os.path.exists(f"/proc/{dead_replica_process}"), 90, "the broken replica stopped")
    (dead,) = before - replica_ids()
    assert dead not in served_by


def test_a_replica_killed_mid_stream_ends_its_stream_with_an_error_and_comes_back(cluster):
    # (after the test above, Ray's replacement for the broken replica)
    wait_for(lambda: replicas_running(2) and len(engine_cores() - cluster.cores_before) == 2, 180,
             "two replicas running, each with its engine")
    with httpx.Client(base_url=cluster.url, timeout=httpx.Timeout(10.0)) as client:
        with client.stream("POST", "/v1/audio/speech", json=speech(LONG_TEXT)) as response:
            assert response.status_code == 200
            replica = response.headers[REPLICA_HEADER]
            chunks = response.iter_raw()
            next(chunks)
            name = next(actor["name"] for actor in ray.util.list_named_actors(all_namespaces=True)
                        if actor["namespace"] == "serve" and actor["name"].endswith(f"#{replica}"))
            killed_at = time.monotonic()
            ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)
            with pytest.raises(httpx.TransportError):  # cut short, not a hang and not a clean end
                for _ in chunks:
                    pass
            assert time.monotonic() - killed_at < 10
    # New requests go to the replica still alive at once, and Ray brings the other one back.
    response = httpx.post(f"{cluster.url}/v1/audio/speech", json=speech(), timeout=60)
    assert response.status_code == 200 and response.headers[REPLICA_HEADER] != replica
    wait_for(lambda: replicas_running(2), 180, "the killed replica replaced")
    wait_for(lambda: len(engine_cores() - cluster.cores_before) == 2, 120, "only the live replicas' cores left")


def test_each_replicas_series_reach_rays_metrics_with_its_replica_id(cluster):
    def replicas_reporting() -> set[str]:
        try:
            text = httpx.get(cluster.metrics_url, timeout=5).text
        except httpx.TransportError:
            return set()
        lines = [line for line in text.splitlines() if line.startswith("ray_chorus_requests_total{")]
        return {part.split('"')[1] for line in lines for part in line.split(",") if part.startswith("replica=")}

    wait_for(lambda: len(replicas_reporting()) >= 2, 60, "two replicas' chorus_requests_total in Ray's export")
