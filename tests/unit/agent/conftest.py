"""Fixture pages for the agent's unit tests (captured or written from engine docs)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "metrics"


def fixture_page(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.fixture
def vllm_page() -> str:
    """A /metrics page captured from real vLLM (CPU build) after a few requests."""
    return fixture_page("vllm_0.32_cpu.txt")
