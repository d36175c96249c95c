"""A click group whose subcommands are imported on first use.

``eagle-eye --help`` and the engine-side commands must work with the tiny engine-side
install (no aiohttp, no prometheus_client), and start fast; so the top-level command
and ``eagle-eye bench`` name their subcommands by module path and import them only when
run. It sits at the bottom of the package (it imports nothing of ours) so any command
group can use it.
"""

from __future__ import annotations

import importlib
from typing import Any

import click


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
