"""Tracing configuration: the standard OpenTelemetry variables, the flags, the errors."""

from __future__ import annotations

import pytest

from eagle_eye.commands.tracing import (
    DEFAULT_ENDPOINTS,
    TracingConfigError,
    TracingSettings,
    tracer_provider,
    tracing_from_env,
)


def test_tracing_is_off_unless_something_asks_for_it() -> None:
    assert tracing_from_env({}) is None
    assert tracing_from_env({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER_ARG": "0.1"}) is None


@pytest.mark.parametrize(
    ("environ", "endpoint"),
    [
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
            "http://collector:4318/v1/traces",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
            "http://collector:4318/v1/traces",
        ),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom/path"},
            "http://c:4318/custom/path",
        ),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, DEFAULT_ENDPOINTS["http/protobuf"]),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "http://c:4317",
        ),
    ],
)
def test_the_standard_variables_turn_it_on_and_say_where(
    environ: dict[str, str], endpoint: str
) -> None:
    settings = tracing_from_env(environ)
    assert settings is not None and settings.endpoint == endpoint


def test_defaults_are_parent_based_ratio_sampling_of_everything_over_http() -> None:
    settings = tracing_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert settings == TracingSettings(
        exporter="otlp",
        protocol="http/protobuf",
        endpoint="http://c:4318/v1/traces",
        sampler="parentbased_traceidratio",
        sample_ratio=1.0,
        service_name="eagle-eye-router",
    )


def test_flags_win_over_the_variables() -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://env:4318/v1/traces",
        "OTEL_TRACES_SAMPLER": "always_on",
        "OTEL_TRACES_SAMPLER_ARG": "0.5",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_TRACES_EXPORTER": "none",
    }
    settings = tracing_from_env(
        environ, endpoint="http://flag:4317", sample_ratio=0.01, protocol="grpc"
    )
    assert settings is not None
    assert (settings.endpoint, settings.protocol) == ("http://flag:4317", "grpc")
    assert (settings.sampler, settings.sample_ratio) == ("parentbased_traceidratio", 0.01)
    assert settings.exporter == "otlp"


def test_the_traces_protocol_variable_wins_over_the_general_one() -> None:
    settings = tracing_from_env(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
        }
    )
    assert settings is not None and settings.protocol == "grpc"
    assert settings.endpoint == "http://c:4317"  # gRPC takes the base URL as is


def test_service_name_and_standard_samplers_come_from_the_environment() -> None:
    settings = tracing_from_env(
        {
            "OTEL_TRACES_EXPORTER": "console",
            "OTEL_SERVICE_NAME": "gateway-eu",
            "OTEL_TRACES_SAMPLER": "traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
        },
        default_service_name="eagle-eye-sim",
    )
    assert settings is not None
    assert (settings.exporter, settings.service_name) == ("console", "gateway-eu")
    assert (settings.sampler, settings.sample_ratio) == ("traceidratio", 0.25)


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"},
        {"OTEL_TRACES_EXPORTER": "none"},
    ],
)
def test_it_can_be_switched_off_the_standard_ways(environ: dict[str, str]) -> None:
    assert tracing_from_env({**environ, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) is None


@pytest.mark.parametrize(
    ("environ", "flags", "names"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, {}, "OTEL_TRACES_EXPORTER"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, {"endpoint": "http://c"}, "PROTOCOL"),
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, {"endpoint": "http://c"}, "OTEL_TRACES_SAMPLER"),
        ({"OTEL_TRACES_SAMPLER_ARG": "lots"}, {"endpoint": "http://c"}, "OTEL_TRACES_SAMPLER_ARG"),
        ({"OTEL_TRACES_SAMPLER_ARG": "2"}, {"endpoint": "http://c"}, "OTEL_TRACES_SAMPLER_ARG"),
        ({}, {"endpoint": "collector:4318"}, "--otlp-traces-endpoint"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://c"}, {}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        ({}, {"endpoint": "http://c", "sample_ratio": -0.1}, "--trace-sample-ratio"),
    ],
)
def test_errors_name_what_to_fix(
    environ: dict[str, str], flags: dict[str, object], names: str
) -> None:
    with pytest.raises(TracingConfigError, match=names) as caught:
        tracing_from_env(environ, **flags)  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError)


def test_the_provider_samples_as_configured() -> None:
    provider = tracer_provider(
        TracingSettings(exporter="console", sampler="parentbased_traceidratio", sample_ratio=0.0)
    )
    try:
        tracer = provider.get_tracer("test")
        assert not tracer.start_span("dropped").is_recording()
        resource = provider.resource.attributes
        assert resource["service.name"] == "eagle-eye-router"
    finally:
        provider.shutdown()
