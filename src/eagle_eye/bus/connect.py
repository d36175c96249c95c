"""Turn ``NatsSettings`` into ``nats.connect`` keyword arguments."""

from __future__ import annotations

import ssl
from typing import Any

from eagle_eye.settings import NatsSettings


def connect_options(settings: NatsSettings, *, name: str) -> dict[str, Any]:
    """Options for ``nats.connect``: auth, TLS and endless reconnects.

    Reconnects never give up because an engine or a router outlives any NATS outage;
    ``name`` shows up in ``nats-server`` connection listings.
    """
    options: dict[str, Any] = {
        "servers": list(settings.servers),
        "name": name,
        "connect_timeout": settings.connect_timeout_s,
        "allow_reconnect": True,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 0.5,
        "ping_interval": 10,
        "max_outstanding_pings": 3,
    }
    if settings.user is not None:
        options["user"] = settings.user
        options["password"] = settings.password or ""
    if settings.token is not None:
        options["token"] = settings.token
    if settings.creds_file is not None:
        options["user_credentials"] = settings.creds_file
    if (
        settings.tls_ca_file
        or settings.tls_cert_file
        or any(s.startswith(("tls://", "wss://")) for s in settings.servers)
    ):
        context = ssl.create_default_context(cafile=settings.tls_ca_file)
        if settings.tls_cert_file:
            context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
        options["tls"] = context
    return options
