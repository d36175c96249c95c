"""``eagle-eye bench plugin-ab``: does ``vllm serve`` serve as fast with the plugin as without?

Two real vLLM servers (CPU build, the tiny model, identical flags) run side by side: one
loads Eagle Eye's stat logger and publishes every step to a real nats-server (with a
subscriber draining it), the other has vLLM's plugin allow-list set so the plugin is not
loaded at all. They take turns serving the same burst of streaming completions, in an
order shuffled per repeat (seeded), so drift in the machine's load hits both arms alike;
the server not being measured is paused (SIGSTOP), so only one of them runs at a time.
Each burst reports throughput, TTFT p50 and time per output token (TPOT, the mean
inter-token latency of a request) p50 as the client saw them; the result is
each arm's mean with a 95% interval and, per repeat, the plugin arm's change against the
baseline run next to it (paired), with its own interval.

A run is valid only if every request succeeded and vLLM's own generation counter grew by
exactly the tokens the client received (the load reached the engine as intended); the
client's CPU share is reported so a reader can see the load generator was not the
bottleneck. The command exits 1 on an invalid run.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from eagle_eye.bench.intervals import mean_ci95
from eagle_eye.bench.stream_load import BurstResult, run_burst
from eagle_eye.bench.vllm_server import (
    SERVED_MODEL_NAME,
    VllmServer,
    ensure_tiny_model,
    start_vllm_server,
)
from eagle_eye.bus.embedded import EmbeddedNats
from eagle_eye.fleet.subscriber import FleetSubscriber
from eagle_eye.fleet.view import FleetView
from eagle_eye.settings import NatsSettings
from eagle_eye.snapshot import Snapshot

ARMS = ("plugin", "baseline")
INSTANCE_ID = "ab-plugin"
THROUGHPUT_GOAL = 0.01
"""The plugin may cost at most 1% of throughput: met when the 95% interval of the
paired change lies above -1%."""
ENGINE_CPUS = "0"
"""vLLM's CPU engine computes on core 0 only (its OpenMP threads bound there), leaving
the other core to the API server, where the plugin runs, and to the load generator: like
a GPU server, the engine is the bottleneck, and each burst does the same work on the
same core instead of fighting the API server for both."""
_METRICS = ("throughput_tok_s", "ttft_p50_ms", "tpot_p50_ms")


@dataclass(frozen=True, slots=True, kw_only=True)
class AbOptions:
    repeats: int
    requests: int
    concurrency: int
    max_tokens: int
    seed: int
    vllm_python: str


@dataclass(slots=True)
class Burst:
    arm: str
    result: BurstResult
    engine_tokens: float
    """Generation tokens vLLM counted during the burst."""
    engine_steps: float
    messages: int
    """Snapshots the plugin published during the burst (0 for the baseline)."""
    api_server_cpu_s: float = 0.0
    """CPU the API server process (where the plugin runs) used during the burst."""

    @property
    def api_server_cpu_us_per_step(self) -> float:
        return self.api_server_cpu_s / self.engine_steps * 1e6 if self.engine_steps else 0.0


async def _burst(
    servers: dict[str, VllmServer], arm: str, options: AbOptions, counter: list[int]
) -> Burst:
    """One burst on ``arm``'s server while the other server is paused (SIGSTOP)."""
    server = servers[arm]
    for name, other in servers.items():
        if name != arm:
            other.pause()
    server.resume()
    # A few requests first, not measured: the first steps after a pause are slow.
    await run_burst(
        server.url, SERVED_MODEL_NAME, requests=2, concurrency=2, max_tokens=8, tag="settle"
    )
    before = await asyncio.to_thread(server.metrics)
    cpu_before_s = server.api_server_cpu_s()
    sent_before = counter[0]
    result = await run_burst(
        server.url,
        SERVED_MODEL_NAME,
        requests=options.requests,
        concurrency=options.concurrency,
        max_tokens=options.max_tokens,
        tag=arm,
    )
    cpu_s = server.api_server_cpu_s() - cpu_before_s
    after = await asyncio.to_thread(server.metrics)

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    return Burst(
        arm=arm,
        result=result,
        engine_tokens=delta("vllm:generation_tokens_total"),
        engine_steps=delta("vllm:iteration_tokens_total_count"),
        messages=counter[0] - sent_before if arm == "plugin" else 0,
        api_server_cpu_s=cpu_s,
    )


async def _measure(
    servers: dict[str, VllmServer], nats_url: str, options: AbOptions
) -> list[Burst]:
    """Warm each server up, then ``repeats`` rounds of one burst per arm, order shuffled."""
    counter = [0]

    def count(snapshot: Snapshot) -> None:
        if snapshot.instance_id == INSTANCE_ID:
            counter[0] += 1

    subscriber = FleetSubscriber(
        NatsSettings(servers=(nats_url,)), FleetView(), client_name="bench-plugin-ab"
    )
    subscriber.listeners.append(count)
    await subscriber.start(wait_s=10.0)
    rng = random.Random(options.seed)
    bursts: list[Burst] = []
    try:
        for arm in ARMS:
            await _burst(servers, arm, options, counter)  # warm-up, not counted
        for _ in range(options.repeats):
            order = list(ARMS)
            rng.shuffle(order)
            for arm in order:
                bursts.append(await _burst(servers, arm, options, counter))
    finally:
        await subscriber.close()
    return bursts


def _arm_summary(bursts: list[Burst]) -> dict[str, Any]:
    return {
        metric: mean_ci95([getattr(b.result, metric) for b in bursts]).as_dict()
        for metric in _METRICS
    }


def _change(pairs: list[tuple[Burst, Burst]], metric: str) -> dict[str, float | int]:
    """The plugin arm's relative change against the baseline burst of the same repeat:
    the mean of log ratios with its interval, back as fractions (``-0.01`` is 1% lower).
    Log ratios weigh a halving and a doubling alike and keep one odd burst from
    dominating the mean, as plain ratios would."""
    logs = [
        math.log(getattr(p.result, metric) / getattr(b.result, metric))
        for p, b in pairs
        if getattr(p.result, metric) > 0 and getattr(b.result, metric) > 0
    ]
    interval = mean_ci95(logs)
    return {
        "mean": round(math.exp(interval.mean) - 1.0, 4),
        "ci95_low": round(math.exp(interval.low) - 1.0, 4),
        "ci95_high": round(math.exp(interval.high) - 1.0, 4),
        "n": interval.n,
    }


def summarize(bursts: list[Burst]) -> dict[str, Any]:
    """The JSON report from the bursts (pure): per-arm intervals, paired changes, validity."""
    by_arm = {arm: [b for b in bursts if b.arm == arm] for arm in ARMS}
    pairs = list(zip(by_arm["plugin"], by_arm["baseline"], strict=True))
    paired = {f"{metric}_change": _change(pairs, metric) for metric in _METRICS}
    change = paired["throughput_tok_s_change"]
    plugin_steps = sum(b.engine_steps for b in by_arm["plugin"])
    valid = all(b.result.errors == 0 and b.engine_tokens == b.result.output_tokens for b in bursts)
    return {
        "bursts": [
            {"arm": b.arm, **{m: round(getattr(b.result, m), 3) for m in _METRICS}} for b in bursts
        ],
        "arms": {arm: _arm_summary(arm_bursts) for arm, arm_bursts in by_arm.items()},
        "paired": paired,
        # Where the cost goes: CPU of the process the plugin runs in, per engine step.
        "api_server_cpu_us_per_step": {
            arm: mean_ci95([b.api_server_cpu_us_per_step for b in arm_bursts]).as_dict()
            for arm, arm_bursts in by_arm.items()
        },
        "api_server_cpu_us_per_step_added": mean_ci95(
            [p.api_server_cpu_us_per_step - b.api_server_cpu_us_per_step for p, b in pairs]
        ).as_dict(),
        "plugin_messages_per_step": round(
            sum(b.messages for b in by_arm["plugin"]) / plugin_steps, 3
        )
        if plugin_steps
        else None,
        "validity": {
            "valid": valid,
            "errors": sum(b.result.errors for b in bursts),
            "error_kinds": sorted({kind for b in bursts for kind in b.result.error_kinds}),
            "client_tokens_equal_engine_tokens": all(
                b.engine_tokens == b.result.output_tokens for b in bursts
            ),
            "client_cpu_share_max": round(
                max(b.result.client_cpu_s / b.result.wall_s for b in bursts), 3
            ),
        },
        "goal": {"throughput_loss_max": THROUGHPUT_GOAL},
        # Met only when the interval shows it: 95% sure the plugin costs under 1%.
        "goal_met": bool(valid and change["ci95_low"] > -THROUGHPUT_GOAL),
    }


def run_ab(options: AbOptions, *, max_num_seqs: int) -> dict[str, Any]:
    """Start both servers, measure, stop them; the report."""
    model_dir = ensure_tiny_model(options.vllm_python)
    args = ["--max-num-seqs", str(max_num_seqs)]
    with tempfile.TemporaryDirectory(prefix="eagle-eye-ab-") as tmp, EmbeddedNats() as nats:
        engine_env = {"VLLM_CPU_OMP_THREADS_BIND": ENGINE_CPUS}
        env = {
            **engine_env,
            "EAGLE_EYE_NATS_URL": nats.url,
            "EAGLE_EYE_INSTANCE_ID": INSTANCE_ID,
            "EAGLE_EYE_ENDPOINT": "http://127.0.0.1:8000",
        }
        servers: dict[str, VllmServer] = {}
        try:
            servers["plugin"] = start_vllm_server(
                options.vllm_python, model_dir, Path(tmp), name="plugin", env=env, extra_args=args
            )
            servers["baseline"] = start_vllm_server(
                options.vllm_python, model_dir, Path(tmp), name="baseline", plugins=False,
                env=engine_env, extra_args=args,
            )  # fmt: skip
            bursts = asyncio.run(_measure(servers, nats.url, options))
            if any(b.result.errors for b in bursts):
                for name, server in servers.items():
                    print(
                        f"--- {name} server log (tail)\n{server.log_text()[-3000:]}",
                        file=sys.stderr,
                    )
        finally:
            for server in servers.values():
                server.stop()
    report = summarize(bursts)
    report.update(
        repeats=options.repeats,
        requests=options.requests,
        concurrency=options.concurrency,
        max_tokens=options.max_tokens,
        max_num_seqs=max_num_seqs,
        seed=options.seed,
        load_avg_1m=round(os.getloadavg()[0], 2),
        order="per repeat, both arms in a seeded random order",
    )
    return report


@click.command("plugin-ab")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the default).")
@click.option("--repeats", type=click.IntRange(min=2), default=12, show_default=True)
@click.option(
    "--concurrency", type=click.IntRange(min=1), default=16, show_default=True,
    help="Streaming requests per burst (also vLLM's --max-num-seqs).",
)  # fmt: skip
@click.option(
    "--requests", type=click.IntRange(min=1), default=64, show_default=True,
    help="Requests per burst (a few seconds of work, so one burst is not noise).",
)  # fmt: skip
@click.option(
    "--max-tokens", type=click.IntRange(min=2, max=200), default=200, show_default=True,
    help="Tokens per request (the tiny model's context is 256).",
)  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--vllm-python",
    envvar="EAGLE_EYE_VLLM_PYTHON",
    required=True,
    help="Python of a venv with vLLM (scripts/vllm_env.sh --print-python).",
)
def plugin_ab(
    as_json: bool,
    repeats: int,
    requests: int,
    concurrency: int,
    max_tokens: int,
    seed: int,
    vllm_python: str,
) -> None:
    """vLLM with the plugin publishing vs without it: throughput, TTFT, TPOT (A/B)."""
    options = AbOptions(
        repeats=repeats,
        requests=requests,
        concurrency=concurrency,
        max_tokens=max_tokens,
        seed=seed,
        vllm_python=vllm_python,
    )
    report = run_ab(options, max_num_seqs=concurrency)
    click.echo(json.dumps(report, indent=None if as_json else 2, sort_keys=True))
    if not report["validity"]["valid"]:
        click.echo("plugin-ab: invalid run (errors or lost tokens); see validity", err=True)
        sys.exit(1)
