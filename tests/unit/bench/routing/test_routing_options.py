"""Flags of ``bench routing`` resolved into options: peers, policy overrides, speed factors."""

from __future__ import annotations

from typing import Any

import click
import pytest

from eagle_eye.bench.routing.options import (
    DEFAULT_TRACE,
    EAGLE_EYE,
    RoutingOptions,
    parse_peers,
    policy_config_from,
    speed_factors_for,
)


def test_policy_overrides_are_typed_and_checked() -> None:
    config = policy_config_from(["prefill_weight=2", "sample_d=8"])
    assert config.prefill_weight == 2.0 and config.sample_d == 8
    with pytest.raises(click.BadParameter):
        policy_config_from(["nope=1"])
    with pytest.raises(click.BadParameter):
        policy_config_from(["sample_d=x"])
    assert parse_peers("sglang-router:cache_aware,none") == [("sglang-router", "cache_aware")]
    assert ("vllm-router", "power_of_two") in parse_peers("vllm-router")


def _flags(**overrides: Any) -> dict[str, Any]:
    flags: dict[str, Any] = {
        "trace_path": None,
        "workload": None,
        "engines": 3,
        "load": 0.85,
        "duration_s": None,
        "speedup": 10.0,
        "policies": None,
        "peers": "sglang-router:cache_aware",
        "offline": False,
        "profile": None,
        "speed_factors": None,
        "hash_ids_field": None,
        "settings": (),
        "seed": 0,
        "out_dir": "out",
    }
    flags.update(overrides)
    return flags


def test_speed_factors_are_padded_with_one_or_cut_to_the_fleet_size() -> None:
    assert speed_factors_for("0.5,2", 4, None) == (0.5, 2.0, 1.0, 1.0)
    assert speed_factors_for("0.5,2,3", 2, None) == (0.5, 2.0)
    assert speed_factors_for(None, 2, None) == (1.0, 1.0)


def test_options_default_to_the_trace_the_default_policy_and_round_robin() -> None:
    options = RoutingOptions.from_flags(**_flags())
    assert options.trace_path == DEFAULT_TRACE
    assert options.policies == (options.default_policy, "round_robin")
    assert options.online_rows() == [
        (EAGLE_EYE, options.default_policy),
        (EAGLE_EYE, "round_robin"),
        ("sglang-router", "cache_aware"),
    ]


def test_offline_options_have_no_peers_and_trace_excludes_workload() -> None:
    options = RoutingOptions.from_flags(**_flags(offline=True, peers="bogus"))
    assert options.peers == ()
    with pytest.raises(click.UsageError):
        RoutingOptions.from_flags(**_flags(trace_path="t.jsonl", workload="bursts"))
    with pytest.raises(click.BadParameter):
        RoutingOptions.from_flags(**_flags(peers="bogus"))
