"""Tracing configuration for the processes the commands start: read once, built once.

``tracing_from_env`` reads the standard OpenTelemetry variables (flags override them) and
says whether to trace at all; ``tracer_provider`` builds the SDK objects (imported only
then, so a router without tracing never imports OpenTelemetry). The router and the
simulator get a tracer from here; neither configures exporters itself.

Tracing is on when any of these is set: a flag (``--otlp-traces-endpoint``),
``OTEL_TRACES_EXPORTER`` (``otlp`` or ``console``), ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; it is off when none is, when
``OTEL_TRACES_EXPORTER=none`` or ``OTEL_SDK_DISABLED=true``.

=====================================  =================================================
variable                               meaning here
=====================================  =================================================
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``  where spans go, used as is
``OTEL_EXPORTER_OTLP_ENDPOINT``         base URL: ``/v1/traces`` is appended for HTTP
``OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL`` ``http/protobuf`` (default) or ``grpc``
``OTEL_TRACES_EXPORTER``               ``otlp`` (default), ``console``, ``none``
``OTEL_TRACES_SAMPLER`` / ``_ARG``      any standard sampler; default
                                       ``parentbased_traceidratio`` with ratio ``_ARG``
                                       (1.0 when unset)
``OTEL_SERVICE_NAME``                  ``service.name`` (default per process)
``OTEL_RESOURCE_ATTRIBUTES``,           read by the SDK itself (resource, exporter
``OTEL_EXPORTER_OTLP_HEADERS``, ...     headers, TLS, timeouts, batch sizes)
=====================================  =================================================
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import click

from eagle_eye import __version__
from eagle_eye.errors import EagleEyeError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import Sampler

    from eagle_eye.route.gateway import Router

log = logging.getLogger(__name__)

PROTOCOLS: Final = ("http/protobuf", "grpc")
EXPORTERS: Final = ("otlp", "console")
SAMPLERS: Final = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)
DEFAULT_SAMPLER: Final = "parentbased_traceidratio"
DEFAULT_ENDPOINTS: Final = {
    "http/protobuf": "http://localhost:4318/v1/traces",
    "grpc": "http://localhost:4317",
}
EXPORT_BATCH_SPANS: Final = 128
"""Spans per export (the SDK's default is 512) unless ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``
says otherwise. Encoding a batch holds the GIL for about 0.1-0.25 ms per span on the
process that serves requests; smaller batches keep each stall of the event loop short."""
INSTALL_HINT: Final = "pip install 'eagle-eye[tracing]' (gRPC export: 'eagle-eye[tracing-grpc]')"


class TracingConfigError(EagleEyeError, ValueError):
    """A tracing setting is wrong or its packages are missing; the message says which
    variable or flag to fix, or what to install."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TracingSettings:
    """Where spans go, which requests are sampled, and under what service name."""

    exporter: str = "otlp"
    """``otlp`` or ``console`` (spans printed as JSON lines on stdout)."""
    protocol: str = "http/protobuf"
    """OTLP transport: ``http/protobuf`` or ``grpc``."""
    endpoint: str = DEFAULT_ENDPOINTS["http/protobuf"]
    """Full traces URL for HTTP (``.../v1/traces``); ``host:port`` URL for gRPC."""
    sampler: str = DEFAULT_SAMPLER
    sample_ratio: float = 1.0
    """Ratio of root traces sampled by the ratio samplers (0-1)."""
    service_name: str = "eagle-eye-router"


def tracing_from_env(
    environ: Mapping[str, str],
    *,
    endpoint: str | None = None,
    sample_ratio: float | None = None,
    protocol: str | None = None,
    service_name: str | None = None,
    default_service_name: str = "eagle-eye-router",
) -> TracingSettings | None:
    """The tracing settings, or None when tracing is off (see the module docstring).

    The keyword arguments are the command's flags; given, they win over the variables.
    Raises ``TracingConfigError`` naming the variable or flag to fix.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporter_env = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    exporter = exporter_env.split(",")[0].strip() or "otlp"
    if exporter == "none":
        if endpoint is None:
            return None
        exporter = "otlp"  # the flag asks for OTLP explicitly
    if exporter not in EXPORTERS:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER={exporter_env!r}: use one of {', '.join(EXPORTERS)}, none"
        )
    traces_env = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    base_env = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if endpoint is None and not (exporter_env or traces_env or base_env):
        return None
    proto = _protocol(environ, protocol)
    return TracingSettings(
        exporter=exporter,
        protocol=proto,
        endpoint=_endpoint(proto, endpoint, traces_env, base_env),
        sampler=_sampler_name(environ, sample_ratio),
        sample_ratio=_ratio(environ, sample_ratio),
        service_name=service_name or environ.get("OTEL_SERVICE_NAME") or default_service_name,
    )


def _protocol(environ: Mapping[str, str], flag: str | None) -> str:
    for name, value in (
        ("--otlp-protocol", flag),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")),
    ):
        if value:
            if value.strip() not in PROTOCOLS:
                raise TracingConfigError(f"{name}={value!r}: use one of {', '.join(PROTOCOLS)}")
            return value.strip()
    return "http/protobuf"


def _endpoint(protocol: str, flag: str | None, traces_env: str, base_env: str) -> str:
    """The URL the exporter posts to. A flag or base URL without a path gets
    ``/v1/traces`` over HTTP (what an OTLP/HTTP receiver serves)."""
    if flag is not None:
        chosen, name, append = flag.strip(), "--otlp-traces-endpoint", True
    elif traces_env:
        chosen, name, append = traces_env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", False
    elif base_env:
        chosen, name, append = base_env, "OTEL_EXPORTER_OTLP_ENDPOINT", True
    else:
        return DEFAULT_ENDPOINTS[protocol]
    parts = urlsplit(chosen)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TracingConfigError(f"{name}={chosen!r}: give an http:// or https:// URL")
    if protocol == "http/protobuf" and append and parts.path in ("", "/"):
        return chosen.rstrip("/") + "/v1/traces"
    return chosen


def _sampler_name(environ: Mapping[str, str], flag_ratio: float | None) -> str:
    if flag_ratio is not None:
        return DEFAULT_SAMPLER
    name = environ.get("OTEL_TRACES_SAMPLER", "").strip().lower() or DEFAULT_SAMPLER
    if name not in SAMPLERS:
        raise TracingConfigError(f"OTEL_TRACES_SAMPLER={name!r}: use one of {', '.join(SAMPLERS)}")
    return name


def _ratio(environ: Mapping[str, str], flag_ratio: float | None) -> float:
    name, raw = "--trace-sample-ratio", flag_ratio
    if raw is None:
        name, text = "OTEL_TRACES_SAMPLER_ARG", environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
        if not text:
            return 1.0
        try:
            raw = float(text)
        except ValueError:
            raise TracingConfigError(f"{name}={text!r}: give a ratio from 0 to 1") from None
    if not 0.0 <= raw <= 1.0:
        raise TracingConfigError(f"{name}={raw!r}: give a ratio from 0 to 1")
    return raw


# -- the SDK objects ---------------------------------------------------------------------


def tracer_provider(settings: TracingSettings) -> TracerProvider:
    """A private ``TracerProvider`` (never the global one) exporting in batches from a
    background thread; ``shutdown()`` it after the process's last request to flush."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise TracingConfigError(f"tracing needs the OpenTelemetry SDK: {INSTALL_HINT}") from exc
    resource = Resource.create(
        {"service.name": settings.service_name, "service.version": __version__}
    )
    provider = TracerProvider(resource=resource, sampler=_sampler(settings))
    batch_spans = None if "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" in os.environ else EXPORT_BATCH_SPANS
    processor = BatchSpanProcessor(_exporter(settings), max_export_batch_size=batch_spans)
    provider.add_span_processor(processor)
    return provider


def _sampler(settings: TracingSettings) -> Sampler:
    from opentelemetry.sdk.trace import sampling

    ratio = sampling.TraceIdRatioBased(settings.sample_ratio)
    table: dict[str, Sampler] = {
        "always_on": sampling.ALWAYS_ON,
        "always_off": sampling.ALWAYS_OFF,
        "traceidratio": ratio,
        "parentbased_always_on": sampling.ParentBased(sampling.ALWAYS_ON),
        "parentbased_always_off": sampling.ParentBased(sampling.ALWAYS_OFF),
        "parentbased_traceidratio": sampling.ParentBased(ratio),
    }
    return table[settings.sampler]


def _exporter(settings: TracingSettings) -> Any:
    if settings.exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    try:
        if settings.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcExporter,
            )

            return GrpcExporter(endpoint=settings.endpoint)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=settings.endpoint)
    except ImportError as exc:
        raise TracingConfigError(
            f"OTLP over {settings.protocol} needs its exporter package: {INSTALL_HINT}"
        ) from exc


def describe(settings: TracingSettings) -> str:
    """One line for the start-up banner."""
    where = "stdout" if settings.exporter == "console" else settings.endpoint
    return (
        f"tracing to {where} ({settings.protocol}), service {settings.service_name}, "
        f"sampler {settings.sampler} ratio {settings.sample_ratio:g}"
    )


# -- the commands' side: flags, and wiring the router -----------------------------------


def tracing_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The tracing flags shared by ``eagle-eye router`` and ``eagle-eye up``; the command
    receives them as one ``tracing: TracingFlags`` argument."""

    @functools.wraps(command)
    def with_flags(
        *args: Any,
        otlp_traces_endpoint: str | None,
        otlp_protocol: str | None,
        trace_sample_ratio: float | None,
        **kwargs: Any,
    ) -> Any:
        flags = TracingFlags(
            otlp_traces_endpoint=otlp_traces_endpoint,
            otlp_protocol=otlp_protocol,
            trace_sample_ratio=trace_sample_ratio,
        )
        return command(*args, tracing=flags, **kwargs)

    options = (
        click.option(
            "--otlp-traces-endpoint",
            default=None,
            help="Send traces over OTLP to this URL (turns tracing on; default: "
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT). Over HTTP, "
            "a URL without a path gets /v1/traces.",
        ),
        click.option(
            "--otlp-protocol",
            type=click.Choice(PROTOCOLS),
            default=None,
            help="OTLP transport (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf).",
        ),
        click.option(
            "--trace-sample-ratio",
            type=click.FloatRange(0.0, 1.0),
            default=None,
            help="Sample this ratio of new traces, parent-based (default: "
            "OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG, else 1.0).",
        ),
    )
    decorated: Callable[..., Any] = with_flags
    for option in reversed(options):
        decorated = option(decorated)
    return decorated


@dataclass(frozen=True, slots=True, kw_only=True)
class TracingFlags:
    """What ``tracing_options`` parsed."""

    otlp_traces_endpoint: str | None = None
    otlp_protocol: str | None = None
    trace_sample_ratio: float | None = None

    def settings(self, default_service_name: str) -> TracingSettings | None:
        """The settings from these flags and the environment; a usage error names the
        variable to fix."""
        try:
            return tracing_from_env(
                os.environ,
                endpoint=self.otlp_traces_endpoint,
                sample_ratio=self.trace_sample_ratio,
                protocol=self.otlp_protocol,
                default_service_name=default_service_name,
            )
        except TracingConfigError as exc:
            raise click.UsageError(str(exc)) from None


def provider_or_none(settings: TracingSettings | None, *, required: bool) -> TracerProvider | None:
    """``tracer_provider(settings)``; when the packages are missing, a usage error if the
    user asked with a flag (``required``), else one warning and no tracing: variables
    injected into every pod must not stop a router installed without the extra."""
    if settings is None:
        return None
    try:
        return tracer_provider(settings)
    except TracingConfigError as exc:
        if required:
            raise click.UsageError(str(exc)) from None
        log.warning("tracing off: %s", exc)
        return None


def trace_router(router: Router, provider: TracerProvider) -> None:
    """Record the router's requests as spans (``route/tracing.py``); call before start."""
    from eagle_eye.route.tracing import TracingObserver

    tracer = provider.get_tracer("eagle_eye.route", __version__)
    router.dispatcher.observers.append(TracingObserver(tracer))


def start_router_tracing(router: Router, flags: TracingFlags) -> list[Callable[[], object]]:
    """Trace ``router`` as ``flags`` and the environment say (echoing where to); the
    callbacks to run after it closed (flushing the exporter). Empty when tracing is off."""
    settings = flags.settings("eagle-eye-router")
    provider = provider_or_none(settings, required=flags.otlp_traces_endpoint is not None)
    if provider is None or settings is None:
        return []
    trace_router(router, provider)
    click.echo(f"eagle-eye router: {describe(settings)}")
    return [provider.shutdown]
