"""``eagle-eye router``'s tracing flags and variables: mistakes stop it with a usage error."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from eagle_eye.cli import main

_BASE = ["router", "--backend", "http://127.0.0.1:9", "--port", "0", "--no-dashboard"]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--otlp-traces-endpoint", "collector:4318"], {}, "--otlp-traces-endpoint"),
        ([], {"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"),
        ([], {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_SAMPLER": "x"}, "SAMPLER"),
        (["--trace-sample-ratio", "1.5"], {}, "--trace-sample-ratio"),
        (["--otlp-protocol", "http/json"], {}, "--otlp-protocol"),
    ],
)
def test_bad_tracing_settings_are_usage_errors_naming_what_to_fix(
    args: list[str], env: dict[str, str], message: str
) -> None:
    result = CliRunner().invoke(main, [*_BASE, *args], env=env)
    assert result.exit_code == 2, result.output
    assert message in result.output
