"""Prometheus ``query_range`` matrices turned into the history's column format."""

from __future__ import annotations

from typing import Any

from eagle_eye.observe.dashboard.app import PROMETHEUS_QUERIES, align_range


def results_for(**by_series: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """One matrix per query, empty unless given by series name."""
    return [by_series.get(name, []) for name, _, _ in PROMETHEUS_QUERIES]


def test_columns_follow_the_step_grid_with_gaps_as_none() -> None:
    results = results_for(
        **{
            "fleet.running": [{"metric": {}, "values": [[100, "3"], [110, "5"]]}],
        }
    )
    data = align_range(results, start_s=100.0, end_s=130.0, step_s=10.0)
    assert data["t"] == [100.0, 110.0, 120.0, 130.0]
    assert data["series"] == {"fleet.running": [3.0, 5.0, None, None]}
    assert data["step_s"] == 10.0


def test_per_instance_series_are_keyed_by_host_port_whatever_the_label_holds() -> None:
    results = results_for(
        **{
            "running@{}": [{"metric": {"instance": "10.0.0.5:8000"}, "values": [[60, "2"]]}],
            "decisions_per_s@{}": [
                {"metric": {"exported_instance": "http://10.0.0.5:8000/"}, "values": [[60, "7"]]}
            ],
        }
    )
    data = align_range(results, start_s=60.0, end_s=60.0, step_s=1.0)
    assert data["series"] == {
        "running@10.0.0.5:8000": [2.0],
        "decisions_per_s@10.0.0.5:8000": [7.0],
    }


def test_non_numeric_and_non_finite_values_are_left_out() -> None:
    results = results_for(
        **{"fleet.ttft_p50_s": [{"metric": {}, "values": [[1, "NaN"], [2, "x"], [3, "0.5"]]}]}
    )
    data = align_range(results, start_s=1.0, end_s=3.0, step_s=1.0)
    assert data["series"]["fleet.ttft_p50_s"] == [None, None, 0.5]


def test_every_query_names_a_known_series_family() -> None:
    for name, query, label in PROMETHEUS_QUERIES:
        family = name.split("@")[0].removeprefix("fleet.")
        assert family and query
        assert ("@" in name) == (label is not None)
