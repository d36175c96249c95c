"""``eagle-eye bench report``: run every benchmark and write ``docs/BENCHMARKS.md``.

Nothing in the report is typed by hand: each benchmark command runs as a subprocess
(exactly the command the report prints, so a reader can re-run it), its JSON is collected
and rendered into tables, and the routing runs write their own plots next to the report.
A benchmark whose module does not exist yet, or which fails, is listed with the reason
instead of silently disappearing.

Rendering is pure (``render_report`` takes the collected results) so it is unit-tested
without running anything.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from eagle_eye.bench.routing.report import goal_check, markdown_table

JSON_BENCHMARKS: tuple[tuple[str, str, str], ...] = (
    # (name, module that must exist, what it measures)
    (
        "publisher",
        "eagle_eye.bench.publisher",
        "Engine-side cost of `record()` vs vLLM's Prometheus logger.",
    ),
    (
        "router",
        "eagle_eye.bench.router",
        "Router added latency and max rate vs LiteLLM and the Rust routers.",
    ),
    ("agent", "eagle_eye.bench.agent", "Agent `/metrics` parse cost vs prometheus_client."),
    ("sim", "eagle_eye.bench.sim", "Simulator steps/s per core and offline replay speed."),
    (
        "freshness",
        "eagle_eye.bench.freshness",
        "Publish-to-router latency and fleet-view capacity.",
    ),
)


@dataclass(frozen=True, slots=True)
class RoutingSuiteEntry:
    """One ``bench routing`` run of the report."""

    name: str
    title: str
    args: tuple[str, ...]


def routing_suite(level: str, trace: str) -> list[RoutingSuiteEntry]:
    """The routing runs for ``level`` (``full``, ``quick`` or ``none``)."""
    if level == "none":
        return []
    quick = level == "quick"
    # Online replays run in real time (speedup 1) so the simulator keeps up on small
    # machines; the offline runs cover the long spans.
    online_s = "120" if quick else "300"
    offline_s = "120" if quick else "600"
    policies = "cost,round_robin,least_request,prefix_affinity,kv_aware"
    entries = [
        RoutingSuiteEntry(
            "mooncake-online",
            "Mooncake conversation trace, 8 engines, 85 % load: "
            "ours vs round-robin vs peers (online)",
            (
                "--trace",
                trace,
                "--engines",
                "8",
                "--load",
                "0.85",
                "--duration",
                online_s,
                "--speedup",
                "2",
                "--hash-ids-field",
                "eagle_eye_hash_ids",
            ),
        ),
        RoutingSuiteEntry(
            "mooncake-offline",
            "Mooncake conversation trace, every policy (offline, virtual time)",
            (
                "--offline",
                "--trace",
                trace,
                "--engines",
                "8",
                "--load",
                "0.85",
                "--duration",
                offline_s,
                "--policies",
                policies,
            ),
        ),
    ]
    for workload in ("system_prompts", "multi_turn", "short_chat", "bursts", "heterogeneous"):
        entries.append(
            RoutingSuiteEntry(
                f"{workload}-offline",
                f"Synthetic workload `{workload}`, every policy (offline)",
                (
                    "--offline",
                    "--workload",
                    workload,
                    "--engines",
                    "8",
                    "--load",
                    "0.85",
                    "--duration",
                    "120" if quick else "300",
                    "--policies",
                    policies,
                ),
            )
        )
    return entries


@dataclass(slots=True)
class BenchOutcome:
    """What running one benchmark command produced."""

    name: str
    command: str
    description: str = ""
    result: Any = None
    skipped: str | None = None
    """Why it did not run or failed (None: ``result`` holds its JSON)."""
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def _cli_prefix() -> list[str]:
    return [sys.executable, "-c", "from eagle_eye.cli import main; main()"]


def last_json_object(stdout: str) -> Any:
    """The JSON document a benchmark printed (the whole output, else its last line that
    parses), tolerating log lines before it."""
    text = stdout.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    start = text.rfind("\n{")
    while start != -1:
        try:
            return json.loads(text[start + 1 :])
        except ValueError:
            start = text.rfind("\n{", 0, start)
    if text.startswith("{"):
        return json.loads(text)
    raise ValueError("no JSON object in the output")


def run_json_benchmark(name: str, module: str, description: str, timeout_s: float) -> BenchOutcome:
    """``eagle-eye bench NAME --json`` as a subprocess; skipped with a reason if absent."""
    display = f"eagle-eye bench {name} --json"
    outcome = BenchOutcome(name=name, command=display, description=description)
    if importlib.util.find_spec(module) is None:
        outcome.skipped = f"not available yet (`{module}` does not exist)"
        return outcome
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [*_cli_prefix(), "bench", name, "--json"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=dict(os.environ, EAGLE_EYE_LOG_LEVEL="WARNING"),
        )
    except subprocess.TimeoutExpired:
        outcome.skipped = f"did not finish within {timeout_s:.0f} s"
        return outcome
    outcome.wall_s = round(time.monotonic() - started, 1)
    if proc.returncode != 0:
        outcome.skipped = f"exited with {proc.returncode}: {proc.stderr.strip()[-500:]}"
        return outcome
    try:
        outcome.result = last_json_object(proc.stdout)
    except ValueError as exc:
        outcome.skipped = f"printed no JSON ({exc}): {proc.stdout.strip()[-300:]}"
    return outcome


def run_routing(entry: RoutingSuiteEntry, out_root: Path, timeout_s: float) -> BenchOutcome:
    """One ``bench routing`` run into ``out_root/entry.name``; its results.json is the result."""
    out_dir = out_root / entry.name
    args = [*entry.args, "--out", str(out_dir)]
    outcome = BenchOutcome(
        name=entry.name,
        command="eagle-eye bench routing " + shlex.join(args),
        description=entry.title,
    )
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [*_cli_prefix(), "bench", "routing", *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        outcome.skipped = f"did not finish within {timeout_s:.0f} s"
        return outcome
    outcome.wall_s = round(time.monotonic() - started, 1)
    results_path = out_dir / "results.json"
    if proc.returncode != 0 or not results_path.exists():
        outcome.skipped = f"exited with {proc.returncode}: {proc.stderr.strip()[-500:]}"
        return outcome
    outcome.result = json.loads(results_path.read_text())
    outcome.extra["dir"] = out_dir
    return outcome


def load_routing_dir(name: str, title: str, directory: Path) -> BenchOutcome:
    """A routing run made earlier (``--routing-results``), read from its results.json."""
    results = json.loads((directory / "results.json").read_text())
    cfg = results.get("config", {})
    command = cfg.get("command", "eagle-eye bench routing ...")
    if cfg:
        title = (
            f"`{cfg.get('workload')}`: {cfg.get('engines')} engines, load {cfg.get('load')}, "
            f"{cfg.get('mode')}"
        )
    return BenchOutcome(
        name=name, command=command, description=title, result=results, extra={"dir": directory}
    )


# -- machine ---------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib: float | None = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    commit = None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
            ).stdout.strip()
            or None
        )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "commit": commit,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


# -- rendering (pure) -----------------------------------------------------------------


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
        lines += [
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
            lines += [f"_Not included: {outcome.skipped}._", ""]
            continue
        rendered = render_json(outcome.result)
        if rendered:
            lines += [rendered, ""]
        lines += [_details(outcome.result), ""]
    return "\n".join(lines).rstrip() + "\n"


@click.command("report")
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    default="docs/BENCHMARKS.md",
    show_default=True,
)
@click.option(
    "--routing",
    "routing_level",
    type=click.Choice(["full", "quick", "none"]),
    default="full",
    show_default=True,
    help="Which routing runs to make (full: 600 s online replay per row).",
)
@click.option(
    "--routing-results",
    multiple=True,
    type=click.Path(file_okay=False, exists=True),
    help="Use an existing `bench routing --out DIR` instead of running the suite (repeatable).",
)
@click.option(
    "--trace", default="../shared/data/traces/mooncake_conversation.jsonl", show_default=True
)
@click.option("--skip", multiple=True, help="Benchmark names to leave out (e.g. router).")
@click.option(
    "--timeout", "timeout_s", default=3600.0, show_default=True, help="Per-command limit, seconds."
)
def report(
    out_path: str,
    routing_level: str,
    routing_results: tuple[str, ...],
    trace: str,
    skip: tuple[str, ...],
    timeout_s: float,
) -> None:
    """Run every benchmark and write the performance report (Markdown + plots)."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    plots_root = out.parent / "benchmarks"
    routing: list[BenchOutcome] = []
    if routing_results:
        for directory in routing_results:
            routing.append(
                load_routing_dir(
                    Path(directory).name, f"Routing run `{Path(directory).name}`", Path(directory)
                )
            )
    else:
        for entry in routing_suite(routing_level, trace):
            if entry.name in skip:
                continue
            click.echo(f"routing: {entry.name} ...", err=True)
            routing.append(run_routing(entry, plots_root, timeout_s))
    others = []
    for name, module, description in JSON_BENCHMARKS:
        if name in skip:
            continue
        click.echo(f"bench {name} ...", err=True)
        others.append(run_json_benchmark(name, module, description, timeout_s))
    argv = sys.argv[1:]
    command = (
        "eagle-eye " + shlex.join(argv)
        if argv[:2] == ["bench", "report"]
        else "eagle-eye bench report"
    )
    text = render_report(machine_info(), routing, others, doc_dir=out.parent, command=command)
    out.write_text(text)
    summary = {
        "report": str(out),
        "routing": {o.name: (o.skipped or "ok") for o in routing},
        "benchmarks": {o.name: (o.skipped or "ok") for o in others},
    }
    click.echo(json.dumps(summary, indent=2))
