"""The agent against a real Ray Serve application on CPU (``ray[serve]``).

``ray_app.py`` runs two Serve applications whose replicas log vLLM's metrics through
``ray.util.metrics`` the way Ray Serve LLM does, so Ray's metrics port exports real
``ray_vllm_*`` series with ``ReplicaId`` labels next to Ray Serve's ``ray_serve_*``.
The agent scrapes Ray's port and must publish one snapshot per replica and model whose
numbers match both the page and what each replica said it served.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eagle_eye.children import own_process_group
from eagle_eye.publish.agent.config import AgentConfig, EngineTarget
from eagle_eye.publish.agent.engines import EngineKind
from eagle_eye.snapshot import EngineState
from support import async_wait_for, free_tcp_port
from support.agent import Collector, start_agent, stop_agent
from support.pages import values

# Only look for Ray here: importing it would load Ray into the test process, and the
# application runs in its own child process anyway.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="needs ray[serve] (pip install 'ray[serve]')",
    ),
]

APP = Path(__file__).with_name("ray_app.py")


@dataclass
class RayServe:
    metrics_url: str
    http_url: str


@pytest.fixture
def ray_serve() -> Iterator[RayServe]:
    metrics_port, http_port = free_tcp_port(), free_tcp_port()
    with tempfile.TemporaryDirectory(prefix="eagle-eye-ray-") as tmp:
        log_path = Path(tmp) / "ray_app.log"
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_TMPDIR=tmp)
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, str(APP), str(metrics_port), str(http_port)],
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                **own_process_group(),
            )
        try:
            assert proc.stdout is not None
            line = _readline_with_deadline(proc, 150.0)
            if line.strip() != b"READY":
                pytest.fail(f"Ray Serve app did not start:\n{log_path.read_text()[-3000:]}")
            yield RayServe(f"http://127.0.0.1:{metrics_port}", f"http://127.0.0.1:{http_port}")
        finally:
            _stop(proc)


def _readline_with_deadline(proc: subprocess.Popen[bytes], timeout_s: float) -> bytes:
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            return b""
    return proc.stdout.readline()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """TERM (the app shuts Serve and Ray down), a deadline, then KILL its process group."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def _post(url: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        data: dict[str, object] = json.loads(resp.read())
        return data


async def _send(http_url: str, app: str, prompt_words: int) -> str:
    body = {"prompt": " ".join(["w"] * prompt_words), "max_tokens": 5}
    data = await asyncio.to_thread(_post, f"{http_url}/{app}", body)
    return str(data["replica"])


def _get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.read().decode()


async def test_one_snapshot_per_ray_replica_and_model_matching_the_page(
    nats_url: str, collector: Collector, ray_serve: RayServe
) -> None:
    # (model, replica) -> prompt tokens and prefix-cache hits that replica recorded
    queries: dict[tuple[str, str], int] = defaultdict(int)
    hits: dict[tuple[str, str], int] = defaultdict(int)
    for app, words in [("tiny-a", w) for w in (3, 5, 7, 9, 11, 13)] + [("tiny-b", 4)] * 3:
        replica = await _send(ray_serve.http_url, app, words)
        queries[(app, replica)] += words
        hits[(app, replica)] += words // 2

    target = EngineTarget(
        url=ray_serve.metrics_url, advertise=ray_serve.http_url, instance_id="ray"
    )
    agent = start_agent(nats_url, [target], AgentConfig(interval_s=0.1, timeout_s=2.0))
    try:

        def all_replicas_caught_up() -> bool:
            for (_model, replica), tokens in queries.items():
                snap = collector.latest(f"ray/{replica}")
                if snap is None or snap.prefix_cache_queries_total != tokens:
                    return False
            return True

        # Ray exports what replicas record every few seconds.
        caught_up = await async_wait_for(all_replicas_caught_up, 90, interval_s=0.2)
        assert caught_up, (
            dict(queries),
            {(s.instance_id, s.model, s.prefix_cache_queries_total) for s in collector.snapshots},
            agent.watchers[0].stats,
        )
        assert agent.watchers[0].kind is EngineKind.RAY_SERVE

        text = await asyncio.to_thread(_get_text, ray_serve.metrics_url + "/metrics")
        for model, replica in queries:
            snap = collector.latest(f"ray/{replica}")
            assert snap is not None
            page = values(text, ReplicaId=replica, model_name=model)
            assert (snap.engine, snap.model, snap.endpoint) == (
                "ray-serve",
                model,
                ray_serve.http_url,
            )
            assert snap.state is EngineState.READY
            assert snap.running == page["ray_vllm_num_requests_running"] == 0
            assert snap.kv_usage == page["ray_vllm_kv_cache_usage_perc"]
            assert snap.prefix_cache_hits_total == page["ray_vllm_prefix_cache_hits_total"]
            assert snap.prefix_cache_hits_total == hits[(model, replica)]
        # Ray Serve's own per-replica series name the replicas the agent published.
        assert {replica for _, replica in queries} <= _serve_replicas(text)
    finally:
        await stop_agent(agent)


def _serve_replicas(text: str) -> set[str]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        sample.labels["replica"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "ray_serve_replica_processing_queries"
    }
