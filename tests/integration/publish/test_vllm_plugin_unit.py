"""The vLLM plugin's mapping and safety, without vLLM: stats shaped like vLLM's classes.

The real-vLLM proof lives in tests/integration/vllm/; here we pin down how each stats
field maps and that nothing can raise into the engine.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from eagle_eye.publish.channel import InstanceIdentity
from eagle_eye.publish.publisher import Publisher
from eagle_eye.publish.vllm_plugin import EngineStatLogger, kv_capacity_tokens, served_model_name
from eagle_eye.settings import NatsSettings, publisher_from_env
from eagle_eye.snapshot import EngineState
from support import wait_for

IDENTITY = InstanceIdentity(instance_id="i", model="m", engine="vllm")


def scheduler(**kw: Any) -> SimpleNamespace:
    base: dict[str, Any] = {
        "num_running_reqs": 3,
        "num_waiting_reqs": 2,
        "kv_cache_usage": 0.5,
        "prefix_cache_stats": SimpleNamespace(queries=100, hits=25),
        "step_counter": 7,
    }
    base.update(kw)
    return SimpleNamespace(**base)


def iteration(**kw: Any) -> SimpleNamespace:
    base: dict[str, Any] = {
        "num_generation_tokens": 3,
        "num_prompt_tokens": 50,
        "num_preempted_reqs": 1,
        "time_to_first_tokens_iter": [0.1],
        "inter_token_latencies_iter": [0.02, 0.02],
    }
    base.update(kw)
    return SimpleNamespace(**base)


@pytest.fixture
def logger() -> EngineStatLogger:
    return EngineStatLogger(None, 0, identity=IDENTITY, publisher=Publisher(None))


def test_record_maps_and_accumulates_vllm_stats(logger: EngineStatLogger) -> None:
    logger.record(scheduler(), iteration())
    logger.record(scheduler(num_running_reqs=4), iteration(), None, 0)  # 0.10+ signature
    assert logger.channel is not None
    latest = logger.channel.latest
    assert (latest.running, latest.waiting, latest.kv_usage, latest.step) == (4, 2, 0.5, 7)
    assert latest.prefix_cache_queries_total == 200 and latest.prefix_cache_hits_total == 50
    assert latest.preemptions_total == 2
    assert latest.prompt_tokens_total == 100 and latest.generation_tokens_total == 6
    assert latest.ttft_recent_s == pytest.approx(0.1)
    assert latest.itl_recent_s == pytest.approx(0.02)
    assert latest.state is EngineState.READY


def test_old_field_names_and_missing_fields_are_tolerated(logger: EngineStatLogger) -> None:
    old = SimpleNamespace(num_running_reqs=1, num_waiting_reqs=0, gpu_cache_usage=0.25)
    logger.record(old, SimpleNamespace(num_generation_tokens=1))
    assert logger.channel is not None
    latest = logger.channel.latest
    assert latest.kv_usage == 0.25
    assert latest.prefix_cache_queries_total is None  # absent, never invented
    assert latest.ttft_recent_s is None


def test_prompt_tokens_come_from_prompt_token_stats_in_new_vllm(
    logger: EngineStatLogger,
) -> None:
    it = iteration(num_prompt_tokens=None, prompt_token_stats=SimpleNamespace(computed=30))
    logger.record(scheduler(), it)
    assert logger.channel is not None and logger.channel.latest.prompt_tokens_total == 30


def test_garbage_stats_never_raise_into_the_engine(
    logger: EngineStatLogger, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    logger.record(SimpleNamespace(num_running_reqs="many"), object())
    logger.record(scheduler(prefix_cache_stats=SimpleNamespace(queries="x", hits=1)), None)
    logger.record(None, None)
    assert logger.errors >= 1
    assert len([r for r in caplog.records if "could not read vLLM stats" in r.message]) == 1


def test_log_engine_initialized_learns_kv_capacity(logger: EngineStatLogger) -> None:
    logger._vllm_config = SimpleNamespace(
        cache_config=SimpleNamespace(num_gpu_blocks=100, block_size=16)
    )
    logger.log_engine_initialized()
    assert logger.channel is not None
    assert logger.channel.identity.kv_capacity_tokens == 1600


def _config(**parallel: object) -> SimpleNamespace:
    return SimpleNamespace(
        cache_config=SimpleNamespace(num_gpu_blocks=400, block_size=16),
        parallel_config=SimpleNamespace(**parallel),
    )


@pytest.mark.parametrize(
    ("config", "tokens"),
    [
        # The API server sums the blocks of the engines it talks to; a rank has its share.
        (_config(data_parallel_size=4, data_parallel_size_local=2), 1600),
        (
            _config(data_parallel_size=4, data_parallel_size_local=2, data_parallel_hybrid_lb=True),
            3200,
        ),
        (_config(data_parallel_size=4, data_parallel_external_lb=True), 6400),
        # Tensor parallelism shards heads, not blocks: every block holds block_size tokens.
        (_config(data_parallel_size=1, tensor_parallel_size=4), 6400),
        # vLLM's own per-engine figure wins where it has one (right for hybrid models too).
        (
            SimpleNamespace(
                cache_config=SimpleNamespace(
                    num_gpu_blocks=400, block_size=16, kv_cache_size_tokens=5000
                ),
                parallel_config=SimpleNamespace(data_parallel_size=4),
            ),
            5000,
        ),
        (SimpleNamespace(cache_config=SimpleNamespace(num_gpu_blocks=None, block_size=16)), None),
    ],
)
def test_kv_capacity_is_per_engine_under_data_and_tensor_parallelism(
    config: SimpleNamespace, tokens: int | None
) -> None:
    assert kv_capacity_tokens(config) == tokens


def test_sleeping_engine_is_published_as_draining(logger: EngineStatLogger) -> None:
    logger.record_sleep_state(1, 1)  # vLLM passes 1 when going to sleep
    assert logger.channel is not None and logger.channel.latest.state is EngineState.DRAINING
    logger.record_sleep_state(0, 0)
    assert logger.channel.latest.state is EngineState.READY


def test_without_a_nats_url_the_plugin_is_inert_and_says_so_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EAGLE_EYE_NATS_URL", raising=False)
    caplog.set_level(logging.INFO, logger="eagle_eye")
    plugin = EngineStatLogger(None, 0)
    plugin.record(scheduler(), iteration())
    assert plugin.channel is None
    assert [r.message for r in caplog.records] == [
        "eagle-eye: EAGLE_EYE_NATS_URL is not set; the stat logger is inert"
    ]


def test_malformed_url_gives_one_clear_error_and_no_exception(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EAGLE_EYE_NATS_URL", "localhost:4222")
    caplog.set_level(logging.INFO, logger="eagle_eye")
    plugin = EngineStatLogger(None, 0)
    plugin.record(scheduler(), iteration())
    assert plugin.channel is None
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "is not a NATS URL" in errors[0].message


def test_env_configured_plugin_publishes_with_vllm_config_identity(
    nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EAGLE_EYE_NATS_URL", nats_url)
    monkeypatch.setenv("EAGLE_EYE_ENDPOINT", "http://10.0.0.9:8000")
    monkeypatch.setenv("EAGLE_EYE_HEARTBEAT_S", "0.37")  # a key no other test shares
    config = SimpleNamespace(
        model_config=SimpleNamespace(served_model_name=["served", "alias"], model="/m"),
        cache_config=SimpleNamespace(num_gpu_blocks=None, block_size=16),
    )
    plugin = EngineStatLogger(config, 1)
    assert plugin.channel is not None
    ident = plugin.channel.identity
    assert (ident.model, ident.endpoint, ident.dp_rank) == ("served", "http://10.0.0.9:8000", 1)
    plugin.record(scheduler(), iteration())
    publisher = plugin.channel._publisher
    assert wait_for(lambda: publisher.stats.sent >= 1, 5)
    publisher.close()


@pytest.mark.parametrize(
    ("config", "name"),
    [
        (SimpleNamespace(model_config=SimpleNamespace(served_model_name="a", model="b")), "a"),
        (SimpleNamespace(model_config=SimpleNamespace(served_model_name=None, model="b")), "b"),
        (SimpleNamespace(), None),
        (None, None),
    ],
)
def test_served_model_name(config: Any, name: str | None) -> None:
    assert served_model_name(config) == name


def test_settings_used_by_plugin_are_the_env_reader() -> None:
    assert publisher_from_env({"EAGLE_EYE_NATS_URL": "nats://h:1"}).nats == NatsSettings(
        servers=("nats://h:1",)
    )
