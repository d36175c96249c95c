"""A real Ray Serve application that logs vLLM's metrics the way Ray Serve LLM does.

Run as a child process by the agent's Ray test (``python ray_app.py METRICS_PORT
HTTP_PORT``); prints ``READY`` once both applications answer, and shuts Serve and Ray
down on SIGTERM. It needs no GPU and no vLLM: each replica records the vLLM metric
names through ``ray.util.metrics`` exactly as vLLM's ``RayPrometheusStatLogger`` does
(``:`` sanitised to ``_``, tag keys ``model_name``, ``engine`` plus ``ReplicaId`` =
the Serve replica's unique id), so Ray exports real ``ray_vllm_*`` series per replica
next to Ray Serve's own ``ray_serve_*`` series.

Two applications make the page multi-model: ``tiny-a`` (2 replicas) and ``tiny-b``
(1 replica). A request ``{"prompt": "...", "max_tokens": N}`` counts prompt words as
prompt tokens (all of them looked up in the "prefix cache", half of them hits) and
``N`` generated tokens, and answers with the replica id so the test knows which
replica's counters moved.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Any

TTFT_BUCKETS_S = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0]
TAGS = ("model_name", "engine", "ReplicaId")


def build_app(model_name: str, replicas: int) -> Any:
    from ray import serve
    from ray.util import metrics

    @serve.deployment(
        name=f"LLMServer:{model_name}",
        num_replicas=replicas,
        ray_actor_options={"num_cpus": 0},
    )
    class TinyLLM:
        def __init__(self) -> None:
            self.replica_id = serve.get_replica_context().replica_id.unique_id
            self.tags = {"model_name": model_name, "engine": "0", "ReplicaId": self.replica_id}

            def gauge(name: str) -> Any:
                g = metrics.Gauge(name, description=name, tag_keys=TAGS)
                g.set(0, tags=self.tags)
                return g

            self.running_gauge = gauge("vllm_num_requests_running")
            self.waiting_gauge = gauge("vllm_num_requests_waiting")
            self.kv_gauge = gauge("vllm_kv_cache_usage_perc")
            self.counters = {
                n: metrics.Counter(n, description=n, tag_keys=TAGS)
                for n in (
                    "vllm_prompt_tokens",
                    "vllm_generation_tokens",
                    "vllm_prefix_cache_queries",
                    "vllm_prefix_cache_hits",
                )
            }
            self.ttft = metrics.Histogram(
                "vllm_time_to_first_token_seconds",
                description="ttft",
                boundaries=TTFT_BUCKETS_S,
                tag_keys=TAGS,
            )
            self.running = 0
            self.kv_blocks_used = 0

        async def __call__(self, request: Any) -> dict[str, Any]:
            body = await request.json()
            start = time.perf_counter()
            prompt_tokens = len(str(body.get("prompt", "")).split())
            max_tokens = int(body.get("max_tokens", 1))
            self.running += 1
            self.running_gauge.set(self.running, tags=self.tags)
            self.counters["vllm_prompt_tokens"].inc(prompt_tokens, tags=self.tags)
            self.counters["vllm_prefix_cache_queries"].inc(prompt_tokens, tags=self.tags)
            hits = prompt_tokens // 2
            if hits:
                self.counters["vllm_prefix_cache_hits"].inc(hits, tags=self.tags)
            self.ttft.observe(time.perf_counter() - start, tags=self.tags)
            self.counters["vllm_generation_tokens"].inc(max_tokens, tags=self.tags)
            self.running -= 1
            self.running_gauge.set(self.running, tags=self.tags)
            # A fixed, replica-specific KV usage the test can check exactly.
            self.kv_blocks_used += 1
            self.kv_gauge.set(min(1.0, self.kv_blocks_used / 100), tags=self.tags)
            return {"replica": self.replica_id, "model": model_name}

    return TinyLLM.bind()


def main(metrics_port: int, http_port: int) -> None:
    import ray
    from ray import serve

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _metrics_export_port=metrics_port,
        object_store_memory=80 * 1024 * 1024,
        log_to_driver=False,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": http_port})
        serve.run(build_app("tiny-a", 2), name="tiny-a", route_prefix="/tiny-a")
        serve.run(build_app("tiny-b", 1), name="tiny-b", route_prefix="/tiny-b")
        print("READY", flush=True)
        stop.wait()
    finally:
        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
