"""Each engine mapping, read from fixture pages, against the numbers on those pages."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from eagle_eye.publish.agent import engines
from eagle_eye.publish.agent.engines import EngineKind, MappingError, RankKey, sglang
from eagle_eye.publish.agent.promtext import PromParseError
from support import FIXTURES, fixture_page


def _value(text: str, name: str, **labels: str) -> float:
    """The sample's value as prometheus_client reads it (an independent parser)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise KeyError(name)


@pytest.mark.parametrize(
    ("page", "kind"),
    [
        ("vllm_0.32_cpu.txt", EngineKind.VLLM),
        ("vllm_old_names_dp2.txt", EngineKind.VLLM),
        ("sglang_dp2_tp2.txt", EngineKind.SGLANG),
        ("tgi_3.x.txt", EngineKind.TGI),
        ("llamacpp.txt", EngineKind.LLAMACPP),
        ("ray_serve_llm_2.60.txt", EngineKind.RAY_SERVE),
    ],
)
def test_kind_is_detected_from_the_metric_families(page: str, kind: EngineKind) -> None:
    assert engines.detect(fixture_page(page)) is kind


def test_garbage_is_not_any_engine() -> None:
    assert engines.detect(fixture_page("garbage.html")) is None


def test_real_vllm_page_maps_to_the_engines_numbers(vllm_page: str) -> None:
    (reading,) = engines.read(EngineKind.VLLM, vllm_page)
    labels = {"model_name": "tiny", "engine": "0"}
    assert reading.key == RankKey(model="tiny", rank=0)
    assert reading.running == _value(vllm_page, "vllm:num_requests_running", **labels) == 23
    assert reading.waiting == _value(vllm_page, "vllm:num_requests_waiting", **labels)
    assert reading.kv_usage == _value(vllm_page, "vllm:kv_cache_usage_perc", **labels)
    assert reading.prefix_cache_queries_total == _value(
        vllm_page, "vllm:prefix_cache_queries_total", **labels
    )
    assert reading.prefix_cache_hits_total == _value(
        vllm_page, "vllm:prefix_cache_hits_total", **labels
    )
    assert reading.preemptions_total == _value(vllm_page, "vllm:num_preemptions_total", **labels)
    assert reading.prompt_tokens_total == _value(vllm_page, "vllm:prompt_tokens_total", **labels)
    assert reading.generation_tokens_total == _value(
        vllm_page, "vllm:generation_tokens_total", **labels
    )
    assert reading.ttft_count == _value(
        vllm_page, "vllm:time_to_first_token_seconds_count", **labels
    )
    assert reading.itl_sum_s == _value(vllm_page, "vllm:inter_token_latency_seconds_sum", **labels)
    # vLLM's own cache_config_info: kv_cache_size_tokens = num_gpu_blocks x block_size.
    assert reading.kv_capacity_tokens == 16384 * 128


def test_removed_vllm_names_still_map_per_data_parallel_engine() -> None:
    readings = engines.read(EngineKind.VLLM, fixture_page("vllm_old_names_dp2.txt"))
    assert [r.key for r in readings] == [RankKey("llama-8b", 0), RankKey("llama-8b", 1)]
    first, second = readings
    assert (first.running, first.waiting, first.kv_usage) == (4, 0, 0.125)
    assert (second.running, second.waiting, second.kv_usage) == (6, 3, 0.5)
    assert (second.prefix_cache_queries_total, second.prefix_cache_hits_total) == (2000, 1500)
    assert second.preemptions_total == 2
    assert (second.itl_sum_s, second.itl_count) == (245.16, 8172)
    assert (first.kv_capacity_tokens, second.kv_capacity_tokens) == (2048 * 16, 4096 * 16)


def test_current_vllm_name_wins_over_the_removed_one() -> None:
    text = (
        'vllm:num_requests_running{model_name="m"} 1\n'
        'vllm:num_requests_waiting{model_name="m"} 0\n'
        'vllm:gpu_cache_usage_perc{model_name="m"} 0.9\n'
        'vllm:kv_cache_usage_perc{model_name="m"} 0.2\n'
    )
    (reading,) = engines.read(EngineKind.VLLM, text)
    assert reading.kv_usage == 0.2


def test_multi_model_vllm_page_gives_one_reading_per_model() -> None:
    text = "".join(
        f'vllm:num_requests_{kind}{{model_name="{model}",engine="0"}} {n}\n'
        for model, n in (("a", 1), ("b", 2))
        for kind in ("running", "waiting")
    )
    readings = engines.read(EngineKind.VLLM, text)
    assert [(r.key.model, r.running) for r in readings] == [("a", 1), ("b", 2)]


def test_fields_the_page_lacks_stay_absent() -> None:
    text = (
        'vllm:num_requests_running{model_name="m"} 1\nvllm:num_requests_waiting{model_name="m"} 2\n'
    )
    (reading,) = engines.read(EngineKind.VLLM, text)
    assert reading.kv_usage is None
    assert reading.prefix_cache_hits_total is None
    assert reading.ttft_sum_s is None
    assert reading.kv_capacity_tokens is None


def test_nan_values_are_dropped_not_published() -> None:
    text = (
        'vllm:num_requests_running{model_name="m"} 1\n'
        'vllm:num_requests_waiting{model_name="m"} 0\n'
        'vllm:kv_cache_usage_perc{model_name="m"} NaN\n'
    )
    (reading,) = engines.read(EngineKind.VLLM, text)
    assert reading.kv_usage is None


def test_a_page_without_the_queue_gauges_is_a_mapping_error() -> None:
    with pytest.raises(MappingError):
        engines.read(EngineKind.VLLM, fixture_page("sglang_dp2_tp2.txt"))
    with pytest.raises(MappingError):
        engines.read(EngineKind.VLLM, fixture_page("garbage.html"))


def test_a_truncated_page_is_a_parse_error(vllm_page: str) -> None:
    cut = vllm_page[: vllm_page.index("vllm:num_requests_running{") + 40]
    with pytest.raises(PromParseError):
        engines.read(EngineKind.VLLM, cut)


def test_sglang_reads_each_dp_rank_from_tp_rank_zero() -> None:
    text = fixture_page("sglang_dp2_tp2.txt")
    readings = engines.read(EngineKind.SGLANG, text)
    assert [r.key for r in readings] == [RankKey("qwen", 0), RankKey("qwen", 1)]
    rank0, rank1 = readings
    assert (rank0.running, rank0.waiting, rank0.kv_usage) == (5, 0, 0.25)
    assert (rank1.running, rank1.waiting, rank1.kv_usage) == (9, 7, 0.75)
    assert rank0.kv_capacity_tokens == 161721
    assert rank0.prompt_tokens_total == 8128902
    assert (rank1.ttft_sum_s, rank1.ttft_count) == (3.0, 10)
    # cache_hit_rate is a ratio, not the cumulative counts a snapshot carries.
    assert rank0.prefix_cache_hits_total is None


def test_sglang_loads_replace_the_gauges_per_rank() -> None:
    readings = engines.read(EngineKind.SGLANG, fixture_page("sglang_dp2_tp2.txt"))
    loads, version = sglang.parse_loads((FIXTURES / "sglang_loads.json").read_bytes())
    merged = sglang.merge_loads(readings, loads, version)
    assert [(r.running, r.waiting, r.kv_usage) for r in merged] == [(6, 1, 0.26), (9, 8, 0.748)]
    assert all(r.engine_version == "0.5.23" for r in merged)
    assert merged[0].prompt_tokens_total == readings[0].prompt_tokens_total


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b'{"loads": {}}', b'{"loads": [1]}', b'{"loads": [{"dp_rank": -1}]}'],
)
def test_sglang_loads_with_the_wrong_shape_are_rejected(body: bytes) -> None:
    with pytest.raises(sglang.LoadsError):
        sglang.parse_loads(body)


def test_sglang_loads_ignore_non_numbers() -> None:
    readings = engines.read(EngineKind.SGLANG, fixture_page("sglang_dp2_tp2.txt"))
    loads = {0: {"num_running_reqs": "7", "token_usage": float("nan"), "num_waiting_reqs": True}}
    merged = sglang.merge_loads(readings, loads, None)
    assert (merged[0].running, merged[0].waiting, merged[0].kv_usage) == (5, 0, 0.25)


def test_tgi_queue_and_token_budget_with_the_model_from_the_agent() -> None:
    (reading,) = engines.read(EngineKind.TGI, fixture_page("tgi_3.x.txt"), "bigscience/bloom")
    assert reading.key == RankKey("bigscience/bloom")
    assert (reading.running, reading.waiting) == (8, 5)
    assert reading.kv_capacity_tokens == 16000
    assert (reading.prompt_tokens_total, reading.generation_tokens_total) == (6400, 23600)
    assert reading.kv_usage is None  # TGI has no KV-usage gauge
    assert reading.ttft_sum_s is None


def test_tgi_without_a_model_name_publishes_nothing() -> None:
    with pytest.raises(MappingError):
        engines.read(EngineKind.TGI, fixture_page("tgi_3.x.txt"))


def test_llamacpp_current_and_older_builds() -> None:
    (current,) = engines.read(EngineKind.LLAMACPP, fixture_page("llamacpp.txt"), "qwen.gguf")
    assert (current.running, current.waiting) == (2, 1)
    assert (current.prompt_tokens_total, current.generation_tokens_total) == (1234, 5678)
    assert current.kv_usage is None
    (older,) = engines.read(EngineKind.LLAMACPP, fixture_page("llamacpp_old_kv.txt"), "q")
    assert older.kv_usage == 0.375


def test_ray_serve_llm_gives_one_reading_per_replica_and_model() -> None:
    text = fixture_page("ray_serve_llm_2.60.txt")
    readings = engines.read(EngineKind.RAY_SERVE, text)
    keys = [(r.key.model, r.key.replica) for r in readings]
    assert keys == [("tiny-a", "thnmip3c"), ("tiny-a", "zlilrfz4"), ("tiny-b", "p7511c0g")]
    for reading in readings:
        labels = {"ReplicaId": reading.key.replica, "model_name": reading.key.model}
        assert reading.prompt_tokens_total == _value(text, "ray_vllm_prompt_tokens_total", **labels)
        assert reading.prefix_cache_hits_total == _value(
            text, "ray_vllm_prefix_cache_hits_total", **labels
        )
        assert reading.kv_usage == _value(text, "ray_vllm_kv_cache_usage_perc", **labels)
        assert reading.running == _value(text, "ray_vllm_num_requests_running", **labels)


def test_ray_serve_without_vllm_reads_the_replica_gauge() -> None:
    text = "".join(
        line + "\n"
        for line in fixture_page("ray_serve_llm_2.60.txt").splitlines()
        if not line.startswith("ray_vllm_")
    )
    readings = engines.read(EngineKind.RAY_SERVE, text)
    assert {r.key.replica for r in readings} == {"thnmip3c", "zlilrfz4", "p7511c0g"}
    assert all(r.key.model.startswith("LLMServer:") for r in readings)
    assert all(r.running == 0 and r.waiting is None for r in readings)
