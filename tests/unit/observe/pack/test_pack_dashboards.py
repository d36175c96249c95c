"""Shape of the generated Grafana dashboards."""

from __future__ import annotations

from eagle_eye.observe.pack.coverage import REAL_CLUSTER_PANELS
from eagle_eye.observe.pack.dashboards import DASHBOARDS
from eagle_eye.observe.pack.grafana import (
    Dashboard,
    Panel,
    Query,
    Row,
    build,
    expand,
    iter_panels,
)

VLLM_ENGINE_METRICS = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:request_inference_time_seconds",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:request_params_max_tokens",
    "vllm:request_params_n",
    "vllm:request_success_total",
    "vllm:iteration_tokens_total",
    "vllm:prefix_cache_hits_total",
    "vllm:num_preemptions_total",
    "vllm:lora_requests_info",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:cache_config_info",
)


def test_the_five_dashboards_exist_with_unique_uids() -> None:
    uids = [d.uid for d in DASHBOARDS]
    assert len(set(uids)) == 5
    assert {"eagle-eye-fleet", "eagle-eye-engine", "eagle-eye-router"} <= set(uids)
    assert {"eagle-eye-kv-accelerator", "eagle-eye-ray-serve"} <= set(uids)


def test_every_dashboard_has_namespace_model_and_instance_variables() -> None:
    for dashboard in DASHBOARDS:
        variables = [v["name"] for v in build(dashboard)["templating"]["list"]]
        assert variables == ["datasource", "namespace", "model", "instance"], dashboard.uid


def test_panels_are_laid_out_on_the_grid_with_unique_ids() -> None:
    for dashboard in DASHBOARDS:
        panels = build(dashboard)["panels"]
        ids = [p["id"] for p in panels]
        assert len(ids) == len(set(ids))
        for p in panels:
            grid = p["gridPos"]
            assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24
            if p["type"] != "row":
                assert p["targets"] and all(t["expr"] for t in p["targets"])
                assert p["description"]


def test_the_engine_view_covers_everything_vllm_reports() -> None:
    engine = next(d for d in DASHBOARDS if d.uid == "eagle-eye-engine")
    exprs = "\n".join(query.expr for panel in iter_panels(engine) for query in panel.queries)
    missing = [m for m in VLLM_ENGINE_METRICS if m not in exprs]
    assert missing == []


def test_expand_sets_every_variable_to_all() -> None:
    out = expand('rate(x{a=~"$namespace", b=~"$model", c=~"$instance"}[$__rate_interval])')
    assert out == 'rate(x{a=~".*", b=~".*", c=~".*"}[1m])'


def test_the_real_cluster_list_names_existing_panels() -> None:
    titles = {(d.uid, p.title) for d in DASHBOARDS for p in iter_panels(d)}
    assert set(REAL_CLUSTER_PANELS) <= titles


def test_a_panel_that_would_cross_the_grid_edge_starts_a_new_line() -> None:
    """Uneven widths: the 16-wide panel after a 12-wide one wraps instead of overflowing."""
    query = (Query("up"),)
    dashboard = Dashboard(
        uid="layout",
        title="Layout",
        description="Layout check.",
        variables=(),
        rows=(
            Row("first", (Panel("a", "a", query, width=12), Panel("b", "b", query, width=16))),
            Row("second", (Panel("c", "c", query, width=24, height=4),)),
        ),
    )
    grids = [(p["title"], p["gridPos"]) for p in build(dashboard)["panels"]]
    assert grids == [
        ("first", {"h": 1, "w": 24, "x": 0, "y": 0}),
        ("a", {"h": 8, "w": 12, "x": 0, "y": 1}),
        ("b", {"h": 8, "w": 16, "x": 0, "y": 9}),
        ("second", {"h": 1, "w": 24, "x": 0, "y": 17}),
        ("c", {"h": 4, "w": 24, "x": 0, "y": 18}),
    ]


def test_every_query_targets_the_datasource_variable_with_its_panel_format() -> None:
    for dashboard in DASHBOARDS:
        for panel in build(dashboard)["panels"]:
            for target in panel.get("targets", []):
                assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
                if panel["type"] in ("heatmap", "table"):
                    assert target["format"] == panel["type"]
