"""Rendering of ``docs/BENCHMARKS.md`` from collected ``BenchOutcome``s (pure).

Nothing here runs a benchmark or reads a clock, so the page's shape is unit-tested from
hand-made outcomes. Sections: the machine, the method (``METHOD``), one section per
routing run (its table, goal check and plots) and one per JSON benchmark, whose JSON is
turned into tables generically (``render_json``) with the raw JSON folded underneath.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eagle_eye.bench.report_runs import BenchOutcome
from eagle_eye.bench.routing.report import goal_check, markdown_table


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)) and all(_scalar(v) for v in value):
        return ", ".join(_fmt(v) for v in value)
    return "n/a" if value is None else str(value)


def _flatten(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def render_json(obj: Any, depth: int = 0) -> str:
    """Tables for a benchmark's JSON: lists of objects and objects of objects become
    tables, scalars a bullet list; anything else is left to the raw JSON block."""
    if not isinstance(obj, Mapping):
        return f"`{_fmt(obj)}`" if _scalar(obj) else ""
    parts: list[str] = []
    scalars = {
        k: v
        for k, v in obj.items()
        if _scalar(v) or (isinstance(v, list) and all(_scalar(x) for x in v))
    }
    if scalars:
        parts.append("\n".join(f"- {k}: {_fmt(v)}" for k, v in scalars.items()))
    for key, value in obj.items():
        if key in scalars:
            continue
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            parts.append(f"**{key}**\n\n" + _rows_table(value))
        elif (
            isinstance(value, Mapping)
            and value
            and all(isinstance(v, Mapping) for v in value.values())
        ):
            rows = [dict(v, **{"": k}) for k, v in value.items()]
            parts.append(f"**{key}**\n\n" + _rows_table(rows, first_key=""))
        elif isinstance(value, Mapping) and depth < 2:
            inner = render_json(value, depth + 1)
            if inner:
                parts.append(f"**{key}**\n\n{inner}")
    return "\n\n".join(p for p in parts if p)


def _rows_table(rows: Sequence[Mapping[str, Any]], first_key: str | None = None) -> str:
    flat = [_flatten(r) for r in rows]
    columns: list[str] = [first_key] if first_key is not None else []
    for r in flat:
        for k, v in r.items():
            if k not in columns and (
                _scalar(v) or (isinstance(v, list) and all(_scalar(x) for x in v))
            ):
                columns.append(k)
    head = "| " + " | ".join(c or "name" for c in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_fmt(r.get(c)) for c in columns) + " |" for r in flat]
    return "\n".join([head, rule, *body])


def _details(obj: Any) -> str:
    return (
        "<details><summary>raw JSON</summary>\n\n```json\n"
        + json.dumps(obj, indent=2)
        + "\n```\n\n</details>"
    )


def render_routing(outcome: BenchOutcome, doc_dir: Path | None = None) -> str:
    """One routing run: its table, goal check, and plots (paths relative to the report)."""
    lines = [f"### {outcome.description}", "", "```", outcome.command, "```", ""]
    if outcome.skipped is not None:
        return "\n".join([*lines, f"_Not run: {outcome.skipped}_", ""])
    results = outcome.result
    cfg = results.get("config", {})
    cap = results.get("capacity", {})
    lines += [
        f"{cfg.get('requests')} requests over {_fmt(cfg.get('span_s'))} simulated s, "
        f"{cfg.get('mode')} mode, speed factors {_fmt(cfg.get('speed_factors'))}, "
        f"estimated capacity {_fmt(cap.get('capacity_rps'))} req/s "
        f"(arrival rate x{_fmt(cap.get('rate_factor'))}). "
        f"Default policy `{results.get('default_policy')}`.",
        "",
        markdown_table(results.get("rows", [])),
        "",
    ]
    goals = goal_check(results)
    if goals:
        lines += ["Goal check: " + ", ".join(f"{k} = {_fmt(v)}" for k, v in goals.items()), ""]
    directory = outcome.extra.get("dir")
    for plot in results.get("plots", []):
        if directory is None:
            continue
        path = Path(directory) / plot
        rel = os.path.relpath(path, doc_dir) if doc_dir is not None else str(path)
        lines += [f"![{outcome.name} {Path(plot).stem}]({rel})", ""]
    return "\n".join(lines)


METHOD = """\
- Every figure below is produced by the command shown above it, run by
  `eagle-eye bench report` on the machine described here; nothing is typed by hand.
- Hand-run before/after checks of single changes (same machine, interleaved runs) are
  kept apart, with their commands and commits, in `docs/benchmarks/regressions.md`.
- Routing quality: a trace in the Mooncake format (real arrival times, prompt/output
  lengths and prefix sharing) or a synthetic workload is replayed through a router in
  front of a simulated fleet (`eagle-eye sim`, a GPU-free model of vLLM's scheduler and
  KV cache, timed by a cost model calibrated for Llama-3.1-8B on H100). Each row gets a
  fresh, identical fleet and its own `nats-server`. Our router (`eagle-eye router`) and
  the peers (`sglang-router`, `vllm-router`, installed by the benchmark in their own
  virtualenv) receive byte-identical streaming `/v1/completions` requests: synthetic
  prompt text with one deterministic 512-token chunk per trace block id (so text-based
  routers see the trace's prefix sharing) plus the block ids for the simulator.
  Latencies are measured by the streaming client and reported in simulated seconds.
- `--load F` scales the arrival rate to F x the fleet's capacity on the replayed
  requests, estimated from the simulator's cost model with no prefix-cache reuse (reuse is
  what routing earns). Offline rows run the same policy code against the simulator in
  virtual time, fed with per-step snapshots delayed 2 ms; their ITL p99 is approximate
  (the offline simulator keeps each request's mean and max gap, not every gap).
- Metrics: TTFT/ITL/E2E quantiles over successful requests; throughput over the span
  from first arrival to last completion; prefix hit rate from the engines' own
  counters; load CoV = std/mean across engines of time-averaged running+waiting.
"""


def render_report(
    machine: Mapping[str, Any],
    routing: Sequence[BenchOutcome],
    others: Sequence[BenchOutcome],
    *,
    doc_dir: Path | None = None,
    command: str = "eagle-eye bench report",
) -> str:
    """The whole ``docs/BENCHMARKS.md``."""
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `{command}`. Re-run it to refresh every number and plot on this page.",
        "",
        "## Machine",
        "",
        *(f"- {k}: {_fmt(v)}" for k, v in machine.items()),
        "",
        "## Method",
        "",
        METHOD,
        "## Routing quality",
        "",
    ]
    if not routing:
        lines += ["_No routing runs in this report (`--routing none`)._", ""]
    for outcome in routing:
        lines.append(render_routing(outcome, doc_dir))
    for outcome in others:
        lines += render_benchmark(outcome)
    return "\n".join(lines).rstrip() + "\n"


def render_benchmark(outcome: BenchOutcome) -> list[str]:
    """One JSON benchmark's section: its command, its tables and its raw JSON, or why it
    is not included."""
    lines = [
        f"## {outcome.name.capitalize()}",
        "",
        outcome.description,
        "",
        "```",
        outcome.command,
        "```",
        "",
    ]
    if outcome.skipped is not None:
        return [*lines, f"_Not included: {outcome.skipped}._", ""]
    rendered = render_json(outcome.result)
    if rendered:
        lines += [rendered, ""]
    return [*lines, _details(outcome.result), ""]
