"""The ``eagle-eye`` command. Thin: each subcommand lives next to the code it drives.

Subcommands are imported only when invoked, so ``eagle-eye --help`` and the engine-side
commands work with the tiny engine-side install (no aiohttp, no prometheus_client).
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import click

from eagle_eye import __version__

# name -> ("module", "attribute", "one-line help"); the module defines a click command.
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "up": ("eagle_eye.up", "up", "Run NATS, a simulated fleet and the router in one go."),
    "watch": ("eagle_eye.watch", "watch", "Print the live snapshots of every instance."),
    "router": ("eagle_eye.route.cli", "router", "Run the OpenAI-compatible routing gateway."),
    "sim": ("eagle_eye.sim.cli", "sim", "Run simulated vLLM/SGLang engines on HTTP."),
    "agent": (
        "eagle_eye.publish.agent_cli",
        "agent",
        "Publish snapshots for an engine without the plugin.",
    ),
    "exporter": (
        "eagle_eye.observe.exporter_cli",
        "exporter",
        "Expose NATS snapshots as Prometheus metrics.",
    ),
    "dashboard": (
        "eagle_eye.observe.dashboard_cli",
        "dashboard",
        "Serve the live web dashboard standalone.",
    ),
    "top": ("eagle_eye.observe.top", "top", "Terminal view of the fleet, like htop."),
    "rules": (
        "eagle_eye.observe.rules_cli",
        "rules",
        "Write Prometheus rules and Grafana dashboards.",
    ),
    "k8s": ("eagle_eye.deploy_cli", "k8s", "Kubernetes helpers (the ConfigMap bundle)."),
    "bench": ("eagle_eye.bench.cli", "bench", "Benchmarks; each prints JSON."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use.

    ``commands`` maps a name to ``(module, attribute, short help)``. A subcommand whose
    third-party dependencies are missing still shows in ``--help`` and, when run, says
    which extra to install.
    """

    def __init__(
        self, *args: Any, lazy_commands: dict[str, tuple[str, str, str]], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.lazy_commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = self.lazy_commands.get(cmd_name)
        if entry is None:
            return None
        module_name, attribute, short_help = entry
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            if (exc.name or "").startswith("eagle_eye"):
                raise
            return _unavailable(cmd_name, short_help, exc)
        command: click.Command = getattr(module, attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self.lazy_commands[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _unavailable(name: str, short_help: str, exc: ImportError) -> click.Command:
    def run(**_: Any) -> None:
        raise click.ClickException(
            f"`eagle-eye {name}` needs the service dependencies ({exc.name or exc} is missing): "
            "pip install 'eagle-eye[server]'"
        )

    return click.Command(
        name,
        callback=run,
        help=short_help,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


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
