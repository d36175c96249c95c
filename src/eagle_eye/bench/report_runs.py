"""The runs behind ``docs/BENCHMARKS.md``: which benchmark commands, run how.

Each benchmark runs as a subprocess, exactly the command the report prints, so a reader
can re-run it; its JSON is collected into a ``BenchOutcome``. A benchmark whose module
does not exist yet, or which fails or times out, becomes an outcome with the reason in
``skipped`` instead of silently disappearing. ``routing_suite`` is the table of routing
runs; the report's rendering (``report_render.py``) never runs anything.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    (
        "plugin-ab",
        "eagle_eye.bench.plugin_ab",
        "Real vLLM with the plugin publishing vs without it: throughput, TTFT, TPOT.",
    ),
    ("agent", "eagle_eye.bench.agent", "Agent `/metrics` parse cost vs prometheus_client."),
    ("sim", "eagle_eye.bench.sim", "Simulator steps/s per core and offline replay speed."),
    (
        "freshness",
        "eagle_eye.bench.freshness",
        "Publish-to-router latency and fleet-view capacity.",
    ),
)

ROUTING_POLICIES = "cost,round_robin,least_request,prefix_affinity,kv_aware"
"""Every policy the offline runs compare."""
SYNTHETIC_WORKLOADS = ("system_prompts", "multi_turn", "short_chat", "bursts", "heterogeneous")
"""The synthetic workloads the report replays, one offline run each."""


@dataclass(frozen=True, slots=True)
class RoutingSuiteEntry:
    """One ``bench routing`` run of the report."""

    name: str
    title: str
    args: tuple[str, ...]


def _fleet_args(duration_s: str) -> tuple[str, ...]:
    """The fleet every routing run of the report uses: 8 engines at 85 % load."""
    return ("--engines", "8", "--load", "0.85", "--duration", duration_s)


def routing_suite(level: str, trace: str) -> list[RoutingSuiteEntry]:
    """The routing runs for ``level`` (``full``, ``quick`` or ``none``)."""
    if level == "none":
        return []
    quick = level == "quick"
    # Online replays run in real time (speedup 1) so the simulator keeps up on small
    # machines; the offline runs cover the long spans.
    online_s = "120" if quick else "300"
    offline_s = "120" if quick else "600"
    synthetic_s = "120" if quick else "300"
    online_extra = ("--speedup", "2", "--hash-ids-field", "eagle_eye_hash_ids")
    every_policy = ("--policies", ROUTING_POLICIES)
    return [
        RoutingSuiteEntry(
            "mooncake-online",
            "Mooncake conversation trace, 8 engines, 85 % load: "
            "ours vs round-robin vs peers (online)",
            ("--trace", trace, *_fleet_args(online_s), *online_extra),
        ),
        RoutingSuiteEntry(
            "mooncake-offline",
            "Mooncake conversation trace, every policy (offline, virtual time)",
            ("--offline", "--trace", trace, *_fleet_args(offline_s), *every_policy),
        ),
        *(
            RoutingSuiteEntry(
                f"{workload}-offline",
                f"Synthetic workload `{workload}`, every policy (offline)",
                ("--offline", "--workload", workload, *_fleet_args(synthetic_s), *every_policy),
            )
            for workload in SYNTHETIC_WORKLOADS
        ),
    ]


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
