"""Fixtures of the agent's integration tests (the harness itself is ``support.agent``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from support.agent import Collector, PageServer


@pytest.fixture
async def collector(nats_url: str) -> AsyncIterator[Collector]:
    c = Collector()
    await c.start(nats_url)
    yield c
    assert c.client is not None
    await c.client.close()


@pytest.fixture
def page_server() -> Iterator[PageServer]:
    server = PageServer().start()
    yield server
    server.stop()
