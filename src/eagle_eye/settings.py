"""Configuration, read in one place.

Engine-side settings come from ``EAGLE_EYE_*`` environment variables because the vLLM
plugin is constructed by vLLM itself, with no way to pass arguments. Services (router,
simulator, agent, exporter) take the same NATS settings from CLI flags that default to the
same variables. Every problem is reported as one ``SettingsError`` naming the variable and
what to put there.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from eagle_eye.errors import EagleEyeError
from eagle_eye.subjects import ROUTING_METRICS, SubjectMode, validate_subject

PREFIX: Final = "EAGLE_EYE_"
DEFAULT_PORT: Final = 8000
DEFAULT_HEARTBEAT_S: Final = 1.0
"""How often an idle publisher re-sends its newest snapshot."""
DEFAULT_STALE_AFTER_S: Final = 2.0 * DEFAULT_HEARTBEAT_S
"""A snapshot older than two heartbeats no longer describes its engine: the router scores
that engine on its own accounting instead."""
DEFAULT_READY_STALE_AFTER_S: Final = 5.0 * DEFAULT_HEARTBEAT_S
"""Monitoring's bound (exporter, ``eagle_eye_model_ready_instances``): looser than
routing's, so one late heartbeat does not flap a readiness series that alerts fire on."""
DEFAULT_FORGET_AFTER_S: Final = 300.0
"""Consumers drop an engine rank silent this long while NATS is up (it vanished without
saying ``stopping``)."""


class SettingsError(EagleEyeError, ValueError):
    """A configuration value is missing or wrong; the message says what to fix."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NatsSettings:
    """How to reach NATS. ``servers`` holds one or more ``nats://``/``tls://`` URLs."""

    servers: tuple[str, ...]
    user: str | None = None
    password: str | None = None
    token: str | None = None
    creds_file: str | None = None
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    connect_timeout_s: float = 2.0

    @property
    def display_url(self) -> str:
        """The server list without credentials, safe to log."""
        return ",".join(_strip_credentials(s) for s in self.servers)


@dataclass(frozen=True, slots=True, kw_only=True)
class PublisherSettings:
    """Engine-side publishing. ``nats`` is None when no URL is configured: stay inert."""

    nats: NatsSettings | None
    subject: str = ROUTING_METRICS
    subject_mode: SubjectMode = SubjectMode.FLAT
    instance_id: str | None = None
    endpoint: str | None = None
    port: int | None = None
    model: str | None = None
    heartbeat_s: float = DEFAULT_HEARTBEAT_S


def parse_nats_urls(value: str, *, variable: str = f"{PREFIX}NATS_URL") -> tuple[str, ...]:
    """Split and check a comma-separated NATS server list."""
    servers = tuple(part.strip() for part in value.split(",") if part.strip())
    if not servers:
        raise SettingsError(f"{variable} is empty: set it to a URL like nats://nats:4222")
    for server in servers:
        parts = urlsplit(server)
        if parts.scheme not in ("nats", "tls", "ws", "wss") or not parts.hostname:
            raise SettingsError(
                f"{variable}={_strip_credentials(server)!r} is not a NATS URL: "
                "use nats://HOST:PORT (or tls://, ws://, wss://)"
            )
        try:
            _ = parts.port
        except ValueError:
            raise SettingsError(
                f"{variable}={_strip_credentials(server)!r} has an invalid port"
            ) from None
    return servers


def nats_from_env(env: Mapping[str, str], url: str | None = None) -> NatsSettings | None:
    """NATS settings from ``EAGLE_EYE_NATS_*``; ``url`` (a CLI flag) wins over the env."""
    raw = url if url is not None else env.get(f"{PREFIX}NATS_URL", "").strip()
    if not raw:
        return None
    return NatsSettings(
        servers=parse_nats_urls(raw),
        user=_opt(env, "NATS_USER"),
        password=_opt(env, "NATS_PASSWORD"),
        token=_opt(env, "NATS_TOKEN"),
        creds_file=_existing_file(env, "NATS_CREDS"),
        tls_ca_file=_existing_file(env, "NATS_TLS_CA"),
        tls_cert_file=_existing_file(env, "NATS_TLS_CERT"),
        tls_key_file=_existing_file(env, "NATS_TLS_KEY"),
        connect_timeout_s=_positive_float(env, "NATS_CONNECT_TIMEOUT_S", 2.0),
    )


def publisher_from_env(env: Mapping[str, str] | None = None) -> PublisherSettings:
    """Read the engine-side settings; raises ``SettingsError`` with what to fix."""
    env = os.environ if env is None else env
    mode_raw = env.get(f"{PREFIX}SUBJECT_MODE", SubjectMode.FLAT.value).strip().lower()
    try:
        mode = SubjectMode(mode_raw)
    except ValueError:
        raise SettingsError(
            f"{PREFIX}SUBJECT_MODE={mode_raw!r}: use 'flat' or 'hierarchical'"
        ) from None
    subject = env.get(f"{PREFIX}SUBJECT", ROUTING_METRICS).strip() or ROUTING_METRICS
    try:
        validate_subject(subject)
    except ValueError as exc:
        raise SettingsError(f"{PREFIX}SUBJECT: {exc}") from None
    endpoint = _opt(env, "ENDPOINT")
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SettingsError(
                f"{PREFIX}ENDPOINT={endpoint!r}: use the base URL routers should call, "
                "like http://10.0.0.5:8000"
            )
        endpoint = endpoint.rstrip("/")
    port_raw = _opt(env, "PORT")
    port = None
    if port_raw is not None:
        if not port_raw.isdigit() or not 0 < int(port_raw) < 65536:
            raise SettingsError(f"{PREFIX}PORT={port_raw!r}: use a TCP port number 1-65535")
        port = int(port_raw)
    return PublisherSettings(
        nats=nats_from_env(env),
        subject=subject,
        subject_mode=mode,
        instance_id=_opt(env, "INSTANCE_ID"),
        endpoint=endpoint,
        port=port,
        model=_opt(env, "MODEL"),
        heartbeat_s=_positive_float(env, "HEARTBEAT_S", DEFAULT_HEARTBEAT_S),
    )


def server_port_from_argv(argv: Sequence[str], default: int = DEFAULT_PORT) -> int:
    """The ``--port`` a server was started with (``vllm serve ... --port 8001``)."""
    for i, arg in enumerate(argv):
        value = None
        if arg == "--port" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--port="):
            value = arg.partition("=")[2]
        if value is not None and value.isdigit() and 0 < int(value) < 65536:
            return int(value)
    return default


def default_host_address(env: Mapping[str, str]) -> str:
    """The address other pods reach this one at: the pod IP when Kubernetes gives it."""
    for name in (f"{PREFIX}POD_IP", "POD_IP"):
        value = env.get(name, "").strip()
        if value:
            return value
    hostname = socket.gethostname()
    try:
        return socket.gethostbyname(hostname)
    except OSError:
        return hostname


def _opt(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(PREFIX + name, "").strip()
    return value or None


def _existing_file(env: Mapping[str, str], name: str) -> str | None:
    path = _opt(env, name)
    if path is not None and not os.path.isfile(path):
        raise SettingsError(f"{PREFIX}{name}={path!r}: no such file")
    return path


def _positive_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = _opt(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise SettingsError(f"{PREFIX}{name}={raw!r}: use a positive number of seconds")
    return value


def _strip_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return parts._replace(netloc=host).geturl()
    return url
