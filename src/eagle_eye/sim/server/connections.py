"""Open HTTP connections of one engine, so that ``kill()`` can drop them mid-stream.

A real engine that dies resets its clients' connections; a graceful stop lets the
listener close them. ``ConnectionTracker.middleware`` records the transport of every
request while its handler runs; ``close(abort=True)`` resets them all.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.typedefs import Handler


class ConnectionTracker:
    """The transports of requests being served right now."""

    def __init__(self) -> None:
        self._transports: set[asyncio.Transport] = set()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        if transport is not None:
            self._transports.add(transport)
        try:
            return await handler(request)
        finally:
            if transport is not None:
                self._transports.discard(transport)

    def close(self, *, abort: bool) -> None:
        """Forget every tracked connection; ``abort``: reset them first (a crash)."""
        if abort:
            for transport in list(self._transports):
                transport.abort()
        self._transports.clear()
