"""The agent's HTTP client: stdlib ``http.client``, one keep-alive connection per engine.

Why stdlib and not aiohttp: the agent is meant to sit next to the engine (a sidecar) and
ship in the same tiny engine-side install as the vLLM plugin (nats-py + click, no
service extras). Each watched engine gets its own thread with a blocking keep-alive
connection; at 10 requests per second per engine that is one cheap thread, and the
blocking read gives a clean place to enforce a byte cap and a timeout.

Errors are translated at this boundary: anything that means "the engine did not answer"
raises ``FetchError``; an answer bigger than the cap raises ``PageTooLargeError`` and one
cut short of its ``Content-Length`` raises ``TruncatedPageError`` (the engine answered,
so for the caller these are parse errors, not an outage).
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass
from typing import Final, Protocol
from urllib.parse import urlsplit

from eagle_eye.errors import EagleEyeError

DEFAULT_MAX_PAGE_BYTES: Final = 8 * 1024 * 1024
"""A vLLM page with many LoRA adapters is a few hundred KiB; 8 MiB means something broke."""


class FetchError(EagleEyeError, OSError):
    """The engine did not answer (refused, reset, timed out, bad HTTP)."""


class TruncatedPageError(EagleEyeError, ValueError):
    """The engine closed the connection before the declared ``Content-Length``."""


class PageTooLargeError(EagleEyeError, ValueError):
    """The engine answered with more than the byte cap; ``size_bytes`` is what was seen."""

    def __init__(self, size_bytes: int, cap_bytes: int) -> None:
        super().__init__(f"response of {size_bytes}+ bytes exceeds the cap of {cap_bytes}")
        self.size_bytes = size_bytes
        self.cap_bytes = cap_bytes


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes


class Fetcher(Protocol):
    """The seam between the agent and the network: GET a path on one engine."""

    def get(self, path: str) -> Response: ...

    def close(self) -> None: ...


class HttpFetcher:
    """GETs on one ``http://`` or ``https://`` base URL over a reused connection."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 1.0,
        max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{base_url!r} is not an http(s) URL")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._timeout_s = timeout_s
        self._max_page_bytes = max_page_bytes
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self._timeout_s)
        return self._conn

    def get(self, path: str) -> Response:
        """GET ``path`` (relative to the base URL's path); the body is capped."""
        conn = self._connection()
        try:
            conn.request("GET", self._prefix + path, headers={"Accept": "text/plain"})
            resp = conn.getresponse()
        except (TimeoutError, OSError, http.client.HTTPException) as exc:
            self.close()
            raise FetchError(f"GET {self._prefix}{path}: {exc or type(exc).__name__}") from exc
        try:
            body = self._read_capped(resp)
        except (TimeoutError, OSError, http.client.HTTPException) as exc:
            resp.close()
            self.close()
            raise FetchError(f"GET {self._prefix}{path}: {exc or type(exc).__name__}") from exc
        except (PageTooLargeError, TruncatedPageError):
            resp.close()  # do not drain a huge or broken body; reconnect next time
            self.close()
            raise
        if resp.will_close:
            resp.close()
            self.close()
        return Response(resp.status, body)

    def _read_capped(self, resp: http.client.HTTPResponse) -> bytes:
        header = resp.getheader("Content-Length") or ""
        declared = int(header) if header.isdigit() else None
        if declared is not None and declared > self._max_page_bytes:
            raise PageTooLargeError(declared, self._max_page_bytes)
        body = resp.read(self._max_page_bytes + 1)
        if len(body) > self._max_page_bytes:
            raise PageTooLargeError(len(body), self._max_page_bytes)
        if declared is not None and len(body) < declared:
            raise TruncatedPageError(f"got {len(body)} of {declared} bytes")
        if not resp.isclosed():
            resp.read()  # finish the (small) remainder so the connection is reusable
        return body

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
