"""``eagle-eye bench agent``: what one scrape's parse costs the agent, vs prometheus_client.

The page is a real vLLM ``/metrics`` capture (``tests/fixtures/metrics/vllm_0.32_cpu.txt``,
614 lines, ~50 KB, taken from vLLM 0.32 on CPU with 23 requests running). Both sides
start from the same ``str`` in the same process:

* ours: ``eagle_eye.publish.agent.engines.vllm.read`` (find the wanted lines, parse them, map
  them to a per-rank ``Reading``): everything the agent does per scrape besides HTTP;
* peer: ``prometheus_client.parser.text_string_to_metric_families`` over the whole
  page, every sample materialised (what a generic scraper would do before picking
  the same dozen values).

Reported: per-scrape p50/p90 in microseconds for each, ``ratio`` = ours p50 / peer p50
(goal <= 0.2), and that both read the same numbers for the fields we map.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from eagle_eye.publish.agent.engines import vllm

_DEFAULT_PAGE = (
    Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "metrics" / "vllm_0.32_cpu.txt"
)


def _timings_us(fn: Callable[[], object], iterations: int) -> list[float]:
    fn()  # warm caches (regex compilation, imports)
    out = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1e6)
    return out


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _peer_values(text: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {
        "vllm:num_requests_running": "running",
        "vllm:num_requests_waiting": "waiting",
        "vllm:kv_cache_usage_perc": "kv_usage",
        "vllm:prompt_tokens_total": "prompt_tokens_total",
        "vllm:generation_tokens_total": "generation_tokens_total",
    }
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                out[wanted[sample.name]] = sample.value
    return out


def run(page: Path, iterations: int, peer_iterations: int) -> dict[str, Any]:
    from prometheus_client.parser import text_string_to_metric_families

    text = page.read_text()

    def ours() -> object:
        return vllm.read(text)

    def peer() -> object:
        return [list(f.samples) for f in text_string_to_metric_families(text)]

    ours_us = _timings_us(ours, iterations)
    peer_us = _timings_us(peer, peer_iterations)
    (reading,) = vllm.read(text)
    peer_values = _peer_values(text)
    agree = all(
        float(getattr(reading, name)) == peer_value for name, peer_value in peer_values.items()
    )
    ours_p50 = statistics.median(ours_us)
    peer_p50 = statistics.median(peer_us)
    return {
        "benchmark": "agent",
        "page": page.name,
        "page_bytes": len(text.encode()),
        "page_lines": text.count("\n"),
        "iterations": iterations,
        "peer_iterations": peer_iterations,
        "parse_us_p50": round(ours_p50, 1),
        "parse_us_p90": round(_quantile(ours_us, 0.9), 1),
        "prometheus_client_us_p50": round(peer_p50, 1),
        "prometheus_client_us_p90": round(_quantile(peer_us, 0.9), 1),
        "ratio": round(ours_p50 / peer_p50, 4),
        "goal_ratio_max": 0.2,
        "values_agree": agree,
        "cpu_share_at_100ms_interval": round(ours_p50 / 100_000, 5),
        "python": platform.python_version(),
    }


@click.command("agent")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the only output format).")
@click.option(
    "--page",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=_DEFAULT_PAGE if _DEFAULT_PAGE.is_file() else None,
    help="A captured vLLM /metrics page (default: the repository's vLLM 0.32 capture).",
)
@click.option("--iterations", type=click.IntRange(min=10), default=3000, show_default=True)
@click.option("--peer-iterations", type=click.IntRange(min=10), default=200, show_default=True)
def agent(as_json: bool, page: Path | None, iterations: int, peer_iterations: int) -> None:
    """Agent /metrics parse cost per scrape vs prometheus_client's parser (JSON)."""
    del as_json  # JSON is the only format; the flag keeps `bench NAME --json` uniform
    if page is None:
        raise click.UsageError("no captured page found: pass --page PATH")
    click.echo(json.dumps(run(page, iterations, peer_iterations), indent=2))
