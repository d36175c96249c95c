"""A small Grafana dashboard model: specs in, dashboard JSON (schema 39) out.

Dashboards are tables of ``Panel`` specs (title, queries, unit, kind); layout, ids,
datasource references and template variables are filled in here so the dashboard modules
read as lists of questions and the PromQL that answers them.

Queries may use ``$namespace``, ``$model``, ``$instance`` (regex variables whose "All"
value is ``.*``, which also matches series without the label) and ``$__rate_interval``.
``panel_queries`` expands them the way Grafana would for the integration test.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

DATASOURCE: Final = {"type": "prometheus", "uid": "${datasource}"}
GRID_WIDTH: Final = 24


@dataclass(frozen=True, slots=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False


@dataclass(frozen=True, slots=True)
class Panel:
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: str = "timeseries"
    """``timeseries``, ``stat``, ``heatmap``, ``table`` or ``bargauge``."""
    width: int = 8
    height: int = 8
    max_value: float | None = None


@dataclass(frozen=True, slots=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True, slots=True)
class Variable:
    """A regex template variable filled from ``label_values(metric{deps}, label)``."""

    name: str
    label: str
    metric: str
    depends_on: tuple[tuple[str, str], ...] = ()
    """(label, variable) pairs that narrow the choices, e.g. ``("namespace", "namespace")``."""


@dataclass(frozen=True, slots=True)
class Dashboard:
    uid: str
    title: str
    description: str
    variables: tuple[Variable, ...]
    rows: tuple[Row, ...]
    tags: tuple[str, ...] = ("eagle-eye",)
    links: tuple[str, ...] = field(default=())


def q(expr: str, legend: str = "", *, instant: bool = False) -> Query:
    return Query(expr, legend, instant)


def _variable(var: Variable) -> dict[str, Any]:
    deps = ", ".join(f'{label}=~"${name}"' for label, name in var.depends_on)
    selector = f"{var.metric}{{{deps}}}" if deps else var.metric
    query = f"label_values({selector}, {var.label})"
    return {
        "name": var.name,
        "label": var.name,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": f"{var.name}-values"},
        "definition": query,
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def _datasource_variable() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
    }


def _panel(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    targets = []
    for i, query in enumerate(panel.queries):
        target: dict[str, Any] = {
            "refId": chr(ord("A") + i),
            "datasource": DATASOURCE,
            "expr": query.expr,
            "legendFormat": query.legend or "__auto",
            "range": not query.instant,
            "instant": query.instant,
        }
        if panel.kind == "heatmap":
            target["format"] = "heatmap"
        if panel.kind == "table":
            target["format"] = "table"
        targets.append(target)
    defaults: dict[str, Any] = {"unit": panel.unit}
    if panel.max_value is not None:
        defaults["min"] = 0
        defaults["max"] = panel.max_value
    out: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {},
    }
    if panel.kind == "timeseries":
        out["options"] = {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    elif panel.kind == "heatmap":
        out["options"] = {"calculate": False, "yAxis": {"unit": panel.unit}}
    return out


def build(dashboard: Dashboard) -> dict[str, Any]:
    """The dashboard JSON Grafana imports (and the sidecar loads from a ConfigMap)."""
    panels: list[dict[str, Any]] = []
    panel_id = 1
    y = 0
    for row in dashboard.rows:
        panels.append(
            {
                "id": panel_id,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y},
                "panels": [],
            }
        )
        panel_id += 1
        y += 1
        x = 0
        row_height = 0
        for panel in row.panels:
            if x + panel.width > GRID_WIDTH:
                x = 0
                y += row_height
                row_height = 0
            panels.append(_panel(panel, panel_id, x, y))
            panel_id += 1
            x += panel.width
            row_height = max(row_height, panel.height)
        y += row_height
    return {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": list(dashboard.tags),
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "annotations": {"list": []},
        "links": [
            {"type": "dashboards", "tags": ["eagle-eye"], "asDropdown": True, "title": "Eagle Eye"}
        ],
        "templating": {
            "list": [_datasource_variable(), *(_variable(v) for v in dashboard.variables)]
        },
        "panels": panels,
    }


def iter_panels(dashboard: Dashboard) -> Iterator[Panel]:
    for row in dashboard.rows:
        yield from row.panels


def expand(expr: str, *, rate_interval: str = "1m") -> str:
    """``expr`` with the dashboard variables set to "All", as Grafana sends it."""
    return (
        expr.replace("$__rate_interval", rate_interval)
        .replace("$namespace", ".*")
        .replace("$model", ".*")
        .replace("$instance", ".*")
    )
