"""What the operator asked the agent to watch, and how often: plain values, no I/O.

``EngineTarget`` is one engine as given on the command line (``--engine``, ``--kind``,
``--advertise``, ...); ``AgentConfig`` the timing and limits every watcher shares. They
live apart from ``watcher.py`` so the command line and tests can build them without
the scraping machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from eagle_eye.publish.agent.engines import EngineKind
from eagle_eye.publish.agent.http import DEFAULT_MAX_PAGE_BYTES

METRICS_PATH: Final = "/metrics"


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineTarget:
    """One engine to watch, as the operator described it."""

    url: str
    """Where the agent reaches the engine: a base URL, or the full ``.../metrics`` URL."""
    kind: EngineKind | None = None
    """None: detect from the metric families on the first page."""
    advertise: str | None = None
    """Endpoint routers should call (defaults to ``url`` without ``/metrics``)."""
    instance_id: str | None = None
    """Defaults to ``host:port`` of the advertised endpoint."""
    model: str | None = None
    """Model name for engines whose page does not say it (TGI, llama.cpp)."""

    @property
    def base_url(self) -> str:
        parts = urlsplit(self.url)
        path = parts.path.rstrip("/")
        if path.endswith(METRICS_PATH):
            path = path[: -len(METRICS_PATH)]
        return urlunsplit((parts.scheme, parts.netloc, path, "", "")).rstrip("/")

    @property
    def metrics_path(self) -> str:
        query = urlsplit(self.url).query
        return METRICS_PATH + (f"?{query}" if query else "")

    @property
    def endpoint(self) -> str:
        return (self.advertise or self.base_url).rstrip("/")

    @property
    def base_instance_id(self) -> str:
        if self.instance_id:
            return self.instance_id
        parts = urlsplit(self.endpoint)
        return parts.netloc or self.endpoint


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """Timing and limits shared by every watcher."""

    interval_s: float = 0.1
    timeout_s: float = 1.0
    """Per-request timeout; keep it near the interval so a hung engine is noticed."""
    unreachable_after: int = 3
    """Consecutive failed scrapes before ``unreachable`` is published."""
    max_backoff_s: float = 2.0
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES
    forget_after: int = 50
    """Good scrapes a rank may be missing from before it is declared gone."""
