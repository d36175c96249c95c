"""Fixtures shared by every test: a real nats-server on a free port, per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eagle_eye.bus.embedded import EmbeddedNats


@pytest.fixture
def nats_server() -> Iterator[EmbeddedNats]:
    """A private nats-server on 127.0.0.1 and a kernel-chosen port."""
    with EmbeddedNats() as server:
        yield server


@pytest.fixture
def nats_url(nats_server: EmbeddedNats) -> str:
    return nats_server.url
