"""Running the rows of a ``bench routing`` table, one (router, policy) at a time.

Online rows go through real processes (``online.py``: a fresh simulated fleet, NATS and
the router per row); offline rows run our policies against the simulator in virtual time
(``offline.py``). Either way a row keeps its raw results and load samples next to its
summary, because the plots are drawn from them. An online row that fails is reported as
a row of errors with a note, so one broken peer does not lose the others.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from eagle_eye.bench.routing import report
from eagle_eye.bench.routing.metrics import LoadSample, RequestResult, error_kinds, summarize
from eagle_eye.bench.routing.options import EAGLE_EYE
from eagle_eye.bench.routing.trace import TraceRequest

if TYPE_CHECKING:
    from eagle_eye.bench.routing.online import FleetSpec
    from eagle_eye.route.policies import PolicyConfig

PROGRESS_EVERY_S = 10.0
"""Seconds between progress lines of a long online row (the last one always prints)."""


@dataclass(frozen=True, slots=True)
class RowRun:
    """One row of the results table and the raw data its plots are drawn from."""

    row: dict[str, Any]
    """``report.metric_row`` plus the row's extras (wall time, notes, error kinds)."""
    results: list[RequestResult]
    """One per replayed request; empty when the row failed."""
    samples: list[LoadSample]
    """Per-engine load over time; empty when the row failed."""


def summary_row(
    router: str,
    policy: str,
    results: Sequence[RequestResult],
    samples: Sequence[LoadSample],
    **extra: Any,
) -> dict[str, Any]:
    """The row's metrics, with the kinds of errors seen when there were any."""
    summary = summarize(results, samples)
    kinds = error_kinds(results)
    if kinds:
        extra["error_kinds"] = kinds
    return report.metric_row(router, policy, summary, **extra)


def _progress(label: str) -> Callable[[int, int], None]:
    state = {"last": 0.0}

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - state["last"] > PROGRESS_EVERY_S:
            state["last"] = now
            click.echo(f"  {label}: {done}/{total} requests done", err=True)

    return progress


def _failed_row(router: str, policy: str, requests: int, exc: Exception) -> RowRun:
    """A row that did not run: every request counted as an error, the reason as a note."""
    row = report.metric_row(
        router,
        policy,
        {"errors": requests, "requests": requests},
        note=f"run failed: {str(exc)[:300]}",
    )
    return RowRun(row, [], [])


def _round_or_none(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


async def run_online_rows(
    rows: Sequence[tuple[str, str]],
    requests: Sequence[TraceRequest],
    spec: FleetSpec,
    hash_ids_field: str | None,
) -> list[RowRun]:
    """Each (router, policy) in turn in front of a fresh fleet built from ``spec``."""
    from eagle_eye.bench.routing.online import run_online

    out: list[RowRun] = []
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
            out.append(_failed_row(router, policy, len(requests), exc))
            continue
        ok = [r.e2e_s for r in run.results if r.e2e_s is not None]
        row = summary_row(
            router,
            policy,
            run.results,
            run.samples,
            wall_s=round(time.monotonic() - started, 1),
            client_e2e_mean_s=_round_or_none(sum(ok) / len(ok) if ok else None),
            engine_e2e_mean_s=_round_or_none(run.engine_e2e_mean_s),
            load_average=[round(x, 2) for x in os.getloadavg()],
        )
        out.append(RowRun(row, run.results, run.samples))
    return out


def run_offline_rows(
    policies: Sequence[str],
    requests: Sequence[TraceRequest],
    *,
    engines: int,
    speed_factors: Sequence[float],
    profile: str | None,
    seed: int,
    policy_config: PolicyConfig | None = None,
) -> list[RowRun]:
    """Each of our policies in turn against the virtual-time simulator."""
    from eagle_eye.bench.routing.offline import run_offline

    out: list[RowRun] = []
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
        row = summary_row(
            EAGLE_EYE, policy, run.results, run.samples, wall_s=round(time.monotonic() - started, 2)
        )
        click.echo(
            f"offline {policy}: ttft_p99_s={row['ttft_p99_s']} ({row['wall_s']} s wall)", err=True
        )
        out.append(RowRun(row, run.results, run.samples))
    return out
