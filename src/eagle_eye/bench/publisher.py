"""``eagle-eye bench publisher``: what our ``record()`` costs inside vLLM, against vLLM's own.

Both loggers get the same real ``SchedulerStats``/``IterationStats`` objects, filled like
a busy decode step (32 running, waiting requests, prefix-cache lookups, TTFT/ITL lists,
two finished requests), in the same process, interleaved call by call so machine noise
hits both alike. vLLM's ``PrometheusStatLogger`` is built from a real ``VllmConfig``.
Ours publishes through a real ``Publisher`` to a real (embedded) nats-server; the run is
repeated with that server stopped, because ``record()`` must stay cheap through an
outage. The headline keys come from calls paced like engine steps (``--step-ms``), so
the background sender runs between them as it does in vLLM and every call meets cold
caches, as in vLLM; ``back_to_back_*`` keys show the same calls in a tight loop (warm).
``sender_cpu_us_per_step`` is the CPU the sender thread spends per step besides
``record()``: the price of a message per step, paid off the step path but under the GIL.

vLLM lives in its own virtualenv (``scripts/vllm_env.sh``). When ``vllm`` is not
importable here, the command re-runs itself with ``--vllm-python`` (default
``$EAGLE_EYE_VLLM_PYTHON``), pointing that interpreter at this very source tree.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

RATIO_GOAL = 0.25
P99_GOAL_US = 50.0


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def _summary_us(samples_ns: list[int]) -> dict[str, float]:
    values = sorted(ns / 1000.0 for ns in samples_ns)
    return {
        "p50": round(_percentile(values, 0.50), 3),
        "p90": round(_percentile(values, 0.90), 3),
        "p99": round(_percentile(values, 0.99), 3),
        "max": round(values[-1], 3),
    }


def tiny_vllm_config(work_dir: Path) -> Any:
    """A real ``VllmConfig`` for a tiny Llama, from a bare ``config.json`` (no weights)."""
    from transformers import LlamaConfig
    from vllm.engine.arg_utils import EngineArgs

    LlamaConfig(
        vocab_size=1024,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=512,
    ).save_pretrained(work_dir)
    args = EngineArgs(
        model=str(work_dir),
        served_model_name=["tiny-llama"],
        skip_tokenizer_init=True,
        load_format="dummy",
        max_model_len=256,
        enforce_eager=True,
    )
    return args.create_engine_config()


def busy_step_stats(step: int, *, running: int = 32, waiting: int = 6) -> tuple[Any, Any]:
    """``(SchedulerStats, IterationStats)`` as vLLM fills them for a busy decode step."""
    from vllm.v1.engine import FinishReason
    from vllm.v1.metrics.stats import (
        FinishedRequestStats,
        IterationStats,
        PrefixCacheStats,
        SchedulerStats,
    )

    scheduler = SchedulerStats(
        num_running_reqs=running,
        num_waiting_reqs=waiting,
        num_skipped_waiting_reqs=1,
        step_counter=step,
        kv_cache_usage=0.63,
        prefix_cache_stats=PrefixCacheStats(requests=2, queries=1024, hits=768),
    )
    iteration = IterationStats()
    iteration.num_generation_tokens = running
    iteration.prompt_token_stats.computed = 512
    iteration.prompt_token_stats.total = 1280
    iteration.prompt_token_stats.local_cache_hit = 768
    iteration.prompt_token_stats.cached_tokens = 768
    iteration.time_to_first_tokens_iter = [0.120, 0.180]
    iteration.inter_token_latencies_iter = [0.020 + 0.0005 * i for i in range(running - 2)]
    iteration.max_num_generation_tokens_iter = [256, 256]
    iteration.n_params_iter = [1, 1]
    iteration.finished_requests = [
        FinishedRequestStats(
            finish_reason=FinishReason.LENGTH,
            request_id=f"req-{step}-{i}",
            e2e_latency=4.2,
            num_prompt_tokens=640,
            num_generation_tokens=256,
            max_tokens_param=256,
            queued_time=0.3,
            prefill_time=0.15,
            inference_time=3.9,
            decode_time=3.75,
            mean_time_per_output_token=0.0147,
            num_cached_tokens=384,
        )
        for i in range(2)
    ]
    return scheduler, iteration


def _noop_record(_scheduler: Any, _iteration: Any, *_args: Any) -> None:
    """Times nothing but the call itself: the machine's noise floor in the same loop."""


@dataclass
class _Timings:
    ours_ns: list[int] = field(default_factory=list)
    theirs_ns: list[int] = field(default_factory=list)
    noop_ns: list[int] = field(default_factory=list)
    background_cpu_s: float = 0.0
    """CPU the process spent outside the measuring thread (our sender thread)."""


def _measure(ours: Any, theirs: Any, steps: list[tuple[Any, Any]], step_s: float) -> _Timings:
    """Timings of both loggers' ``record()`` on the same objects, interleaved; who goes
    first after the pause (and meets the coldest caches) alternates step by step."""
    out = _Timings()
    cpu_all_s, cpu_main_s = time.process_time(), time.thread_time()
    clock = time.perf_counter_ns
    next_step = time.perf_counter()
    for i, (scheduler, iteration) in enumerate(steps):
        first, second = (ours, theirs) if i % 2 == 0 else (theirs, ours)
        t0 = clock()
        first.record(scheduler, iteration, None, 0)
        t1 = clock()
        second.record(scheduler, iteration, None, 0)
        t2 = clock()
        _noop_record(scheduler, iteration, None, 0)
        t3 = clock()
        (out.ours_ns if i % 2 == 0 else out.theirs_ns).append(t1 - t0)
        (out.theirs_ns if i % 2 == 0 else out.ours_ns).append(t2 - t1)
        out.noop_ns.append(t3 - t2)
        next_step += step_s
        delay = next_step - time.perf_counter()
        if delay > 0:
            time.sleep(delay)  # pacing like engine steps, not synchronisation
    out.background_cpu_s = (time.process_time() - cpu_all_s) - (time.thread_time() - cpu_main_s)
    return out


def run_benchmark(*, steps: int, step_ms: float, warmup: int) -> dict[str, Any]:
    """The measurement itself; needs vLLM importable in this interpreter."""
    import vllm
    from vllm.v1.metrics.loggers import PrometheusStatLogger

    from eagle_eye.bus.embedded import EmbeddedNats
    from eagle_eye.publish.publisher import InstanceIdentity, Publisher
    from eagle_eye.publish.vllm_plugin import EagleEyeStatLogger
    from eagle_eye.settings import nats_from_env

    with tempfile.TemporaryDirectory(prefix="eagle-eye-bench-") as tmp:
        vllm_config = tiny_vllm_config(Path(tmp))
    theirs = PrometheusStatLogger(vllm_config, [0])
    objects = [busy_step_stats(i) for i in range(steps + warmup)]

    result: dict[str, Any] = {
        "vllm_version": vllm.__version__,
        "python": sys.version.split()[0],
        "steps": steps,
        "step_ms": step_ms,
        "running": 32,
    }
    with EmbeddedNats() as nats_server:
        settings = nats_from_env({}, url=nats_server.url)
        publisher = Publisher(settings, heartbeat_s=1.0, client_name="eagle-eye-bench")
        try:
            if not publisher.wait_connected(10.0):
                raise click.ClickException("the publisher did not connect to NATS")
            identity = InstanceIdentity(instance_id="bench", model="tiny-llama", engine="vllm")
            ours = EagleEyeStatLogger(vllm_config, 0, identity=identity, publisher=publisher)
            ours.log_engine_initialized()
            phases: dict[str, _Timings] = {}
            for phase in ("back_to_back", "nats_up", "nats_down"):
                pause_s = 0.0 if phase == "back_to_back" else step_ms / 1000
                if phase == "nats_down":
                    nats_server.stop()
                    deadline = time.monotonic() + 10
                    while publisher.connected and time.monotonic() < deadline:
                        time.sleep(0.01)  # waiting for the client to notice, with a deadline
                gc.collect()
                _measure(ours, theirs, objects[:warmup], pause_s)
                phases[phase] = _measure(ours, theirs, objects[warmup:], pause_s)
            stats = publisher.stats
            result["publisher"] = {
                "sent": stats.sent,
                "coalesced": stats.coalesced,
                "dropped": stats.dropped,
                "failed": stats.failed,
                "offer_errors": stats.offer_errors,
                "record_errors": ours.errors,
            }
        finally:
            publisher.close(timeout_s=1.0)

    up, down, warm = phases["nats_up"], phases["nats_down"], phases["back_to_back"]
    up_ours, up_theirs = _summary_us(up.ours_ns), _summary_us(up.theirs_ns)
    down_ours, down_theirs = _summary_us(down.ours_ns), _summary_us(down.theirs_ns)
    # Back to back (warm caches, the sender mostly coalescing): the code path's own cost.
    warm_ours, warm_theirs = _summary_us(warm.ours_ns), _summary_us(warm.theirs_ns)
    result.update(
        back_to_back_record_us_p50=warm_ours["p50"],
        back_to_back_record_us_p99=warm_ours["p99"],
        back_to_back_vllm_prometheus_us_p50=warm_theirs["p50"],
        back_to_back_vllm_prometheus_us_p99=warm_theirs["p99"],
        back_to_back_ratio_p50=round(warm_ours["p50"] / warm_theirs["p50"], 4),
        # An empty call timed in the same paced loop: what the machine adds by itself.
        noise_floor_us_p99=_summary_us(up.noop_ns)["p99"],
        noise_floor_us_max=_summary_us(up.noop_ns)["max"],
    )
    # Not part of record(): what the background sender (snapshot, JSON, socket) costs.
    result["sender_cpu_us_per_step"] = round(up.background_cpu_s / steps * 1e6, 3)
    result["nats_down_sender_cpu_us_per_step"] = round(down.background_cpu_s / steps * 1e6, 3)
    result.update(
        record_us_p50=up_ours["p50"],
        record_us_p90=up_ours["p90"],
        record_us_p99=up_ours["p99"],
        record_us_max=up_ours["max"],
        vllm_prometheus_us_p50=up_theirs["p50"],
        vllm_prometheus_us_p99=up_theirs["p99"],
        ratio_p50=round(up_ours["p50"] / up_theirs["p50"], 4),
        nats_down_record_us_p50=down_ours["p50"],
        nats_down_record_us_p99=down_ours["p99"],
        nats_down_record_us_max=down_ours["max"],
        nats_down_vllm_prometheus_us_p50=down_theirs["p50"],
        nats_down_ratio_p50=round(down_ours["p50"] / down_theirs["p50"], 4),
    )
    result["goals"] = {"ratio_p50_max": RATIO_GOAL, "record_us_p99_max": P99_GOAL_US}
    result["goals_met"] = bool(
        result["ratio_p50"] <= RATIO_GOAL
        and result["nats_down_ratio_p50"] <= RATIO_GOAL
        and result["record_us_p99"] <= P99_GOAL_US
        and result["nats_down_record_us_p99"] <= P99_GOAL_US
    )
    return result


def _reexec(vllm_python: str, argv: list[str]) -> int:
    """Run this module under ``vllm_python`` against this source tree; pass stdout on."""
    package_root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env.setdefault("VLLM_CONFIGURE_LOGGING", "0")  # vLLM logs to stdout: keep it for JSON
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_root), env.get("PYTHONPATH")]))
    done = subprocess.run([vllm_python, "-m", "eagle_eye.bench.publisher", *argv], env=env)
    return done.returncode


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the default).")
@click.option("--steps", type=click.IntRange(min=100), default=5000, show_default=True)
@click.option("--warmup", type=click.IntRange(min=0), default=500, show_default=True)
@click.option(
    "--step-ms",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Pause between calls, like vLLM's step period (0: back to back).",
)
@click.option(
    "--vllm-python",
    envvar="EAGLE_EYE_VLLM_PYTHON",
    help="Python of a venv with vLLM, used when vLLM is not importable here "
    "(default: $EAGLE_EYE_VLLM_PYTHON; scripts/vllm_env.sh builds one).",
)
def publisher(
    as_json: bool, steps: int, warmup: int, step_ms: float, vllm_python: str | None
) -> None:
    """Cost of our record() vs vLLM's PrometheusStatLogger.record(), NATS up and down."""
    if importlib.util.find_spec("vllm") is None:
        if not vllm_python:
            raise click.ClickException(
                "vLLM is not importable here: pass --vllm-python or set "
                "EAGLE_EYE_VLLM_PYTHON (scripts/vllm_env.sh --print-python)"
            )
        argv = ["--steps", str(steps), "--warmup", str(warmup), "--step-ms", str(step_ms)]
        sys.exit(_reexec(vllm_python, argv))
    import logging

    # vLLM logs to stdout unless told not to configure logging; stdout carries the JSON.
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    result = run_benchmark(steps=steps, step_ms=step_ms, warmup=warmup)
    click.echo(json.dumps(result, indent=2 if not as_json else None, sort_keys=True))


if __name__ == "__main__":
    publisher()
