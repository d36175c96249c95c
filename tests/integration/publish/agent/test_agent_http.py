"""The stdlib fetcher against real sockets: keep-alive reuse, the byte cap without a
Content-Length, and connections that die mid-body."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from eagle_eye.publish.agent.http import FetchError, HttpFetcher, PageTooLargeError
from support.agent import PageServer


class RawServer:
    """Answers every connection with ``reply`` (raw bytes), then closes it."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)  # so the accept loop notices close() promptly
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn, contextlib.suppress(OSError):  # the client may hang up mid-reply
                conn.settimeout(5)
                conn.recv(65536)
                conn.sendall(self.reply)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def raw_server(request: pytest.FixtureRequest) -> Iterator[RawServer]:
    server = RawServer(request.param)
    yield server
    server.close()


def test_one_connection_serves_many_scrapes(page_server: PageServer) -> None:
    page_server.pages["/metrics"] = b"m 1\n"
    fetcher = HttpFetcher(page_server.url)
    try:
        for _ in range(20):
            assert fetcher.get("/metrics").body == b"m 1\n"
        assert len(page_server._connections) <= 1
    finally:
        fetcher.close()


@pytest.mark.parametrize(
    "raw_server",
    [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"x" * 300_000],
    indirect=True,
    ids=["300KB-no-length"],
)
def test_the_byte_cap_holds_without_a_content_length(raw_server: RawServer) -> None:
    fetcher = HttpFetcher(f"http://127.0.0.1:{raw_server.port}", max_page_bytes=100_000)
    with pytest.raises(PageTooLargeError) as info:
        fetcher.get("/metrics")
    assert info.value.size_bytes == 100_001
    fetcher.close()


@pytest.mark.parametrize(
    "raw_server", [b"garbage that is not HTTP\r\n\r\n"], indirect=True, ids=["not-http"]
)
def test_a_non_http_answer_is_a_fetch_error(raw_server: RawServer) -> None:
    fetcher = HttpFetcher(f"http://127.0.0.1:{raw_server.port}")
    with pytest.raises(FetchError):
        fetcher.get("/metrics")
    fetcher.close()


def test_a_closed_port_is_a_fetch_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
    fetcher = HttpFetcher(f"http://127.0.0.1:{port}", timeout_s=0.5)
    with pytest.raises(FetchError):
        fetcher.get("/metrics")
    fetcher.close()
