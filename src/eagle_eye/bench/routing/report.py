"""Write what one ``bench routing`` run measured: results.json, report.md and PNG plots.

``render_markdown`` is pure (results dict in, Markdown out) so it is unit-tested; the
plots use matplotlib's Agg backend (no display) and are optional: without matplotlib the
run still writes its JSON and Markdown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eagle_eye.bench.routing.metrics import METRIC_KEYS, LoadSample, RequestResult, load_grid

_COLUMNS = (
    ("router", "router"),
    ("policy", "policy"),
    ("ttft_p50_s", "TTFT p50 (s)"),
    ("ttft_p99_s", "TTFT p99 (s)"),
    ("itl_p99_s", "ITL p99 (s)"),
    ("e2e_p99_s", "E2E p99 (s)"),
    ("throughput_rps", "req/s"),
    ("output_tokens_per_s", "out tok/s"),
    ("prefix_hit_rate", "prefix hit"),
    ("load_cov", "load CoV"),
    ("errors", "errors"),
)


def row_label(row: Mapping[str, Any]) -> str:
    return f"{row['router']}:{row['policy']}"


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    return str(value)


def markdown_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]] = _COLUMNS
) -> str:
    """A GitHub-flavoured Markdown table of ``rows`` (missing values read ``n/a``)."""
    head = "| " + " | ".join(title for _, title in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_fmt(row.get(key)) for key, _ in columns) + " |" for row in rows]
    return "\n".join([head, rule, *body])


def goal_check(results: Mapping[str, Any]) -> dict[str, Any]:
    """Issue 7's routing goal on these results: default p99 TTFT vs round-robin and peers."""
    rows = results.get("rows", [])
    default = results.get("default_policy")
    ours = [r for r in rows if r["router"] == "eagle-eye" and r["policy"] == default]
    rr = [r for r in rows if r["router"] == "eagle-eye" and r["policy"] == "round_robin"]
    peers = [r for r in rows if r["router"] != "eagle-eye" and r.get("ttft_p99_s") is not None]
    out: dict[str, Any] = {}
    if not ours or ours[0].get("ttft_p99_s") is None:
        return out
    me = ours[0]
    if rr and rr[0].get("ttft_p99_s"):
        out["ttft_p99_vs_round_robin"] = round(me["ttft_p99_s"] / rr[0]["ttft_p99_s"], 3)
        out["beats_round_robin_by_2x"] = out["ttft_p99_vs_round_robin"] <= 0.5
    if peers:
        best = min(peers, key=lambda r: r["ttft_p99_s"])
        out["best_peer"] = row_label(best)
        out["ttft_p99_vs_best_peer"] = (
            round(me["ttft_p99_s"] / best["ttft_p99_s"], 3) if best["ttft_p99_s"] else None
        )
        ratio = out["ttft_p99_vs_best_peer"]
        out["beats_best_peer_by_20pct"] = ratio is not None and ratio <= 0.8
        out["no_more_errors_than_peers"] = me["errors"] <= min(p["errors"] for p in peers)
    return out


def render_markdown(results: Mapping[str, Any], plots: Sequence[str] = ()) -> str:
    """report.md for one run."""
    cfg = results.get("config", {})
    lines = [
        f"# Routing benchmark: {cfg.get('workload', '?')}",
        "",
        f"Mode: **{cfg.get('mode', '?')}**; engines: {cfg.get('engines')}"
        f" (speed factors {cfg.get('speed_factors')}); profile `{cfg.get('profile')}`;"
        f" load {cfg.get('load')} of estimated capacity; requests replayed: {cfg.get('requests')}"
        f" over {_fmt(cfg.get('span_s'))} simulated s; speedup {cfg.get('speedup')}.",
        "",
        f"Default policy: `{results.get('default_policy')}`. Times are simulated seconds.",
        "",
        markdown_table(results.get("rows", [])),
        "",
    ]
    cap = results.get("capacity")
    if cap:
        lines += [
            f"Capacity estimate: {cap['capacity_rps']:.3f} req/s for {cap['engines']} engines "
            f"(mean request cost {cap['mean_request_cost_s']:.3f} engine-s, "
            "no prefix reuse assumed); "
            f"trace rate {cap['trace_rate_rps']:.3f} req/s scaled x{cap['rate_factor']:.3f}.",
            "",
        ]
    goals = goal_check(results)
    if goals:
        lines += ["Goal check: " + ", ".join(f"{k} = {v}" for k, v in goals.items()), ""]
    for row in results.get("rows", []):
        if row.get("error_kinds"):
            lines.append(f"- errors of {row_label(row)}: {row['error_kinds']}")
        if row.get("note"):
            lines.append(f"- {row_label(row)}: {row['note']}")
    for plot in plots:
        lines += ["", f"![{Path(plot).stem}]({Path(plot).name})"]
    command = cfg.get("command")
    if command:
        lines += ["", "Command:", "", "```", command, "```"]
    return "\n".join(lines) + "\n"


def write_results(out_dir: Path, results: Mapping[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "results.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path


def plot_latency_cdfs(path: Path, runs: Mapping[str, Sequence[RequestResult]]) -> Path | None:
    """TTFT and E2E CDFs, one line per router:policy."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, results in runs.items():
        for ax, attr in zip(axes, ("ttft_s", "e2e_s"), strict=True):
            values = sorted(getattr(r, attr) for r in results if r.ok)
            if not values:
                continue
            ys = [(i + 1) / len(values) for i in range(len(values))]
            ax.plot(values, ys, label=label)
    for ax, title in zip(axes, ("TTFT", "E2E latency"), strict=True):
        ax.set_xscale("log")
        ax.set_xlabel(f"{title} (simulated s)")
        ax.set_ylabel("fraction of requests")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"{title} CDF")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_engine_load(
    path: Path, runs: Mapping[str, Sequence[LoadSample]], step_s: float = 1.0
) -> Path | None:
    """Per-engine load (running + waiting) over time, one panel per router:policy."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    n = max(1, len(runs))
    cols = 2 if n > 1 else 1
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3 * rows), squeeze=False, sharey=True)
    for k, (label, samples) in enumerate(runs.items()):
        ax = axes[k // cols][k % cols]
        times, grid = load_grid(samples, step_s=step_s)
        for i, (_engine, values) in enumerate(sorted(grid.items())):
            ax.plot(times, values, linewidth=0.8, label=f"engine {i}")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("simulated s")
        ax.set_ylabel("running + waiting")
        ax.grid(True, alpha=0.3)
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def metric_row(
    router: str, policy: str, summary: Mapping[str, Any], **extra: Any
) -> dict[str, Any]:
    """One ``results.json`` row: identity, the ``METRIC_KEYS`` in order, then extras."""
    row: dict[str, Any] = {"router": router, "policy": policy}
    row.update({k: summary.get(k) for k in METRIC_KEYS})
    row["requests"] = summary.get("requests")
    row.update(extra)
    return row
