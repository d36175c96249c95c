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
``total_cpu_us_per_step`` adds the mean ``record()`` to it, and ``total_ratio`` divides
that by vLLM's mean ``record()``: what the plugin costs the API-server process per step,
all told. ``sender_wakeups_per_step`` counts how often the sender thread woke.

vLLM lives in its own virtualenv (``scripts/vllm_env.sh``). When ``vllm`` is not
importable here, the command re-runs itself with ``--vllm-python`` (default
``$EAGLE_EYE_VLLM_PYTHON``), pointing that interpreter at this very source tree.

The interleaved timing loop and the numbers it comes to live in ``publisher_timing.py``;
this module builds the two loggers, runs the phases and is the command.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from eagle_eye.bench.publisher_timing import (
    P99_GOAL_US,
    RATIO_GOAL,
    TOTAL_RATIO_GOAL,
    Timings,
    goals_met,
    measure_interleaved,
    phase_keys,
    total_goal_met,
)
from eagle_eye.bench.tiny_model import ARCHITECTURE, VOCAB_SIZE
from eagle_eye.bus.embedded import EmbeddedNatsError, find_nats_server


def tiny_vllm_config(work_dir: Path) -> Any:
    """A real ``VllmConfig`` for a tiny Llama, from a bare ``config.json`` (no weights)."""
    from transformers import LlamaConfig
    from vllm.engine.arg_utils import EngineArgs

    LlamaConfig(vocab_size=VOCAB_SIZE, **ARCHITECTURE).save_pretrained(work_dir)
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


PHASES = ("back_to_back", "nats_up", "nats_down")
"""Measured in this order: warm loop first, then paced with NATS up, then with it down."""
RUNNING = 32
"""Running requests in every step's stats (``busy_step_stats``'s default)."""


def _wait_disconnected(publisher: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while publisher.connected and time.monotonic() < deadline:
        time.sleep(0.01)  # waiting for the client to notice, with a deadline


def _measure_phases(
    ours: Any,
    theirs: Any,
    objects: list[tuple[Any, Any]],
    *,
    warmup: int,
    step_ms: float,
    nats_server: Any,
    publisher: Any,
) -> dict[str, Timings]:
    """Every phase of ``PHASES``, each after its own warm-up; stops ``nats_server``
    before the ``nats_down`` phase."""
    phases: dict[str, Timings] = {}
    for phase in PHASES:
        pause_s = 0.0 if phase == "back_to_back" else step_ms / 1000
        if phase == "nats_down":
            nats_server.stop()
            _wait_disconnected(publisher)
        gc.collect()
        measure_interleaved(ours, theirs, objects[:warmup], pause_s)
        wakeups = publisher.stats.wakeups
        phases[phase] = measure_interleaved(ours, theirs, objects[warmup:], pause_s)
        phases[phase].sender_wakeups = publisher.stats.wakeups - wakeups
    return phases


def _publisher_counters(publisher: Any, ours: Any) -> dict[str, int]:
    """What the publisher did with the snapshots, and whether ``record()`` ever raised."""
    stats = publisher.stats
    return {
        "sent": stats.sent,
        "coalesced": stats.coalesced,
        "dropped": stats.dropped,
        "failed": stats.failed,
        "offer_errors": stats.offer_errors,
        "wakeups": stats.wakeups,
        "record_errors": ours.errors,
    }


def run_benchmark(*, steps: int, step_ms: float, warmup: int) -> dict[str, Any]:
    """The measurement itself; needs vLLM importable in this interpreter."""
    import vllm
    from vllm.v1.metrics.loggers import PrometheusStatLogger

    from eagle_eye.bus.embedded import EmbeddedNats
    from eagle_eye.publish.channel import InstanceIdentity
    from eagle_eye.publish.publisher import Publisher
    from eagle_eye.publish.vllm_plugin import EngineStatLogger
    from eagle_eye.settings import nats_from_env

    with tempfile.TemporaryDirectory(prefix="eagle-eye-bench-") as tmp:
        vllm_config = tiny_vllm_config(Path(tmp))
    theirs = PrometheusStatLogger(vllm_config, [0])
    objects = [busy_step_stats(i, running=RUNNING) for i in range(steps + warmup)]
    result: dict[str, Any] = {
        "vllm_version": vllm.__version__,
        "python": sys.version.split()[0],
        "steps": steps,
        "step_ms": step_ms,
        "running": RUNNING,
    }
    with EmbeddedNats() as nats_server:
        settings = nats_from_env({}, url=nats_server.url)
        publisher = Publisher(settings, heartbeat_s=1.0, client_name="eagle-eye-bench")
        try:
            if not publisher.wait_connected(10.0):
                raise click.ClickException("the publisher did not connect to NATS")
            identity = InstanceIdentity(instance_id="bench", model="tiny-llama", engine="vllm")
            ours = EngineStatLogger(vllm_config, 0, identity=identity, publisher=publisher)
            ours.log_engine_initialized()
            phases = _measure_phases(
                ours,
                theirs,
                objects,
                warmup=warmup,
                step_ms=step_ms,
                nats_server=nats_server,
                publisher=publisher,
            )
            result["publisher"] = _publisher_counters(publisher, ours)
        finally:
            publisher.close(timeout_s=1.0)
    result.update(phase_keys(phases, steps))
    result["goals"] = {
        "ratio_p50_max": RATIO_GOAL,
        "record_us_p99_max": P99_GOAL_US,
        "total_ratio_max": TOTAL_RATIO_GOAL,
    }
    result["goals_met"] = goals_met(result)
    result["total_goal_met"] = total_goal_met(result)
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class PublisherBenchOptions:
    """The measurement's size, as the CLI flags give it; passed on unchanged when the
    command re-runs itself under vLLM's interpreter."""

    steps: int
    """Measured calls per phase."""
    warmup: int
    """Calls per phase before measuring (not counted)."""
    step_ms: float
    """Pause between calls, like vLLM's step period (0: back to back)."""

    def argv(self) -> list[str]:
        """The same options as command-line flags."""
        return [
            "--steps",
            str(self.steps),
            "--warmup",
            str(self.warmup),
            "--step-ms",
            str(self.step_ms),
        ]


def _require_vllm_python(vllm_python: str | None) -> str:
    if not vllm_python:
        raise click.ClickException(
            "vLLM is not importable here: pass --vllm-python or set "
            "EAGLE_EYE_VLLM_PYTHON (scripts/vllm_env.sh --print-python)"
        )
    return vllm_python


def _keep_stdout_for_json() -> None:
    """vLLM logs to stdout unless told not to configure logging; stdout carries the JSON."""
    import logging

    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


def _reexec(vllm_python: str, argv: list[str]) -> int:
    """Run this module under ``vllm_python`` against this source tree; pass stdout on."""
    package_root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env.setdefault("VLLM_CONFIGURE_LOGGING", "0")  # vLLM logs to stdout: keep it for JSON
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_root), env.get("PYTHONPATH")]))
    # vLLM's venv holds only the engine-side install: lend it this venv's nats-server.
    with contextlib.suppress(EmbeddedNatsError):
        nats_dir = str(Path(find_nats_server()).parent)
        env["PATH"] = os.pathsep.join(filter(None, [nats_dir, env.get("PATH")]))
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
    options = PublisherBenchOptions(steps=steps, warmup=warmup, step_ms=step_ms)
    if importlib.util.find_spec("vllm") is None:
        sys.exit(_reexec(_require_vllm_python(vllm_python), options.argv()))
    _keep_stdout_for_json()
    result = run_benchmark(steps=options.steps, step_ms=options.step_ms, warmup=options.warmup)
    click.echo(json.dumps(result, indent=2 if not as_json else None, sort_keys=True))


if __name__ == "__main__":
    publisher()
