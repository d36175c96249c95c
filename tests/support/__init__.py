"""Helpers shared by the test suite (on ``sys.path`` through pytest's ``pythonpath``).

No test synchronises by sleeping: it waits for a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository's root directory (tests read committed files relative to it)."""
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "metrics"
"""Captured and hand-written engine ``/metrics`` pages (see its README)."""


NOT_LISTENING_YET = (OSError, http.client.HTTPException)
"""What polling a port before its server listens can raise: refused or reset, or, for a
port in the ephemeral range, a TCP self-connect that reads its own request back (which
http.client rejects as a bad status line)."""


def fixture_page(name: str) -> str:
    """A ``/metrics`` page from ``tests/fixtures/metrics``."""
    return (FIXTURES / name).read_text()


def wait_for(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.01) -> bool:
    """Poll ``predicate`` until it is true or ``timeout_s`` passes; return its last value."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            return predicate()
        time.sleep(interval_s)
    return True


async def async_wait_for(
    predicate: Callable[[], bool | Awaitable[bool]], timeout_s: float, interval_s: float = 0.01
) -> bool:
    """``wait_for`` for event loops: yields to the loop between polls."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if not isinstance(result, bool):
            result = await result
        if result:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval_s)


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A port the kernel just handed out, for child processes that cannot take port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


LOWEST_BLOCK_PORT = 10000


def _ephemeral_ports() -> range:
    """The ports the kernel hands out as source ports of outgoing connections."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


def free_tcp_port_block(count: int, host: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive free ports (for ``--base-port`` style flags).

    The block lies below the kernel's ephemeral range. Inside it, a free block can be
    taken between this check and the server's bind by any outgoing connection's source
    port, the test's own included: polling ``base + 1`` before the server has bound
    ``base`` once drew ``base`` as its source port, and the server failed with "address
    already in use". Below the range only an explicit bind can take a port. The search
    starts at a place derived from the process id, so concurrent test runs spread out.
    """
    ephemeral = _ephemeral_ports()
    span = ephemeral.start - LOWEST_BLOCK_PORT - count
    if span <= 0:
        raise RuntimeError(f"no room below the ephemeral ports {ephemeral} for {count} ports")
    offset = os.getpid() % span
    for step in range(span):
        first = LOWEST_BLOCK_PORT + (offset + step) % span
        socks: list[socket.socket] = []
        try:
            for port in range(first, first + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(sock)
                sock.bind((host, port))
            return first
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError(f"no block of {count} free consecutive ports on {host}")
