"""How the CLI pairs per-engine options with ``--engine``."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from eagle_eye.publish.agent.cli import agent, build_targets
from eagle_eye.publish.agent.engines import EngineKind


def test_options_pair_with_engines_by_position() -> None:
    targets = build_targets(
        ["http://a:1", "http://b:2"],
        ["sglang"],
        ["http://pa:1", "http://pb:2"],
        [],
        [],
        env={},
    )
    assert [(t.kind, t.endpoint) for t in targets] == [
        (EngineKind.SGLANG, "http://pa:1"),
        (EngineKind.SGLANG, "http://pb:2"),
    ]


def test_a_single_engine_takes_the_sidecar_environment() -> None:
    (target,) = build_targets(
        ["http://127.0.0.1:8000"],
        ["auto"],
        [],
        [],
        [],
        env={"EAGLE_EYE_ENDPOINT": "http://10.0.0.9:8000", "EAGLE_EYE_INSTANCE_ID": "pod-9"},
    )
    assert target.kind is None
    assert (target.endpoint, target.base_instance_id) == ("http://10.0.0.9:8000", "pod-9")


def test_mismatched_counts_are_a_usage_error() -> None:
    with pytest.raises(click.UsageError, match="--advertise"):
        build_targets(["http://a:1", "http://b:2"], [], ["http://x:1"], [], [], env={})


def test_non_http_engine_urls_are_rejected() -> None:
    with pytest.raises(click.BadParameter):
        build_targets(["a:1"], [], [], [], [], env={})


def test_missing_nats_url_is_reported() -> None:
    result = CliRunner().invoke(agent, ["--engine", "http://a:1"], env={"EAGLE_EYE_NATS_URL": ""})
    assert result.exit_code == 2
    assert "--nats" in result.output


def test_empty_per_engine_values_mean_default() -> None:
    (target,) = build_targets(["http://a:1"], ["tgi"], [""], [""], [""], env={})
    assert (target.model, target.advertise, target.instance_id) == (None, None, None)
