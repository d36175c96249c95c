"""``eagle-eye router``: run the gateway (and its live dashboard) until SIGINT/SIGTERM."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import click

from eagle_eye.commands.compose import mount_dashboard, run_loop, serve_until_signalled
from eagle_eye.commands.tracing import TracingFlags, start_router_tracing, tracing_options
from eagle_eye.route.config import DEFAULT_ROUTER_PORT, RouterConfig
from eagle_eye.route.gateway import Router
from eagle_eye.route.policies import POLICY_NAMES, PolicyConfig, ProfileError, parse_profiles
from eagle_eye.settings import DEFAULT_STALE_AFTER_S, SettingsError, nats_from_env

log = logging.getLogger(__name__)


def _profiles(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        return parse_profiles(Path(path).read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError, ProfileError) as exc:
        raise click.BadParameter(str(exc), param_hint="--profiles") from None


def _env_keys() -> tuple[str, ...]:
    raw = os.environ.get("EAGLE_EYE_ROUTER_API_KEYS", "")
    return tuple(k.strip() for k in raw.split(",") if k.strip())


@click.command("router")
@click.option("--nats", "nats_url", envvar="EAGLE_EYE_NATS_URL", help="NATS server URL(s).")
@click.option("--host", default="127.0.0.1", show_default=True, envvar="EAGLE_EYE_ROUTER_HOST")
@click.option(
    "--port",
    default=DEFAULT_ROUTER_PORT,
    show_default=True,
    type=int,
    envvar="EAGLE_EYE_ROUTER_PORT",
)
@click.option(
    "--policy",
    default="cost",
    show_default=True,
    envvar="EAGLE_EYE_ROUTER_POLICY",
    help=f"Default routing policy: {', '.join(POLICY_NAMES)}, or a profile from --profiles "
    "(overridable per request by x-eagle-eye-policy).",
)
@click.option(
    "--profiles",
    "profiles_file",
    type=click.Path(exists=True, dir_okay=False),
    envvar="EAGLE_EYE_ROUTER_PROFILES",
    help="YAML/JSON file of routing profiles (filters, weighted scorers, picker); "
    "see docs/router.md.",
)
@click.option(
    "--backend",
    "backends",
    multiple=True,
    help="Static engine URL (engines that publish no snapshots). Repeatable.",
)
@click.option("--metrics-port", type=int, default=None, help="Also serve /metrics on this port.")
@click.option("--stale-after-s", type=float, default=DEFAULT_STALE_AFTER_S, show_default=True)
@click.option("--retries", type=int, default=1, show_default=True)
@click.option("--max-inflight-per-instance", type=int, default=None)
@click.option("--max-inflight", type=int, default=None, help="Router-wide admission limit.")
@click.option("--max-body-bytes", type=int, default=8 * 1024 * 1024, show_default=True)
@click.option("--default-model", default=None, help="Model for requests that name none.")
@click.option(
    "--api-key",
    "api_keys",
    multiple=True,
    help="Accepted client key (repeatable; env EAGLE_EYE_ROUTER_API_KEYS, comma-separated).",
)
@click.option("--upstream-api-key", envvar="EAGLE_EYE_UPSTREAM_API_KEY", default=None)
@click.option(
    "--no-policy-header", is_flag=True, help="Ignore the x-eagle-eye-policy request header."
)
@click.option("--no-dashboard", is_flag=True, help="Do not serve the live dashboard.")
@click.option(
    "--prometheus",
    "prometheus_url",
    envvar="EAGLE_EYE_PROMETHEUS_URL",
    default=None,
    help="Prometheus base URL the dashboard reads 1/6/24 h history from.",
)
@tracing_options
def router(
    nats_url: str | None,
    host: str,
    port: int,
    policy: str,
    backends: tuple[str, ...],
    metrics_port: int | None,
    stale_after_s: float,
    retries: int,
    max_inflight_per_instance: int | None,
    max_inflight: int | None,
    max_body_bytes: int,
    default_model: str | None,
    api_keys: tuple[str, ...],
    upstream_api_key: str | None,
    no_policy_header: bool,
    no_dashboard: bool,
    prometheus_url: str | None,
    profiles_file: str | None,
    tracing: TracingFlags,
) -> None:
    """Run the OpenAI-compatible gateway that routes on live fleet metrics.

    Tracing (OpenTelemetry, docs/tracing.md) is on with --otlp-traces-endpoint or the
    standard OTEL_* variables, and needs the ``tracing`` extra."""
    try:
        nats = nats_from_env(os.environ, nats_url)
    except SettingsError as exc:
        raise click.BadParameter(str(exc), param_hint="--nats") from None
    if nats is None and not backends:
        raise click.UsageError("give --nats URL (discover engines) and/or --backend URL")
    config = RouterConfig(
        host=host,
        port=port,
        metrics_port=metrics_port,
        nats=nats,
        backends=backends,
        policy=policy,
        policy_config=PolicyConfig(stale_after_s=stale_after_s),
        profiles=_profiles(profiles_file),
        allow_policy_header=not no_policy_header,
        default_model=default_model,
        retries=retries,
        max_inflight_per_instance=max_inflight_per_instance,
        max_inflight_total=max_inflight,
        max_body_bytes=max_body_bytes,
        api_keys=frozenset(api_keys or _env_keys()),
        upstream_api_key=upstream_api_key,
    )
    try:
        gateway = Router(config)
    except ProfileError as exc:
        raise click.BadParameter(str(exc), param_hint="--profiles") from None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--policy") from None
    if not no_dashboard:
        mount_dashboard(gateway, prometheus_url=prometheus_url)
    closers = start_router_tracing(gateway, tracing)
    run_loop(lambda: serve_until_signalled(gateway, on_closed=closers))
