"""What a ``bench routing`` run leaves in ``--out DIR``: results.json, report.md, plots.

``results.json`` is what ``bench report`` and any later comparison read, so its shape
is fixed here in one place: ``default_policy``, ``rows``, ``config`` (the options, the
command that reproduces the run, and what the requests looked like), ``capacity``,
``goals`` and the plot file names.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eagle_eye.bench.routing import report
from eagle_eye.bench.routing.options import RoutingOptions
from eagle_eye.bench.routing.prepare import PreparedRequests
from eagle_eye.bench.routing.rows import RowRun


def results_document(
    options: RoutingOptions,
    prepared: PreparedRequests,
    runs: Sequence[RowRun],
    *,
    command: str,
) -> dict[str, Any]:
    """The ``results.json`` document (without its plots, drawn later), goals included."""
    results: dict[str, Any] = {
        "default_policy": options.default_policy,
        "rows": [run.row for run in runs],
        "config": {
            "mode": "offline" if options.offline else "online",
            "workload": prepared.info["source"],
            "engines": options.engines,
            "speed_factors": list(options.speed_factors),
            "load": options.load,
            "duration_s": options.duration_s,
            "speedup": None if options.offline else options.speedup,
            "seed": options.seed,
            "policy_overrides": list(options.settings),
            "command": command,
            **prepared.info,
        },
        "capacity": prepared.capacity,
    }
    results["goals"] = report.goal_check(results)
    return results


def write_outputs(out_dir: Path, results: dict[str, Any], runs: Sequence[RowRun]) -> Path:
    """Draw the plots, then write results.json (naming them) and report.md into
    ``out_dir``; return results.json's path. Plots need matplotlib: without it they are
    left out and the rest is still written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    drawn = (
        report.plot_latency_cdfs(
            out_dir / "latency_cdf.png",
            {report.row_label(r.row): r.results for r in runs if r.results},
        ),
        report.plot_engine_load(
            out_dir / "engine_load.png",
            {report.row_label(r.row): r.samples for r in runs if r.samples},
        ),
    )
    plots = [p for p in drawn if p is not None]
    results["plots"] = [p.name for p in plots]
    path = report.write_results(out_dir, results)
    (out_dir / "report.md").write_text(report.render_markdown(results, [str(p) for p in plots]))
    return path
