"""Fixture pages for the agent's unit tests (captured or written from engine docs)."""

from __future__ import annotations

import pytest

from support import fixture_page


@pytest.fixture
def vllm_page() -> str:
    """A /metrics page captured from real vLLM (CPU build) after a few requests."""
    return fixture_page("vllm_0.32_cpu.txt")
