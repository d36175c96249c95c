"""Pure pieces of the simulated engine's HTTP API (no sockets)."""

from __future__ import annotations

import pytest

from eagle_eye.sim import protocol
from eagle_eye.sim.cost_model import get_profile
from eagle_eye.sim.engine import EngineCore
from eagle_eye.sim.server.api.common import GenThroughputMeter, check_model

PROFILE = get_profile("tiny-cpu")


def test_gen_throughput_is_tokens_per_simulated_second_between_samples() -> None:
    core, meter = EngineCore(PROFILE), GenThroughputMeter()
    assert meter.sample(core) == 0.0
    core.now_s, core.counters.generation_tokens = 2.0, 10
    assert meter.sample(core) == 5.0
    assert meter.sample(core) == 5.0  # no simulated time passed: the last rate stands
    core.now_s, core.counters.generation_tokens = 4.0, 30
    assert meter.sample(core) == 10.0


def test_gen_throughput_keeps_its_rate_until_a_restarted_clock_passes_the_last_sample() -> None:
    meter = GenThroughputMeter()
    old = EngineCore(PROFILE)
    old.now_s, old.counters.generation_tokens = 10.0, 50
    assert meter.sample(old) == 5.0
    fresh = EngineCore(PROFILE)
    fresh.now_s, fresh.counters.generation_tokens = 3.0, 7
    assert meter.sample(fresh) == 5.0
    fresh.now_s, fresh.counters.generation_tokens = 12.0, 70
    assert meter.sample(fresh) == 10.0  # (70 - 50) tokens over (12 - 10) s


def test_another_model_is_a_404_and_no_model_is_fine() -> None:
    check_model({}, "sim-llama")
    check_model({"model": "sim-llama"}, "sim-llama")
    with pytest.raises(protocol.BadRequest) as info:
        check_model({"model": "gpt-9"}, "sim-llama")
    assert info.value.status == 404
    assert info.value.body()["error"]["param"] == "model"
