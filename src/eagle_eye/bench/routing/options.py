"""What one ``eagle-eye bench routing`` run is asked to do, read from its flags.

The flags are checked and resolved here, once (defaults filled in, comma lists split,
speed factors padded to the fleet size), into a frozen ``RoutingOptions``, so the code
that runs the rows never sees raw strings. Errors are click's own (``UsageError``,
``BadParameter``) because they are the user's to fix on the command line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from eagle_eye.bench.peers import DEFAULT_PEER_POLICIES
from eagle_eye.bench.routing.workloads import SCENARIOS, fleet_speed_factors

if TYPE_CHECKING:
    from eagle_eye.route.policies import PolicyConfig

DEFAULT_TRACE = "../shared/data/traces/mooncake_conversation.jsonl"
EAGLE_EYE = "eagle-eye"
"""The ``router`` column of our own rows."""


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


def policy_config_from(settings: Sequence[str]) -> PolicyConfig:
    """``PolicyConfig`` with ``KEY=VALUE`` overrides (offline sweeps: ``--set``)."""
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


def default_policy_name() -> str:
    """The router's default policy (imported late: the route package is heavy to load)."""
    from eagle_eye.route.policies import DEFAULT_POLICY

    return DEFAULT_POLICY


def speed_factors_for(value: str | None, engines: int, workload: str | None) -> tuple[float, ...]:
    """Per-engine speed multipliers: ``--speed-factors`` padded with 1.0 (or cut) to
    ``engines``, else the workload's own fleet (heterogeneous scenarios set one)."""
    if value:
        factors = [float(x) for x in value.split(",") if x.strip()]
        return tuple((factors + [1.0] * engines)[:engines])
    return tuple(fleet_speed_factors(SCENARIOS.get(workload or ""), engines))


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingOptions:
    """One ``bench routing`` run; the CLI flags map onto these one to one after
    ``from_flags`` resolved their defaults."""

    trace_path: str | None
    """Mooncake-format JSONL trace; None when ``workload`` is given."""
    workload: str | None
    """A synthetic workload name (``workloads.SCENARIOS``) instead of a trace."""
    engines: int
    """Simulated engines in every row's fleet."""
    load: float
    """Offered load as a fraction of the fleet's estimated capacity."""
    duration_s: float | None
    """Replay only the first S simulated seconds (None: the whole trace)."""
    speedup: float
    """Simulator clock speedup (online rows only)."""
    policies: tuple[str, ...]
    """Our policies, one row each."""
    default_policy: str
    """The router's default policy, recorded in ``results.json``."""
    peers: tuple[tuple[str, str], ...]
    """(peer router, policy) rows; empty offline."""
    offline: bool
    """Virtual-time simulator, no HTTP, no peers."""
    profile: str | None
    """Simulator cost profile (None: the simulator's default)."""
    speed_factors: tuple[float, ...]
    """Per-engine speed multiplier, one per engine."""
    hash_ids_field: str | None
    """Request field that also carries the trace's block ids (online)."""
    settings: tuple[str, ...]
    """``KEY=VALUE`` ``PolicyConfig`` overrides (offline)."""
    seed: int
    out_dir: Path
    """Where results.json, report.md and the plots go."""

    @classmethod
    def from_flags(
        cls,
        *,
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
    ) -> RoutingOptions:
        """Check and resolve the flags, in the order the user reads the errors: trace or
        workload, speed factors, then the peers (online only)."""
        if trace_path and workload:
            raise click.UsageError("give --trace or --workload, not both")
        if not workload and not trace_path:
            trace_path = DEFAULT_TRACE
        factors = speed_factors_for(speed_factors, engines, workload)
        default = default_policy_name()
        policy_list = tuple(
            p.strip() for p in (policies or f"{default},round_robin").split(",") if p.strip()
        )
        return cls(
            trace_path=trace_path,
            workload=workload,
            engines=engines,
            load=load,
            duration_s=duration_s,
            speedup=speedup,
            policies=policy_list,
            default_policy=default,
            peers=() if offline else tuple(parse_peers(peers)),
            offline=offline,
            profile=profile,
            speed_factors=factors,
            hash_ids_field=hash_ids_field,
            settings=settings,
            seed=seed,
            out_dir=Path(out_dir),
        )

    def online_rows(self) -> list[tuple[str, str]]:
        """(router, policy) for every online row: ours first, then the peers."""
        return [(EAGLE_EYE, p) for p in self.policies] + list(self.peers)
