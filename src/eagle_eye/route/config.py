"""Router configuration: one typed value, built by the CLI (flags default to
``EAGLE_EYE_ROUTER_*`` environment variables) and passed down explicitly."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from eagle_eye.fleet.target import DEFAULT_EJECT_S, DEFAULT_FAILURES_TO_EJECT
from eagle_eye.route.policies import DEFAULT_POLICY, PolicyConfig
from eagle_eye.settings import DEFAULT_FORGET_AFTER_S, NatsSettings

DEFAULT_ROUTER_PORT: Final = 8080
POLICY_HEADER: Final = "x-eagle-eye-policy"
"""Per-request policy override (any name from ``policies.POLICY_NAMES``)."""
SESSION_HEADER: Final = "x-session-id"
"""Sticky-session key for the ``session`` policy (else the body's ``user``)."""
BACKEND_HEADER: Final = "x-eagle-eye-backend"
"""Response header naming the engine endpoint that served the request."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RouterConfig:
    """Everything the gateway needs; every field has a production-safe default."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_ROUTER_PORT
    """0 lets the kernel pick (tests); read ``Router.port`` after start."""
    metrics_port: int | None = None
    """Serve ``/metrics`` on a separate port too (kept off the client-facing port's path
    when the gateway is exposed publicly); None: only on the main port."""
    nats: NatsSettings | None = None
    """None: no NATS; route on static backends with local accounting only."""
    backends: tuple[str, ...] = ()
    """Static engine URLs (engines that publish no snapshots)."""
    policy: str = DEFAULT_POLICY
    policy_config: PolicyConfig = field(default_factory=PolicyConfig)
    profiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """User-defined policies: name -> pipeline spec (``route/policies/spec.py``); each
    becomes a policy name for ``policy`` and the ``x-eagle-eye-policy`` header."""
    allow_policy_header: bool = True
    default_model: str | None = None
    """Model used when a request names none and the fleet serves several."""
    retries: int = 1
    """Extra attempts on another instance after a connect error or 5xx before any byte
    reached the client."""
    failures_to_eject: int = DEFAULT_FAILURES_TO_EJECT
    eject_s: float = DEFAULT_EJECT_S
    probe_interval_s: float = 2.0
    """How often ejected and static backends are probed (``GET /v1/models``)."""
    connect_timeout_s: float = 2.0
    read_timeout_s: float = 600.0
    """Longest silence from an engine mid-response before the request is failed."""
    max_body_bytes: int = 8 * 1024 * 1024
    max_inflight_per_instance: int | None = None
    """Admission limit: instances at this many requests take no more; 429 if all are."""
    max_inflight_total: int | None = None
    """Admission limit for the whole router; 429 with Retry-After above it."""
    retry_after_s: int = 1
    api_keys: frozenset[str] = frozenset()
    """Client keys accepted as ``Authorization: Bearer KEY``; empty: no auth."""
    upstream_api_key: str | None = None
    """Key sent to engines (else the client's Authorization header is passed through
    when the router itself does not check keys)."""
    forget_after_s: float = DEFAULT_FORGET_AFTER_S
    rng_seed: int | None = None
    """Seed for tie-breaks and sampling (tests); None: seeded from the OS."""
