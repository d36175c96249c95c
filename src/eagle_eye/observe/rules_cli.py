"""``eagle-eye rules``: write (or check) the generated observability pack.

Writes the Prometheus rule files and their promtool tests (deploy/prometheus), the Grafana
dashboards (deploy/grafana) and the kube-prometheus-stack objects (deploy/k8s/monitoring)
under ``--out``. ``--check`` writes nothing and fails if any file differs, for CI.
"""

from __future__ import annotations

from pathlib import Path

import click

from eagle_eye.observe.pack.k8s import DEFAULT_RELEASE
from eagle_eye.observe.pack.render import render_all, write_all


@click.command("rules")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Repository root to write deploy/... under.",
)
@click.option(
    "--release",
    default=DEFAULT_RELEASE,
    show_default=True,
    help="kube-prometheus-stack Helm release name (the `release` label its Prometheus selects).",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file is out of date.")
def rules(out: Path, release: str, check: bool) -> None:
    """Write Prometheus rules, promtool tests, Grafana dashboards and monitoring objects."""
    files = render_all(release)
    if check:
        stale = [rel for rel, text in files.items() if _read(out / rel) != text]
        for rel in stale:
            click.echo(f"out of date: {rel}", err=True)
        if stale:
            raise click.exceptions.Exit(1)
        click.echo(f"{len(files)} generated files are up to date")
        return
    changed = write_all(out, files)
    for path in changed:
        click.echo(f"wrote {path}")
    click.echo(f"{len(files)} files, {len(changed)} changed")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
