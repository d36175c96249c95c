"""``eagle-eye bench routing``: routing quality on a trace, ours vs round-robin vs the peers.

One run replays the same requests (a Mooncake-format trace, or a synthetic workload from
``workloads.py``) once per row: each of our policies (``--policies``), then each peer
router with its best policies (``--peers``), every row in front of a fresh, identical
simulated fleet. ``--offline`` runs our policies against the simulator's virtual-time mode
instead (no HTTP, no peers), for sweeps.

Load: ``--load F`` rescales the arrival rate to F x the fleet's estimated capacity on
these requests (``bench/routing/capacity.py`` says how it is estimated), then
``--duration`` keeps the first S simulated seconds.

Output in ``--out DIR``: ``results.json`` (``{"default_policy", "rows": [...]}`` plus the
configuration and capacity estimate), ``report.md``, ``latency_cdf.png`` and
``engine_load.png``.

This module is the command: ``options.py`` reads the flags, ``prepare.py`` builds the
requests, ``rows.py`` runs the rows and ``results.py`` writes the output.
"""

from __future__ import annotations

import asyncio
import shlex
import signal
import sys

import click

from eagle_eye.bench.routing.options import DEFAULT_TRACE, RoutingOptions, policy_config_from
from eagle_eye.bench.routing.prepare import PreparedRequests, prepare_requests
from eagle_eye.bench.routing.report import markdown_table
from eagle_eye.bench.routing.results import results_document, write_outputs
from eagle_eye.bench.routing.rows import RowRun, run_offline_rows, run_online_rows
from eagle_eye.bench.routing.workloads import SCENARIOS


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM handler: unwind like Ctrl-C so every child process is stopped."""
    raise KeyboardInterrupt


def _routing_args(argv: list[str]) -> list[str]:
    """The options after ``bench routing`` (global options such as ``--log-level`` and
    the program name left out), to print the command that reproduces a result."""
    for i in range(len(argv) - 1):
        if argv[i] == "bench" and argv[i + 1] == "routing":
            return argv[i + 2 :]
    return argv[1:]


def _run_rows(options: RoutingOptions, prepared: PreparedRequests) -> list[RowRun]:
    """Every row: offline in virtual time, or online through real processes."""
    if options.offline:
        config = policy_config_from(options.settings) if options.settings else None
        return run_offline_rows(
            options.policies,
            prepared.requests,
            engines=options.engines,
            speed_factors=options.speed_factors,
            profile=options.profile,
            seed=options.seed,
            policy_config=config,
        )
    from eagle_eye.bench.routing.online import FleetSpec

    spec = FleetSpec(
        engines=options.engines,
        speedup=options.speedup,
        speed_factors=options.speed_factors,
        profile=options.profile,
        seed=options.seed,
    )
    # TERM must unwind like Ctrl-C so every child (fleet, routers, NATS) is stopped.
    signal.signal(signal.SIGTERM, _terminate)
    return asyncio.run(
        run_online_rows(options.online_rows(), prepared.requests, spec, options.hash_ids_field)
    )


def run_routing(options: RoutingOptions) -> None:
    """Prepare the requests, run every row, write ``options.out_dir``; print the table
    (stderr) and the path of results.json (stdout)."""
    prepared = prepare_requests(
        trace=options.trace_path,
        workload=options.workload,
        engines=options.engines,
        speed_factors=options.speed_factors,
        profile_name=options.profile,
        load=options.load,
        duration_s=options.duration_s,
        seed=options.seed,
    )
    info, capacity = prepared.info, prepared.capacity
    click.echo(
        f"{info['requests']} requests over {info['span_s']} simulated s "
        f"(capacity {capacity['capacity_rps']:.2f} req/s, rate x{capacity['rate_factor']:.3f})",
        err=True,
    )
    runs = _run_rows(options, prepared)
    command = "eagle-eye bench routing " + shlex.join(_routing_args(sys.argv))
    results = results_document(options, prepared, runs, command=command)
    path = write_outputs(options.out_dir, results, runs)
    click.echo(markdown_table(results["rows"]), err=True)
    click.echo(str(path))


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
    options = RoutingOptions.from_flags(
        trace_path=trace_path,
        workload=workload,
        engines=engines,
        load=load,
        duration_s=duration_s,
        speedup=speedup,
        policies=policies,
        peers=peers,
        offline=offline,
        profile=profile,
        speed_factors=speed_factors,
        hash_ids_field=hash_ids_field,
        settings=settings,
        seed=seed,
        out_dir=out_dir,
    )
    run_routing(options)
