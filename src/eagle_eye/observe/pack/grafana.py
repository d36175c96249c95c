"""Grafana dashboards: tables of panel specs in, dashboard JSON out through the Grafana
Foundation SDK (``grafana_foundation_sdk``).

Dashboards are tables of ``Panel`` specs (title, queries, unit, kind); the dashboard
modules read as lists of questions and the PromQL that answers them. ``dashboard_model``
turns a table into the SDK's ``Dashboard`` model with its builders (panels, rows,
template variables, datasource references, units, ids) and ``build`` encodes it the way
Grafana imports it (and the sidecar loads it from a ConfigMap).

Our part, where the SDK has none that fits: the panel grid. The SDK's automatic layout
wraps to the next line only after a panel has crossed the 24-column edge, so a row of
uneven widths would overflow it; ``_place`` wraps before a panel would cross it and hands
the SDK explicit positions. The SDK's variable model has no ``definition`` field (the
query as the variables list displays it), so dashboards carry the query only.

Queries may use ``$namespace``, ``$model``, ``$instance`` (regex variables whose "All"
value is ``.*``, which also matches series without the label) and ``$__rate_interval``.
``expand`` expands them the way Grafana would for the integration test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from grafana_foundation_sdk.builders import bargauge, heatmap, prometheus, stat, table, timeseries
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_models
from grafana_foundation_sdk.models import dashboard as dashboard_models
from grafana_foundation_sdk.models import prometheus as prometheus_models

DATASOURCE: Final = dashboard_models.DataSourceRef(type_val="prometheus", uid="${datasource}")
"""Every query goes to the Prometheus the ``datasource`` variable selects."""
GRID_WIDTH: Final = 24
"""Grafana's grid is 24 columns wide."""
REFRESH: Final = "10s"
TIME_RANGE: Final = ("now-1h", "now")
TAG: Final = "eagle-eye"
"""Every dashboard carries it; the dashboards link to each other through it."""

PanelKind: TypeAlias = Literal["timeseries", "stat", "heatmap", "table", "bargauge"]


@dataclass(frozen=True, slots=True)
class Query:
    expr: str
    """PromQL, with the dashboard variables in it."""
    legend: str = ""
    """Legend template; empty lets Grafana name the series (``__auto``)."""
    instant: bool = False
    """One value now (tables) rather than a range."""
    exemplar: bool = False
    """Also fetch the series' exemplars: with the router's trace-id exemplars, a dot on
    the graph links to the trace (Grafana's Prometheus data source, ``exemplarTraceIdDestinations``
    on label ``trace_id``; Prometheus with ``--enable-feature=exemplar-storage``)."""


@dataclass(frozen=True, slots=True)
class Panel:
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    """A Grafana unit id: ``s``, ``ms``, ``reqps``, ``percentunit`` (0-1), ``short``."""
    kind: PanelKind = "timeseries"
    width: int = 8
    """Grid columns (of 24)."""
    height: int = 8
    """Grid rows."""
    max_value: float | None = None
    """Upper end of the value axis (with 0 as the lower end); None lets Grafana choose."""


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
    tags: tuple[str, ...] = (TAG,)
    links: tuple[str, ...] = field(default=())


def q(expr: str, legend: str = "", *, instant: bool = False, exemplar: bool = False) -> Query:
    return Query(expr, legend, instant, exemplar)


_PanelBuilder: TypeAlias = (
    timeseries.Panel | heatmap.Panel | stat.Panel | table.Panel | bargauge.Panel
)
"""The SDK's panel builders we use; they share the panel-level setters (title, unit, ...)."""


# The SDK's string enums derive from ``enum.StrEnum`` (Python 3.11); mypy, checking for 3.10,
# types their members as plain ``str``, so they are built from their values instead.


def _timeseries(panel: Panel) -> _PanelBuilder:
    legend = common_builders.VizLegendOptions()
    legend.display_mode(common_models.LegendDisplayMode("list"))
    legend.placement(common_models.LegendPlacement("bottom"))
    legend.show_legend(True)
    tooltip = common_builders.VizTooltipOptions()
    tooltip.mode(common_models.TooltipDisplayMode("multi"))
    tooltip.sort(common_models.SortOrder("desc"))
    builder = timeseries.Panel()
    builder.legend(legend)
    builder.tooltip(tooltip)
    return builder


def _heatmap(panel: Panel) -> _PanelBuilder:
    """Buckets come pre-computed from Prometheus (``format: heatmap``), not calculated."""
    y_axis = heatmap.YAxisConfig()
    y_axis.unit(panel.unit)
    builder = heatmap.Panel()
    builder.calculate(False)
    builder.y_axis(y_axis)
    return builder


_KINDS: Final[dict[PanelKind, Callable[[Panel], _PanelBuilder]]] = {
    "timeseries": _timeseries,
    "heatmap": _heatmap,
    "stat": lambda _: stat.Panel(),
    "table": lambda _: table.Panel(),
    "bargauge": lambda _: bargauge.Panel(),
}
_QUERY_FORMATS: Final[dict[PanelKind, prometheus_models.PromQueryFormat]] = {
    "heatmap": prometheus_models.PromQueryFormat("heatmap"),
    "table": prometheus_models.PromQueryFormat("table"),
}


def _target(query: Query, ref_id: str, kind: PanelKind) -> prometheus.Dataquery:
    target = prometheus.Dataquery()
    target.ref_id(ref_id)
    target.datasource(DATASOURCE)
    target.expr(query.expr)
    target.legend_format(query.legend or "__auto")
    if query.instant:
        target.instant()
    else:
        target.range()
    if query.exemplar:
        target.exemplar(True)
    if kind in _QUERY_FORMATS:
        target.format(_QUERY_FORMATS[kind])
    return target


def _panel(panel: Panel, panel_id: int, grid: dashboard_models.GridPos) -> _PanelBuilder:
    builder = _KINDS[panel.kind](panel)
    builder.id(panel_id)
    builder.title(panel.title)
    builder.description(panel.description)
    builder.datasource(DATASOURCE)
    builder.grid_pos(grid)
    builder.unit(panel.unit)
    if panel.max_value is not None:
        builder.min(0)
        builder.max(panel.max_value)
    for i, query in enumerate(panel.queries):
        builder.with_target(_target(query, chr(ord("A") + i), panel.kind))
    return builder


def _query_variable(var: Variable) -> dashboard_builders.QueryVariable:
    deps = ", ".join(f'{label}=~"${name}"' for label, name in var.depends_on)
    selector = f"{var.metric}{{{deps}}}" if deps else var.metric
    builder = dashboard_builders.QueryVariable(var.name)
    builder.label(var.name)
    builder.datasource(DATASOURCE)
    builder.query(
        {"query": f"label_values({selector}, {var.label})", "refId": f"{var.name}-values"}
    )
    builder.refresh(dashboard_models.VariableRefresh.ON_TIME_RANGE_CHANGED)
    builder.include_all(True)
    builder.multi(True)
    builder.all_value(".*")
    builder.current(dashboard_models.VariableOption(selected=True, text=["All"], value=["$__all"]))
    builder.sort(dashboard_models.VariableSort.ALPHABETICAL_ASC)
    return builder


def _datasource_variable() -> dashboard_builders.DatasourceVariable:
    builder = dashboard_builders.DatasourceVariable("datasource")
    builder.label("Data source")
    builder.type("prometheus")
    builder.hide(dashboard_models.VariableHide.DONT_HIDE)
    return builder


def _place(dashboard: Dashboard) -> Iterator[tuple[Row | Panel, dashboard_models.GridPos]]:
    """Rows full width; panels left to right, wrapping before one would cross the edge.

    Invariant: ``y`` is the top of the current line, ``line_height`` its tallest panel.
    """
    y = 0
    for row in dashboard.rows:
        yield row, dashboard_models.GridPos(h=1, w=GRID_WIDTH, x=0, y=y)
        y += 1
        x = line_height = 0
        for panel in row.panels:
            if x + panel.width > GRID_WIDTH:
                x, y, line_height = 0, y + line_height, 0
            yield panel, dashboard_models.GridPos(h=panel.height, w=panel.width, x=x, y=y)
            x += panel.width
            line_height = max(line_height, panel.height)
        y += line_height


def _dashboard_links() -> dashboard_builders.DashboardLink:
    builder = dashboard_builders.DashboardLink("Eagle Eye")
    builder.type(dashboard_models.DashboardLinkType("dashboards"))
    builder.tags([TAG])
    builder.as_dropdown(True)
    return builder


def dashboard_model(dashboard: Dashboard) -> dashboard_models.Dashboard:
    """The SDK's model of ``dashboard``: panel ids in layout order, rows expanded."""
    builder = dashboard_builders.Dashboard(dashboard.title)
    builder.uid(dashboard.uid)
    builder.description(dashboard.description)
    builder.tags(list(dashboard.tags))
    builder.timezone("browser")
    builder.editable()
    builder.tooltip(dashboard_models.DashboardCursorSync.CROSSHAIR)
    builder.refresh(REFRESH)
    builder.time(*TIME_RANGE)
    builder.version(1)
    builder.annotations([])
    builder.link(_dashboard_links())
    builder.with_variable(_datasource_variable())
    for var in dashboard.variables:
        builder.with_variable(_query_variable(var))
    for panel_id, (item, grid) in enumerate(_place(dashboard), start=1):
        if isinstance(item, Row):
            row = dashboard_builders.Row(item.title)
            row.id(panel_id)
            row.grid_pos(grid)
            row.collapsed(False)
            builder.with_row(row)
        else:
            builder.with_panel(_panel(item, panel_id, grid))
    return builder.build()


def build(dashboard: Dashboard) -> dict[str, Any]:
    """The dashboard JSON Grafana imports (and the sidecar loads from a ConfigMap)."""
    out: dict[str, Any] = json.loads(JSONEncoder().encode(dashboard_model(dashboard)))
    return out


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
