"""Structure of the recording and alert rules (their behaviour is proven by promtool)."""

from __future__ import annotations

import re

from eagle_eye.observe.pack.alerts import ALERTS
from eagle_eye.observe.pack.promtool import render_template
from eagle_eye.observe.pack.rules import recorded_names, recording_groups
from eagle_eye.observe.pack.sources import SIGNALS, le_regex, union

REQUIRED_ALERTS = {
    "EagleEyeEngineDown",
    "EagleEyeNoHealthyBackend",
    "EagleEyeQueueBuildUp",
    "EagleEyeKVCacheSaturated",
    "EagleEyeTTFTBudgetBurnFast",
    "EagleEyeTTFTBudgetBurnSlow",
    "EagleEyeITLBudgetBurnFast",
    "EagleEyeITLBudgetBurnSlow",
    "EagleEyePreemptionStorm",
    "EagleEyeHighErrorRate",
    "EagleEyeRoutingMetricsStale",
    "EagleEyeAcceleratorIdleWhileQueued",
    "EagleEyeKVHighComputeLow",
    "EagleEyeSlowModelLoad",
}


def test_every_recorded_series_has_the_eagle_eye_prefix() -> None:
    names = recorded_names()
    assert names
    assert all(name.startswith("eagle_eye:") for name in names)


def test_vllm_current_and_removed_names_are_both_read() -> None:
    exprs = "\n".join(r["expr"] for g in recording_groups() for r in g.rules)
    for name in (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "vllm:gpu_prefix_cache_hits_total",
        "vllm:time_per_output_token_seconds",
        "ray_vllm_kv_cache_usage_perc",
        "sglang:token_usage",
        "tgi_queue_size",
        "llamacpp:requests_deferred",
        "DCGM_FI_DEV_GPU_UTIL",
        "npu_chip_info_utilization",
    ):
        assert name in exprs


def test_preemption_rule_uses_the_exported_counter_name() -> None:
    """llm-d's rule queries vllm:num_preemptions (no _total), which matches nothing."""
    exprs = [r["expr"] for g in recording_groups() for r in g.rules]
    assert any("vllm:num_preemptions_total" in e for e in exprs)
    assert not any(re.search(r"vllm:num_preemptions(?!_total)", e) for e in exprs)


def test_each_engine_rule_is_labelled_with_its_engine_kind() -> None:
    engine_group = recording_groups()[0]
    kinds = {r["labels"]["engine_kind"] for r in engine_group.rules}
    assert kinds == {"vllm", "ray-vllm", "sglang", "tgi", "llamacpp"}
    assert all(signal.sources for signal in SIGNALS)


def test_union_prefers_the_first_name() -> None:
    assert union(("a",)) == "a"
    assert union(("a", "b"), "rate({name}[5m])") == "(rate(a[5m])) or (rate(b[5m]))"


def test_le_regex_matches_every_formatting_of_a_bucket_bound() -> None:
    assert le_regex(1.0) == "1|1\\\\.0"
    assert le_regex(0.2) == "0\\\\.2"


def test_every_required_alert_exists_with_cases_that_fire_and_stay_silent() -> None:
    names = {a.name for a in ALERTS}
    assert names >= REQUIRED_ALERTS
    for alert in ALERTS:
        assert alert.fires.fired, f"{alert.name}: no firing case"
        assert alert.fires.series and alert.silent.series
        assert alert.silent.fired == ()
        assert alert.severity in ("warning", "critical")
        for text in (alert.summary, alert.description, alert.runbook):
            assert len(text) > 20


def test_annotations_only_reference_labels_the_alert_carries() -> None:
    for alert in ALERTS:
        labels = alert.fires.fired[0]
        for key, text in alert.annotations().items():
            refs = re.findall(r"\$labels\.(\w+)", text)
            missing = [r for r in refs if r not in labels]
            assert not missing, f"{alert.name}.{key} uses {missing}"
            assert "{{" not in render_template(text, labels), f"{alert.name}.{key}"
