"""Helpers shared by the test suite (on ``sys.path`` through pytest's ``pythonpath``).

No test synchronises by sleeping: it waits for a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import http.client
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


def free_tcp_port_block(count: int, host: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive free ports (for ``--base-port`` style flags).

    A kernel-chosen port says nothing about its neighbours, which outgoing connections
    may be using; this binds the whole block at once before handing out its first port.
    """
    for _ in range(100):
        first = free_tcp_port(host)
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
