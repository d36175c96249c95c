"""``eagle-eye bench ...``: every benchmark prints one JSON object on stdout."""

from __future__ import annotations

import click

from eagle_eye.lazy_group import LazyGroup

_BENCHMARKS: dict[str, tuple[str, str, str]] = {
    "publisher": (
        "eagle_eye.bench.publisher",
        "publisher",
        "Cost of record() vs vLLM's Prometheus logger.",
    ),
    "plugin-ab": (
        "eagle_eye.bench.plugin_ab",
        "plugin_ab",
        "Real vLLM with the plugin publishing vs without it (A/B).",
    ),
    "sim": ("eagle_eye.bench.sim", "sim", "Simulator steps/s per core and offline replay speed."),
    "router": (
        "eagle_eye.bench.router",
        "router",
        "Router overhead and max rate vs LiteLLM and the Rust routers.",
    ),
    "agent": ("eagle_eye.bench.agent", "agent", "Agent /metrics parse cost vs prometheus_client."),
    "routing": (
        "eagle_eye.bench.routing.cli",
        "routing",
        "Routing quality on a trace vs round-robin and peer routers.",
    ),
    "freshness": (
        "eagle_eye.bench.freshness",
        "freshness",
        "Publish-to-router latency and fleet-view capacity.",
    ),
    "report": (
        "eagle_eye.bench.report",
        "report",
        "Run every benchmark; write docs/BENCHMARKS.md.",
    ),
}


@click.group(cls=LazyGroup, lazy_commands=_BENCHMARKS)
def bench() -> None:
    """Benchmarks. Each compares against a named peer in the same run and prints JSON."""
