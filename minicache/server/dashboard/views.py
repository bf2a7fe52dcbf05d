"""What each dashboard page shows, read through the store and engine APIs the admin endpoints use.

These functions block (they read the store) and return plain dicts for the templates; the routes run
them in a worker thread. Nothing here writes.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from minicache.store import Entry, Group

PER_PAGE = 50
NAME_CHARS = 90  # a group's name: its representative request, cut to fit a table cell
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d(?:[\d,]*\d)?(?:\.\d+)?")
ROUTES = ("hit", "miss", "fallback", "step-reuse", "step-patch", "step-skip")
_FORMATTER = HtmlFormatter(cssclass="code", nowrap=False)
HIGHLIGHT_CSS = _FORMATTER.get_style_defs(".code")


def metric_samples(metric: Any) -> list[Any]:
    """A prometheus_client metric's samples (its public ``collect`` API)."""
    return [s for family in metric.collect() for s in family.samples]


def saved_tokens(metrics: Any, tenant: str) -> float:
    """The server's estimate of target tokens its hits saved for ``tenant`` (since it started)."""
    return sum(
        s.value
        for s in metric_samples(metrics.saved)
        if s.name.endswith("_total") and s.labels.get("tenant") == tenant
    )


def latency_by_route(metrics: Any) -> list[dict[str, Any]]:
    """Per route: requests, mean and bucket-bound p50/p95 of the whole solve (the ``total`` stage)."""
    rows: dict[str, dict[str, Any]] = {}
    for s in metric_samples(metrics.stage):
        if s.labels.get("stage") != "total":
            continue
        row = rows.setdefault(
            s.labels["route"], {"route": s.labels["route"], "count": 0, "sum": 0.0, "buckets": []}
        )
        if s.name.endswith("_count"):
            row["count"] = int(s.value)
        elif s.name.endswith("_sum"):
            row["sum"] = s.value
        elif s.name.endswith("_bucket"):
            row["buckets"].append((float(s.labels["le"]), s.value))
    out = []
    for route in sorted(rows, key=lambda r: ROUTES.index(r) if r in ROUTES else len(ROUTES)):
        row = rows[route]
        if not row["count"]:
            continue
        buckets = sorted(row.pop("buckets"))
        row["mean"] = row["sum"] / row["count"]
        row["p50"] = _quantile_bound(buckets, row["count"], 0.50)
        row["p95"] = _quantile_bound(
            buckets, row["count"], 0.95
        )  # (bound, beyond the largest finite one)
        out.append(row)
    return out


def _quantile_bound(buckets: list[tuple[float, float]], count: int, q: float) -> tuple[float, bool]:
    """The upper bound of the histogram bucket holding the q-quantile (what a histogram can say), and
    whether it lies beyond the largest finite bound (then that bound is given: "more than")."""
    finite = [b for b in buckets if math.isfinite(b[0])]
    for bound, cumulative in finite:
        if cumulative >= q * count:
            return bound, False
    return (finite[-1][0] if finite else math.inf), True


def overview(
    engine: Any, metrics: Any, tracker: Any, tenant: str, tenants: list[str] | None, unit: str
) -> dict[str, Any]:
    """Counters of ``tenant``, its requests over time, and (for admins: ``tenants`` given) latency by
    route and one row per tenant."""
    tracker.sample()
    stats = engine.stats(tenant)
    stats["tokens_saved"] = saved_tokens(metrics, tenant)
    n = 60 if unit == "minute" else 48
    chart = bar_chart(tracker.series([tenant], unit, n), unit)
    per_tenant = []
    for t in tenants or []:
        counters = engine.store.counters(t)
        requests = counters.get("requests", 0)
        per_tenant.append(
            {
                "tenant": t,
                "requests": requests,
                "hits": counters.get("hits", 0),
                "hit_rate": counters.get("hits", 0) / requests if requests else 0.0,
                "fallbacks": counters.get("fallbacks", 0),
                "errors": counters.get("errors", 0),
                "target_tokens": counters.get("target_tokens", 0),
                "tokens_saved": saved_tokens(metrics, t),
            }
        )
    return {
        "stats": stats,
        "chart": chart,
        "unit": unit,
        "per_tenant": per_tenant,
        "latency": latency_by_route(metrics) if tenants is not None else None,
        "frozen": engine.config.frozen,
    }


# -- charts -------------------------------------------------------------------------------------
@dataclass
class Bar:
    x: float
    width: float
    segments: list[tuple[str, float, float]]  # (css class, y, height)
    title: str


CHART_W, CHART_H, CHART_PAD = 720, 160, 28
STACK = (
    ("hits", "seg-hit"),
    ("misses", "seg-miss"),
    ("fallbacks", "seg-fallback"),
    ("errors", "seg-error"),
)


def bar_chart(series: list[tuple[int, dict[str, float]]], unit: str) -> dict[str, Any]:
    """Stacked bars (hits, misses, fallbacks, errors) per bucket, as geometry for an inline SVG."""
    peak = max([sum(v[k] for k, _ in STACK) for _, v in series] + [1.0])
    scale = (CHART_H - CHART_PAD) / peak
    slot = (CHART_W - CHART_PAD) / max(len(series), 1)
    bars = []
    for i, (start, values) in enumerate(series):
        y = CHART_H - CHART_PAD / 2
        segments = []
        for key, css in STACK:
            h = values[key] * scale
            if h > 0:
                y -= h
                segments.append((css, y, h))
        label = time.strftime("%H:%M" if unit == "minute" else "%d %b %H:00", time.gmtime(start))
        title = (
            f"{label} UTC: "
            + ", ".join(f"{int(values[k])} {k}" for k, _ in STACK)
            + f", {int(values['tokens_saved'])} target tokens saved"
        )
        bars.append(Bar(CHART_PAD + i * slot, max(slot - 1, 1), segments, title))
    ticks = (
        [
            (CHART_PAD + i * slot, time.strftime("%H:%M", time.gmtime(series[i][0])))
            for i in range(0, len(series), max(len(series) // 6, 1))
        ]
        if series
        else []
    )
    totals = {
        k: int(sum(v[k] for _, v in series))
        for k in ("requests", "hits", "misses", "fallbacks", "errors", "tokens_saved")
    }
    return {
        "bars": bars,
        "ticks": ticks,
        "peak": int(peak),
        "width": CHART_W,
        "height": CHART_H,
        "pad": CHART_PAD,
        "totals": totals,
    }


# -- groups -------------------------------------------------------------------------------------
def masked(text: str) -> str:
    """A request with its numbers masked: what every request of a group shares."""
    one_line = " ".join(text.split())
    return _NUMBER.sub("#", one_line)


def group_name(engine: Any, tenant: str, group: Group | None, group_id: str) -> str:
    """What a person calls a group: the client's label, else its earliest request with numbers
    masked (a group is requests that differ only in their values), else its id."""
    if group is not None and group.label:
        return group.label
    examples = engine.store.examples(tenant, group_id)
    if not examples:
        return group_id
    name = masked(str(examples[0].question))
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def building(engine: Any, tenant: str) -> set[str]:
    """Groups of ``tenant`` with a build queued or running in this process (none for an engine that
    does not build here)."""
    groups = getattr(engine, "building_groups", None)
    return set(groups(tenant)) if groups is not None else set()


def group_status(group: Group, entry: Entry | None, now: float, builds: set[str]) -> str:
    """cached (an active entry) | building | uncacheable (until a time) | open (gathering examples)."""
    if entry is not None and entry.status == "active":
        return "cached"
    if group.id in builds:
        return "building"
    if group.status == "uncacheable" and now < group.uncacheable_until:
        return "uncacheable"
    return "open"


def groups_page(engine: Any, tenant: str, page: int, per_page: int = PER_PAGE) -> dict[str, Any]:
    """One page of ``tenant``'s groups, busiest first, each with its current (or latest) entry."""
    now, builds = time.time(), building(engine, tenant)
    groups = engine.store.list_groups(tenant)
    latest: dict[str, Entry] = {}
    hits: dict[str, int] = {}
    for e in engine.store.list_entries(
        tenant
    ):  # oldest first: an active entry wins over older ones
        hits[e.group_id] = hits.get(e.group_id, 0) + e.hits
        if (
            e.status == "active"
            or latest.get(e.group_id) is None
            or latest[e.group_id].status != "active"
        ):
            latest[e.group_id] = e
    rows = []
    for g in groups:
        entry = latest.get(g.id)
        served = hits.get(g.id, 0) + g.n_examples
        rows.append(
            {
                "group": g,
                "entry": entry,
                "status": group_status(g, entry, now, builds),
                "hits": hits.get(g.id, 0),
                "hit_rate": hits.get(g.id, 0) / served if served else 0.0,
            }
        )
    rows.sort(key=lambda r: -(r["hits"] + r["group"].n_examples))
    pages = max(1, math.ceil(len(rows) / per_page))
    page = min(max(page, 1), pages)
    counts = {
        s: sum(r["status"] == s for r in rows)
        for s in ("cached", "building", "uncacheable", "open")
    }
    shown = rows[(page - 1) * per_page : page * per_page]
    for row in shown:  # one indexed read per shown group, not per group of the tenant
        row["name"] = group_name(engine, tenant, row["group"], row["group"].id)
    return {
        "rows": shown,
        "page": page,
        "pages": pages,
        "total": len(rows),
        "counts": counts,
    }


# -- entries ------------------------------------------------------------------------------------
def highlighted(source: str) -> str:
    """The program as HTML (Pygments escapes the text it wraps)."""
    return highlight(source, PythonLexer(), _FORMATTER)


def entry_page(engine: Any, tenant: str, entry_id: str, recent: int = 10) -> dict[str, Any] | None:
    """An entry of ``tenant`` (None if it has none by that id), its group, the group's active entry
    (when another one is) and its latest requests. Indexed look-ups only: no list of all entries."""
    entry = engine.store.get_entry(tenant, entry_id)
    if entry is None:
        return None
    group = engine.store.get_group(tenant, entry.group_id)
    active = engine.store.active_entry(tenant, entry.group_id)
    examples = engine.store.examples(tenant, entry.group_id)[-recent:][::-1]
    return {
        "entry": entry,
        "group": group,
        "group_name": group_name(engine, tenant, group, entry.group_id),
        "program_html": highlighted(entry.program),
        "active": active if active is not None and active.id != entry.id else None,
        "examples": examples,
        "status": group_status(group, entry, time.time(), building(engine, tenant))
        if group
        else entry.status,
    }
