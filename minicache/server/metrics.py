"""Prometheus metrics, in a registry of the app's own (two apps in one process never share counts).

Counted by the server as requests pass: ``minicache_requests_total{endpoint,tenant,route}`` (route is
hit | miss | fallback | passthrough | step-reuse | step-patch | step-skip | invalid | error),
``minicache_stage_seconds{stage,route}`` (from the engine's timings), target/small tokens used and
target tokens saved (estimate: a hit saves what misses of its group cost on average), HTTP requests
and errors by status. Read from the engine at scrape time:
its per-tenant counters (hits, builds ok/failed, entries, hit rate) and the sandbox's failure counts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from minicache.engine import MiniCache, SolveResult
from minicache.models.compute import CPU_LOCK

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Label values come from fixed sets: a value a client makes up (a method, a path no route serves)
# would otherwise add a series that lives as long as the process.
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
OTHER = "other"
_STAGE_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
)


class EngineCollector(Collector):
    """The engine's own counters (persisted in its store), per tenant, read at scrape time."""

    def __init__(self, engine: MiniCache, tenants: Callable[[], Iterable[str]]) -> None:
        self.engine = engine
        self.tenants = tenants

    def collect(self) -> Iterable[Metric]:
        counters = {
            name: CounterMetricFamily(
                f"minicache_engine_{name}",
                f"Engine counter '{name}' (from the store)",
                labels=["tenant"],
            )
            for name in (
                "requests",
                "hits",
                "misses",
                "fallbacks",
                "errors",
                "evictions",
                "hit_refusals",
                "refusals_overturned",
                "audits",
                "audits_disagreed",
                "probations",
                "probations_failed",
                "generalizations",
                "generalizations_ok",
            )
        }
        builds = CounterMetricFamily(
            "minicache_builds",
            "Entry builds by outcome (from the store)",
            labels=["tenant", "outcome"],
        )
        hit_rate = GaugeMetricFamily(
            "minicache_hit_rate", "hits / requests since the store was created", labels=["tenant"]
        )
        entries = GaugeMetricFamily(
            "minicache_entries_active", "Active cache entries", labels=["tenant"]
        )
        demoted = GaugeMetricFamily(
            "minicache_entries_demoted",
            "Active entries whose audit error bound exceeds delta (no model-chosen hits)",
            labels=["tenant"],
        )
        groups = GaugeMetricFamily("minicache_groups", "Request groups", labels=["tenant"])
        for tenant in sorted(set(self.tenants())):
            stats = self.engine.stats(tenant)
            raw = self.engine.store.counters(tenant)
            for name, family in counters.items():
                family.add_metric([tenant], stats.get(name, raw.get(name, 0)))
            builds.add_metric([tenant, "ok"], stats["builds_ok"])
            builds.add_metric([tenant, "failed"], stats["builds_failed"])
            builds.add_metric(
                [tenant, "declined"], stats["builds_declined"]
            )  # before the small model's checks
            hit_rate.add_metric([tenant], stats["hit_rate"])
            entries.add_metric([tenant], stats["entries_active"])
            demoted.add_metric([tenant], stats.get("entries_demoted", 0))
            groups.add_metric([tenant], stats["groups"])
        yield from counters.values()
        yield from (builds, hit_rate, entries, demoted, groups)
        sandbox = dict(self.engine.sandbox.stats)
        runs = CounterMetricFamily("minicache_sandbox_runs", "Programs run in the sandbox")
        runs.add_metric([], sandbox.get("runs", 0))
        yield runs
        failures = CounterMetricFamily(
            "minicache_sandbox_failures", "Sandbox failures by kind", labels=["kind"]
        )
        for kind in ("errors", "violations", "timeouts", "crashes"):
            failures.add_metric([kind], sandbox.get(kind, 0))
        yield failures
        yields = CounterMetricFamily(
            "minicache_background_yields",
            "Times background work (builds, audits) stepped aside for a waiting request",
        )
        yields.add_metric([], CPU_LOCK.yields)
        yield yields
        frozen = GaugeMetricFamily("minicache_frozen", "1 while builds are frozen")
        frozen.add_metric([], 1.0 if self.engine.config.frozen else 0.0)
        yield frozen


class ServerMetrics:
    def __init__(self, engine: MiniCache, tenants: Callable[[], Iterable[str]]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "minicache_requests",
            "Solve requests by endpoint, tenant and route",
            ["endpoint", "tenant", "route"],
            registry=r,
        )
        self.stage = Histogram(
            "minicache_stage_seconds",
            "Per-stage latency of solve requests",
            ["stage", "route"],
            buckets=_STAGE_BUCKETS,
            registry=r,
        )
        self.target_tokens = Counter(
            "minicache_target_tokens",
            "Target-model tokens used by requests",
            ["tenant"],
            registry=r,
        )
        self.small_tokens = Counter(
            "minicache_small_tokens", "Small-model tokens used by requests", ["tenant"], registry=r
        )
        self.saved = Counter(
            "minicache_target_tokens_saved",
            "Estimated target tokens saved by hits",
            ["tenant"],
            registry=r,
        )
        self.http = Counter(
            "minicache_http_requests",
            "HTTP requests by method, path and status",
            ["method", "path", "status"],
            registry=r,
        )
        self.http_errors = Counter(
            "minicache_http_errors", "HTTP error responses by status", ["status"], registry=r
        )
        self.http_seconds = Histogram(
            "minicache_http_request_seconds",
            "HTTP request latency",
            ["path"],
            buckets=_STAGE_BUCKETS,
            registry=r,
        )
        self.inflight = Gauge("minicache_inflight_requests", "Requests in flight", registry=r)
        r.register(EngineCollector(engine, tenants))
        self._engine = engine
        self._miss_tokens: dict[
            tuple[str, str], tuple[int, int]
        ] = {}  # (tenant, group) -> (sum, n)
        self._lock = threading.Lock()

    # -- solve outcomes ---------------------------------------------------------------------
    def solved(self, endpoint: str, tenant: str, result: SolveResult) -> None:
        """Record a served request (called from the worker thread, so the estimate may read the store)."""
        self.requests.labels(endpoint, tenant, result.route).inc()
        for stage, seconds in result.timings.items():
            self.stage.labels(stage.removesuffix("_s"), result.route).observe(seconds)
        target = int(result.tokens.get("target", 0))
        self.target_tokens.labels(tenant).inc(target)
        self.small_tokens.labels(tenant).inc(int(result.tokens.get("small", 0)))
        key = (tenant, result.group)
        if result.route in ("miss", "fallback", "step-skip") and target:
            with self._lock:
                total, n = self._miss_tokens.get(key, (0, 0))
                self._miss_tokens[key] = (total + target, n + 1)
        elif result.route in ("hit", "step-reuse"):
            self.saved.labels(tenant).inc(self._estimate(tenant, key))

    def _estimate(self, tenant: str, key: tuple[str, str]) -> float:
        with self._lock:
            total, n = self._miss_tokens.get(key, (0, 0))
        if n:
            return total / n
        counters = self._engine.store.counters(
            tenant
        )  # e.g. an imported entry: the tenant's average
        paid = counters.get("misses", 0) + counters.get("fallbacks", 0)
        return counters.get("target_tokens", 0) / paid if paid else 0.0

    def failed(self, endpoint: str, tenant: str, route: str) -> None:
        self.requests.labels(endpoint, tenant, route).inc()

    # -- HTTP -------------------------------------------------------------------------------
    def http_done(self, method: str, path: str, status: int, seconds: float) -> None:
        """Count a response. ``path`` is a route's template (or :data:`OTHER`), never the raw path."""
        method = method if method in HTTP_METHODS else OTHER
        status = status if 100 <= status <= 599 else 500
        self.http.labels(method, path, str(status)).inc()
        self.http_seconds.labels(path).observe(seconds)
        if status >= 400:
            self.http_errors.labels(str(status)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


def sample_value(text: str, name: str, labels: dict[str, Any] | None = None) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels`` (for tests and scripts)."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {k: str(v) for k, v in (labels or {}).items()}
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in wanted.items()):
                total += sample.value
    return total
