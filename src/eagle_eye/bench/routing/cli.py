"""``eagle-eye bench routing``: routing quality on a trace, ours vs round-robin vs the peers.

One run replays the same requests (a Mooncake-format trace, or a synthetic workload from
``bench/workloads.py``) once per row: each of our policies (``--policies``), then each peer
router with its best policies (``--peers``), every row in front of a fresh, identical
simulated fleet. ``--offline`` runs our policies against the simulator's virtual-time mode
instead (no HTTP, no peers), for sweeps.

Load: ``--load F`` rescales the arrival rate to F x the fleet's estimated capacity on
these requests (``bench/routing/capacity.py`` says how it is estimated), then
``--duration`` keeps the first S simulated seconds.

Output in ``--out DIR``: ``results.json`` (``{"default_policy", "rows": [...]}`` plus the
configuration and capacity estimate), ``report.md``, ``latency_cdf.png`` and
``engine_load.png``.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from eagle_eye.bench.peers import DEFAULT_PEER_POLICIES
from eagle_eye.bench.routing import report
from eagle_eye.bench.routing.capacity import estimate_capacity
from eagle_eye.bench.routing.metrics import LoadSample, RequestResult, error_kinds, summarize
from eagle_eye.bench.routing.trace import (
    TraceRequest,
    arrival_rate_rps,
    cap_duration,
    load_trace,
    scale_rate,
    span_s,
    trace_stats,
)
from eagle_eye.bench.routing.workloads import SCENARIOS, build_workload, fleet_speed_factors

DEFAULT_TRACE = "../shared/data/traces/mooncake_conversation.jsonl"
EAGLE_EYE = "eagle-eye"


def parse_peers(value: str) -> list[tuple[str, str]]:
    """``"sglang-router,vllm-router:power_of_two"`` -> (peer, policy) rows; a bare peer
    name expands to its default policies (``peers.DEFAULT_PEER_POLICIES``)."""
    rows: list[tuple[str, str]] = []
    for item in (x.strip() for x in value.split(",")):
        if not item or item == "none":
            continue
        name, _, policy = item.partition(":")
        if name not in DEFAULT_PEER_POLICIES:
            raise click.BadParameter(
                f"unknown peer {name!r}; known: {', '.join(DEFAULT_PEER_POLICIES)}"
            )
        rows.extend((name, p) for p in ([policy] if policy else DEFAULT_PEER_POLICIES[name]))
    return rows


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def default_policy_name() -> str:
    from eagle_eye.route.policies import DEFAULT_POLICY

    return DEFAULT_POLICY


def prepare_requests(
    *,
    trace: str | None,
    workload: str | None,
    engines: int,
    speed_factors: Sequence[float],
    profile_name: str | None,
    load: float,
    duration_s: float | None,
    seed: int,
) -> tuple[list[TraceRequest], dict[str, Any], dict[str, Any]]:
    """Load or generate the requests and scale them to ``load`` x capacity."""
    from eagle_eye.sim.cost_model import DEFAULT_PROFILE, get_profile

    if workload is not None:
        # Generate twice the span needed at nominal rate; the cap below trims it.
        base = build_workload(workload, duration_s=max(600.0, 2 * (duration_s or 600.0)), seed=seed)
        source = f"workload:{workload}"
    else:
        assert trace is not None
        base = load_trace(trace)
        source = trace
    profile = get_profile(profile_name or DEFAULT_PROFILE)
    rate = arrival_rate_rps(base)
    capacity = estimate_capacity(base, profile, speed_factors, load=load, trace_rate_rps=rate)
    requests = cap_duration(scale_rate(base, capacity.rate_factor), duration_s)
    if not requests:
        raise click.ClickException("no requests left after --duration")
    stats = trace_stats(requests)
    info = {
        "source": source,
        "requests": len(requests),
        "span_s": round(span_s(requests), 3),
        "mean_input_tokens": round(stats.mean_input_tokens, 1),
        "mean_output_tokens": round(stats.mean_output_tokens, 1),
        "block_reuse": round(stats.block_reuse, 4),
        "profile": profile.name,
    }
    return requests, capacity.to_dict(), info


def _row(
    router: str,
    policy: str,
    results: Sequence[RequestResult],
    samples: Sequence[LoadSample],
    **extra: Any,
) -> dict[str, Any]:
    summary = summarize(results, samples)
    kinds = error_kinds(results)
    if kinds:
        extra["error_kinds"] = kinds
    return report.metric_row(router, policy, summary, **extra)


def _progress(label: str) -> Any:
    state = {"last": 0.0}

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - state["last"] > 10:
            state["last"] = now
            click.echo(f"  {label}: {done}/{total} requests done", err=True)

    return progress


async def _run_online_rows(
    rows: Sequence[tuple[str, str]],
    requests: Sequence[TraceRequest],
    spec: Any,
    hash_ids_field: str | None,
) -> list[tuple[dict[str, Any], list[RequestResult], list[LoadSample]]]:
    from eagle_eye.bench.routing.online import run_online

    out: list[tuple[dict[str, Any], list[RequestResult], list[LoadSample]]] = []
    for router, policy in rows:
        label = f"{router}:{policy}"
        click.echo(f"online {label} ({len(requests)} requests)...", err=True)
        started = time.monotonic()
        try:
            run = await run_online(
                router,
                policy,
                requests,
                spec,
                hash_ids_field=hash_ids_field,
                progress=_progress(label),
            )
        except Exception as exc:  # noqa: BLE001 - one broken row must not lose the others
            click.echo(f"  {label} failed: {exc}", err=True)
            out.append(
                (
                    report.metric_row(
                        router,
                        policy,
                        {"errors": len(requests), "requests": len(requests)},
                        note=f"run failed: {str(exc)[:300]}",
                    ),
                    [],
                    [],
                )
            )
            continue
        ok = [r.e2e_s for r in run.results if r.e2e_s is not None]
        client_e2e = sum(ok) / len(ok) if ok else None
        engine_e2e = run.engine_e2e_mean_s
        row = _row(
            router,
            policy,
            run.results,
            run.samples,
            wall_s=round(time.monotonic() - started, 1),
            client_e2e_mean_s=None if client_e2e is None else round(client_e2e, 4),
            engine_e2e_mean_s=None if engine_e2e is None else round(engine_e2e, 4),
            load_average=[round(x, 2) for x in os.getloadavg()],
        )
        out.append((row, run.results, run.samples))
    return out


def policy_config_from(settings: Sequence[str]) -> Any:
    """``PolicyConfig`` with ``KEY=VALUE`` overrides (offline sweeps: ``--set``)."""
    import dataclasses

    from eagle_eye.route.policies import PolicyConfig

    fields = {f.name for f in dataclasses.fields(PolicyConfig)}
    defaults = PolicyConfig()
    changes: dict[str, Any] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or key not in fields:
            raise click.BadParameter(
                f"{item!r}: use KEY=VALUE, KEY one of {', '.join(sorted(fields))}"
            )
        kind = type(getattr(defaults, key))
        try:
            changes[key] = kind(value)
        except ValueError:
            raise click.BadParameter(f"{item!r}: {key} takes a {kind.__name__}") from None
    return PolicyConfig(**changes)


def _run_offline_rows(
    policies: Sequence[str],
    requests: Sequence[TraceRequest],
    engines: int,
    speed_factors: Sequence[float],
    profile: str | None,
    seed: int,
    policy_config: Any = None,
) -> list[tuple[dict[str, Any], list[RequestResult], list[LoadSample]]]:
    from eagle_eye.bench.routing.offline import run_offline

    out = []
    for policy in policies:
        started = time.monotonic()
        run = run_offline(
            policy,
            requests,
            engines=engines,
            speed_factors=speed_factors,
            profile=profile,
            seed=seed,
            policy_config=policy_config,
        )
        row = _row(
            EAGLE_EYE, policy, run.results, run.samples, wall_s=round(time.monotonic() - started, 2)
        )
        click.echo(
            f"offline {policy}: ttft_p99_s={row['ttft_p99_s']} ({row['wall_s']} s wall)", err=True
        )
        out.append((row, run.results, run.samples))
    return out


@click.command("routing")
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    default=None,
    help=f"Mooncake-format JSONL trace (default: {DEFAULT_TRACE} when no --workload).",
)
@click.option(
    "--workload",
    type=click.Choice(sorted(SCENARIOS)),
    default=None,
    help="A synthetic workload instead of a trace.",
)
@click.option("--engines", default=8, show_default=True, help="Simulated engines.")
@click.option(
    "--load",
    default=0.85,
    show_default=True,
    help="Offered load as a fraction of estimated capacity.",
)
@click.option(
    "--duration",
    "duration_s",
    type=float,
    default=None,
    help="Replay only the first S simulated seconds.",
)
@click.option(
    "--speedup", default=10.0, show_default=True, help="Simulator clock speedup (online)."
)
@click.option(
    "--policies",
    default=None,
    help="Our policies, comma-separated (default: the default policy and round_robin).",
)
@click.option(
    "--peers",
    default="sglang-router,vllm-router",
    show_default=True,
    help="Peer routers (name or name:policy), comma-separated; 'none' for none. Online only.",
)
@click.option("--offline", is_flag=True, help="Virtual-time simulator, no HTTP, no peers.")
@click.option("--profile", default=None, help="Simulator cost profile (default: the simulator's).")
@click.option("--speed-factors", default=None, help="Per-engine speed multipliers, e.g. 0.5,1,1,1.")
@click.option(
    "--hash-ids-field", default=None, help="Send the trace's block ids in this request field too."
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    help="Offline only: override a PolicyConfig field, e.g. --set prefill_weight=2 (repeatable).",
)
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False), required=True, help="Output directory."
)
def routing(
    trace_path: str | None,
    workload: str | None,
    engines: int,
    load: float,
    duration_s: float | None,
    speedup: float,
    policies: str | None,
    peers: str,
    offline: bool,
    profile: str | None,
    speed_factors: str | None,
    hash_ids_field: str | None,
    settings: tuple[str, ...],
    seed: int,
    out_dir: str,
) -> None:
    """Replay a trace through our router and the peers in front of identical simulated fleets."""
    if trace_path and workload:
        raise click.UsageError("give --trace or --workload, not both")
    if not workload and not trace_path:
        trace_path = DEFAULT_TRACE
    if speed_factors:
        factors = [float(x) for x in speed_factors.split(",") if x.strip()]
        factors = (factors + [1.0] * engines)[:engines]
    else:
        factors = fleet_speed_factors(SCENARIOS.get(workload or ""), engines)
    default = default_policy_name()
    policy_list = [
        p.strip() for p in (policies or f"{default},round_robin").split(",") if p.strip()
    ]
    peer_rows = [] if offline else parse_peers(peers)
    requests, capacity, info = prepare_requests(
        trace=trace_path,
        workload=workload,
        engines=engines,
        speed_factors=factors,
        profile_name=profile,
        load=load,
        duration_s=duration_s,
        seed=seed,
    )
    click.echo(
        f"{info['requests']} requests over {info['span_s']} simulated s "
        f"(capacity {capacity['capacity_rps']:.2f} req/s, rate x{capacity['rate_factor']:.3f})",
        err=True,
    )
    if offline:
        config = policy_config_from(settings) if settings else None
        runs = _run_offline_rows(policy_list, requests, engines, factors, profile, seed, config)
    else:
        from eagle_eye.bench.routing.online import FleetSpec

        spec = FleetSpec(
            engines=engines,
            speedup=speedup,
            speed_factors=tuple(factors),
            profile=profile,
            seed=seed,
        )
        rows = [(EAGLE_EYE, p) for p in policy_list] + peer_rows
        # TERM must unwind like Ctrl-C so every child (fleet, routers, NATS) is stopped.
        signal.signal(signal.SIGTERM, _terminate)
        runs = asyncio.run(_run_online_rows(rows, requests, spec, hash_ids_field))
    results: dict[str, Any] = {
        "default_policy": default,
        "rows": [r for r, _, _ in runs],
        "config": {
            "mode": "offline" if offline else "online",
            "workload": info["source"],
            "engines": engines,
            "speed_factors": factors,
            "load": load,
            "duration_s": duration_s,
            "speedup": None if offline else speedup,
            "seed": seed,
            "policy_overrides": list(settings),
            "command": "eagle-eye bench routing " + shlex.join(_routing_args(sys.argv)),
            **info,
        },
        "capacity": capacity,
    }
    results["goals"] = report.goal_check(results)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = [
        p
        for p in (
            report.plot_latency_cdfs(
                out / "latency_cdf.png", {report.row_label(r): res for r, res, _ in runs if res}
            ),
            report.plot_engine_load(
                out / "engine_load.png", {report.row_label(r): s for r, _, s in runs if s}
            ),
        )
        if p is not None
    ]
    results["plots"] = [p.name for p in plots]
    report.write_results(out, results)
    (out / "report.md").write_text(report.render_markdown(results, [str(p) for p in plots]))
    click.echo(report.markdown_table(results["rows"]), err=True)
    click.echo(str(out / "results.json"))


def _routing_args(argv: list[str]) -> list[str]:
    """The options after ``bench routing`` (global options such as ``--log-level`` and
    the program name left out), to print the command that reproduces a result."""
    for i in range(len(argv) - 1):
        if argv[i] == "bench" and argv[i + 1] == "routing":
            return argv[i + 2 :]
    return argv[1:]
