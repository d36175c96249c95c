"""The ``eagle-eye`` command. Thin: each subcommand lives next to the code it drives.

Subcommands are imported only when invoked, so ``eagle-eye --help`` and the engine-side
commands work with the tiny engine-side install (no aiohttp, no prometheus_client).
"""

from __future__ import annotations

import logging

import click

from eagle_eye import __version__
from eagle_eye.lazy_group import LazyGroup

# name -> ("module", "attribute", "one-line help"); the module defines a click command.
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "up": ("eagle_eye.commands.up", "up", "Run NATS, a simulated fleet and the router in one go."),
    "watch": ("eagle_eye.observe.watch", "watch", "Print the live snapshots of every instance."),
    "router": ("eagle_eye.commands.router", "router", "Run the OpenAI-compatible routing gateway."),
    "sim": ("eagle_eye.sim.cli", "sim", "Run simulated vLLM/SGLang engines on HTTP."),
    "agent": (
        "eagle_eye.publish.agent.cli",
        "agent",
        "Publish snapshots for an engine without the plugin.",
    ),
    "exporter": (
        "eagle_eye.observe.exporter.cli",
        "exporter",
        "Expose NATS snapshots as Prometheus metrics.",
    ),
    "dashboard": (
        "eagle_eye.observe.dashboard.cli",
        "dashboard",
        "Serve the live web dashboard standalone.",
    ),
    "top": ("eagle_eye.observe.dashboard.top", "top", "Terminal view of the fleet, like htop."),
    "rules": (
        "eagle_eye.observe.rules_cli",
        "rules",
        "Write Prometheus rules and Grafana dashboards.",
    ),
    "k8s": ("eagle_eye.deploy.cli", "k8s", "Kubernetes helpers (the ConfigMap bundle)."),
    "bench": ("eagle_eye.bench.cli", "bench", "Benchmarks; each prints JSON."),
}


@click.group(
    cls=LazyGroup,
    lazy_commands=_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="eagle-eye")
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    envvar="EAGLE_EYE_LOG_LEVEL",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="Logging verbosity.",
)
def main(log_level: str) -> None:
    """Eagle Eye: per-step LLM engine metrics over NATS, routing on them, and monitoring.

    Start with `eagle-eye up` for a local fleet behind the router.
    """
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
