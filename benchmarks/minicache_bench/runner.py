"""Run methods over a request stream and compute the fixed results contract.

``DIR/requests.jsonl`` gets one line per (method, request) as soon as it is done, so an interrupted
run resumes where it stopped (lines already there are read back, not recomputed). Methods serve
the stream one after the other (``record_stream``), or request by request in turn
(``record_interleaved``, ``--interleave``) when the machine's speed drifts faster than a stream
lasts. Each line says when it started (``started_at``, Unix time), so rows measured while something
else loaded the machine can be found and measured again. Throughput at
concurrency C is measured separately: C client threads send ``throughput_requests`` requests of the
same stream to one warm instance of the method and the wall time is divided out; each of those
requests' rows goes to requests.jsonl too, as method ``METHOD@cC`` (``throughput_tag``), so that the
accuracy of the answers served under load is known, not only their speed.
"""

from __future__ import annotations

import json
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from minicache_bench.baselines import Method, timed
from minicache_bench.data import BenchRequest, is_correct
from minicache_bench.methods import row_method
from minicache_bench.stats import request_key


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def read_done(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The rows of a requests.jsonl by (method, request id); rows written under a method's earlier
    name come back under its current one (``row_method``), so old runs resume and report as it."""
    done: dict[tuple[str, str], dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                row["method"] = row_method(row)
                done[(row["method"], str(row["id"]))] = row
            except (json.JSONDecodeError, KeyError):
                continue  # a line cut short by an interruption
    return done


def _serve(method: Method, r: BenchRequest, name: str) -> dict[str, Any]:
    """Serve one request through ``method`` and return its row."""
    started = time.time()
    outcome, seconds = timed(method, r)
    return {
        "method": name,
        "id": r.id,
        "group": r.group,
        "route": outcome.route,
        "started_at": started,
        "answer": outcome.answer,
        "gold": r.answer,
        "correct": is_correct(r, outcome.answer),
        "latency_s": seconds,
        "tokens": {"target": outcome.target_tokens, "small": outcome.small_tokens},
        "detail": outcome.detail,
    }


def record_stream(
    method: Method,
    stream: list[BenchRequest],
    out: Path,
    progress: Callable[[], None] | None = None,
    tag: str | None = None,
) -> list[dict[str, Any]]:
    """Serve ``stream`` in order through a benchmark ``method``, appending one row per request to
    ``out`` (requests.jsonl); requests already recorded there are read back, not served again."""
    name = tag or method.name
    done = read_done(out)
    rows = []
    with out.open("a", encoding="utf-8") as fh:
        for r in stream:
            key = (name, str(r.id))
            if key in done:
                rows.append(done[key])
            else:
                row = _serve(method, r, name)
                fh.write(json.dumps(row, default=str) + "\n")
                fh.flush()
                rows.append(row)
            if progress:
                progress()
    return rows


def record_interleaved(
    methods: dict[str, Method],
    streams: dict[str, list[BenchRequest]],
    out: Path,
    progress: Callable[[], None] | None = None,
    hold: AbstractContextManager[Any] | None = None,
    background: frozenset[str] = frozenset(),
    between: Callable[[], None] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Serve the streams request by request: each request through every method in turn, so that two
    methods' rows for one request were measured seconds apart, not a whole stream apart. The order
    flips from one request to the next (``methods``' order, then reversed), so that whatever one
    method leaves behind for the next (a warm cache) favours each method equally often; ``between``
    runs before every request served (the benchmark drops the models' KV cache of the last prompt,
    which the next method would otherwise reuse whole). A method's stream may be a prefix of the
    others' (``--subset``).

    ``background`` names the methods with background work (minicache's builds). While any other
    method serves, the benchmark holds ``hold`` (the process's compute lock), so that work waits
    instead of slowing the other method; ``between`` runs under it too (it touches the models). The
    seconds spent acquiring it, before the request's timer started (a build stepping aside: build
    compute that no timer saw), go into every row as ``waited_s``. Rows already in ``out`` are read
    back, not served again."""
    done = read_done(out)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in methods}
    longest = max(streams.values(), key=len, default=[])
    names = list(methods)
    with out.open("a", encoding="utf-8") as fh:
        for i, r in enumerate(longest):
            for name in names if i % 2 == 0 else names[::-1]:
                if i >= len(streams[name]):
                    continue
                key = (name, str(r.id))
                if key in done:
                    rows[name].append(done[key])
                else:
                    exclusive = hold is not None and bool(background) and name not in background
                    began = time.perf_counter()
                    with hold if hold is not None else nullcontext():
                        waited = time.perf_counter() - began
                        if between is not None:
                            between()
                        if exclusive:
                            row = _serve(methods[name], r, name)
                    if not exclusive:
                        row = _serve(methods[name], r, name)
                    if hold is not None and background:
                        row["waited_s"] = waited
                    fh.write(json.dumps(row, default=str) + "\n")
                    fh.flush()
                    rows[name].append(row)
                if progress:
                    progress()
    return rows


def throughput_tag(name: str, concurrency: int) -> str:
    """The method name of a throughput row: ``minicache@c4`` (4 concurrent clients)."""
    return f"{name}@c{concurrency}"


def is_throughput_tag(name: str) -> bool:
    return bool(re.fullmatch(r".+@c\d+", name))


def throughput(
    method: Method, stream: list[BenchRequest], concurrency: int, name: str | None = None
) -> tuple[float, list[dict[str, Any]]]:
    """Requests per second with ``concurrency`` clients against one instance, and each request's
    row (under ``throughput_tag``; its latency is the request's own, measured under that load)."""
    tag = throughput_tag(name or method.name, concurrency)
    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        rows = list(pool.map(lambda r: _serve(method, r, tag), stream))
    return len(stream) / (time.perf_counter() - began), rows


def record_throughput(
    method: Method, stream: list[BenchRequest], concurrency: list[int], out: Path, name: str
) -> tuple[dict[str, float], dict[str, float]]:
    """Throughput (requests/s) and accuracy at each client count, appending every row to ``out``
    (requests.jsonl) once the timer has stopped. A rerun measures again: its rows replace the
    earlier ones when read back (``read_done`` keeps a request's last row)."""
    rps: dict[str, float] = {}
    accuracy: dict[str, float] = {}
    for c in concurrency:
        rps[str(c)], rows = throughput(method, stream, c, name)
        accuracy[str(c)] = summarize(rows)["accuracy"]
        with out.open("a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row, default=str) + "\n" for row in rows)
    return rps, accuracy


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-method block of results.json, computed from request rows alone."""
    n = len(rows)
    lat = [r["latency_s"] for r in rows]
    hits = [r for r in rows if r["route"] == "hit"]
    hit_lat = [r["latency_s"] for r in hits]
    return {
        "n": n,
        "accuracy": sum(r["correct"] for r in rows) / n if n else 0.0,
        "hit_rate": len(hits) / n if n else 0.0,
        "wrong_hit_rate": sum(not r["correct"] for r in hits) / len(hits) if hits else 0.0,
        "errors": sum(r["route"] == "error" for r in rows),
        "latency_s": {
            "mean": statistics.mean(lat) if lat else 0.0,
            "p50": percentile(lat, 0.5),
            "p95": percentile(lat, 0.95),
            "p99": percentile(lat, 0.99),
        },
        "hit_latency_s": {
            "mean": statistics.mean(hit_lat) if hit_lat else 0.0,
            "p50": percentile(hit_lat, 0.5),
        },
        "tokens": {
            "target": sum(r["tokens"]["target"] for r in rows),
            "small": sum(r["tokens"]["small"] for r in rows),
        },
        **_step_paths(rows),
    }


def _step_paths(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """For StepCache rows: the share of each path, solver fallbacks, and how often the checks passed."""
    routes = [(r.get("detail") or {}).get("route") for r in rows]
    if not any(isinstance(x, str) and x.startswith("step-") for x in routes):
        return {}
    from collections import Counter

    counts = Counter(routes)
    details = [r.get("detail") or {} for r in rows]
    return {
        "paths": {
            k: counts.get(k, 0) / len(rows) for k in ("step-reuse", "step-patch", "step-skip")
        },
        "solver_fallbacks": sum(bool(d.get("solver_fallback")) for d in details),
        "verified": sum(bool(d.get("verified")) for d in details) / len(rows),
    }


def route_breakdown(
    rows: list[dict[str, Any]], baseline: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """For minicache rows: requests, accuracy and latency per route (hits split by how the variables
    were extracted), and the baseline's accuracy and latency on the same requests."""
    from collections import defaultdict

    base = {request_key(r): r for r in baseline or []}
    buckets: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        detail = r.get("detail") or {}
        route = detail.get("route") or r["route"]
        buckets[f"{route} ({detail['extraction']})" if detail.get("extraction") else route].append(
            r
        )
    out = []
    for name in sorted(buckets, key=lambda k: (not k.startswith("hit"), k)):
        rs = buckets[name]
        same = [base[request_key(r)] for r in rs if request_key(r) in base]
        lat = [r["latency_s"] for r in rs]
        out.append(
            {
                "route": name,
                "n": len(rs),
                "accuracy": sum(r["correct"] for r in rs) / len(rs),
                "latency_mean": statistics.mean(lat),
                "latency_p50": percentile(lat, 0.5),
                "baseline_n": len(same),
                "baseline_accuracy": sum(r["correct"] for r in same) / len(same) if same else None,
                "baseline_latency_mean": statistics.mean(r["latency_s"] for r in same)
                if same
                else None,
            }
        )
    return out


def same_requests(rows: dict[str, list[dict[str, Any]]], ref: str = "pot") -> list[dict[str, Any]]:
    """Each method against ``ref`` on exactly the requests that method ran (a method limited by
    ``--subset`` is compared with the baseline's rows for the same requests, not its whole stream),
    with the UTC span in which the method's rows were measured: on a machine whose speed drifts,
    latencies measured hours apart are not comparable, and the span shows how far apart they are."""
    import datetime

    base = {request_key(r): r for r in rows.get(ref, [])}

    def span(rs: list[dict[str, Any]]) -> str:
        starts = [r["started_at"] for r in rs if r.get("started_at")]
        if not starts:
            return "-"
        end = max(r["started_at"] + r["latency_s"] for r in rs if r.get("started_at"))
        fmt = lambda t: datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M")  # noqa: E731
        return f"{fmt(min(starts))} to {fmt(end)[11:]}"

    out = []
    for name, rs in rows.items():
        same = [base[request_key(r)] for r in rs if request_key(r) in base]
        if not rs or len(same) != len(rs):
            continue
        mean = statistics.mean(r["latency_s"] for r in rs)
        ref_mean = statistics.mean(r["latency_s"] for r in same)
        out.append(
            {
                "method": name,
                "n": len(rs),
                "accuracy": sum(r["correct"] for r in rs) / len(rs),
                "latency_mean": mean,
                "ref_accuracy": sum(r["correct"] for r in same) / len(same),
                "ref_latency_mean": ref_mean,
                "speedup": ref_mean / mean if mean else 0.0,
                "measured": span(rs),
            }
        )
    return out


def group_purity(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """For minicache rows: how pure the automatically formed groups are against the gold labels, and
    how much one computation is split (``groups_per_label``: groups formed over gold labels seen)."""
    from collections import Counter, defaultdict

    groups: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        g = (r.get("detail") or {}).get("group")
        if g and r.get("group"):
            groups[g].append(r["group"])
    if not groups:
        return None
    total = sum(len(v) for v in groups.values())
    majority = sum(Counter(v).most_common(1)[0][1] for v in groups.values())
    labels = len({x for v in groups.values() for x in v})
    return {
        "groups_formed": len(groups),
        "labels": labels,
        "groups_per_label": len(groups) / labels,
        "purity": majority / total,
    }


def machine() -> dict[str, Any]:
    import os

    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo") as fh:
            info["cpu"] = next(
                line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    return info
