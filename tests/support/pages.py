"""Read an engine's own numbers with an independent parser (prometheus_client)."""

from __future__ import annotations

import math

import aiohttp
from prometheus_client.parser import text_string_to_metric_families


async def fetch_text(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        resp.raise_for_status()
        return await resp.text()


def values(text: str, **labels: str) -> dict[str, float]:
    """Sample name -> value for samples whose labels include ``labels``."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if all(sample.labels.get(k) == v for k, v in labels.items()):
                out.setdefault(sample.name, float(sample.value))
    return out


def bucket_bounds(text: str, histogram: str, **labels: str) -> tuple[float, float]:
    """Lower and upper bound of the observed values, from the non-empty buckets."""
    buckets: list[tuple[float, float]] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != histogram + "_bucket":
                continue
            if all(sample.labels.get(k) == v for k, v in labels.items()):
                buckets.append((float(sample.labels["le"]), float(sample.value)))
    buckets.sort()
    lower, upper, previous_le, previous_count = None, math.inf, 0.0, 0.0
    for le, count in buckets:
        if count > previous_count and lower is None:
            lower = previous_le
        if count == buckets[-1][1] and upper == math.inf and count > 0:
            upper = le
        previous_le, previous_count = le, count
    return (lower or 0.0), upper
