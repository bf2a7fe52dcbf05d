"""``minicache bench``: MiniCache against PoT and other caches on one stream, one report."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from minicache.config.engine import AdmissionConfig
from minicache.miss.prompts import plain_pot_messages
from minicache_bench.baselines import Method
from minicache_bench.data import SEEDED, BenchRequest, load, pad_context, select
from minicache_bench.engine_options import option_values, refuse_other_options
from minicache_bench.methods import (
    METHODS,
    RESULTS_FORMAT,
    build_method,
    canonical,
    legacy_name,
)
from minicache_bench.report import reference, write_report
from minicache_bench.runner import (
    group_purity,
    is_throughput_tag,
    machine,
    read_done,
    record_interleaved,
    record_stream,
    record_throughput,
    summarize,
)
from minicache_bench.stats import compare_all

__all__ = ["run_benchmark", "run_seeds", "regenerate_report", "METHODS"]


def _bar(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="req", file=sys.stderr, disable=None)


def run_benchmark(
    *,
    dataset: str,
    methods: list[str],
    target,
    small,
    embedder,
    out: Path,
    limit: int | None = None,
    groups: int | None = None,
    split: str | None = None,
    seed: int = 0,
    concurrency: list[int] | None = None,
    throughput_requests: int = 24,
    throughput_methods: tuple[str, ...] = ("pot", "minicache"),
    pad_tokens: list[int] | None = None,
    pad_requests: int = 20,
    use_group_labels: bool = False,
    sandbox=None,
    command: str = "",
    subset: dict[str, int] | None = None,
    background_builds: bool = True,
    admission: AdmissionConfig | None = None,
    interleave: bool = False,
    engine_options: Sequence[str] = (),
) -> dict[str, Any]:
    """Run each method over the same shuffled stream and write results.json, requests.jsonl, report.md, plots.

    ``subset`` limits a method to the first N requests of the stream (e.g. the slower baselines).
    ``background_builds``: minicache builds while the stream continues, as in serving (False: on
    the request that triggers them, for runs that must give the same routes every time and tests
    that need hits at fixed places in a short stream).
    ``split``: dev or test, for the datasets that have one (``minicache_bench.splits``).
    ``admission``: minicache's build admission (tests shorten its warm-up).
    ``interleave``: serve each request with every method in turn instead of each method's whole
    stream in turn (``record_interleaved``): rows compared on one request are then measured seconds
    apart, each starting without the other's prompt in the models' KV cache. minicache's background
    builds wait while another method serves (the benchmark holds the compute lock); throughput and
    padded requests still go method by method, after the stream.
    ``engine_options``: ``KEY=VALUE`` options of minicache's engine (``minicache_bench.engine_options``),
    recorded in results.json's config as each key and the value it took (``engine_options``).

    A rerun with a larger ``limit`` continues the stream (a long run in chunks, e.g.
    ``scripts/bench_chunks.sh``): rows already recorded are read back, and minicache's admission
    estimates are restored from them (``MiniCacheMethod.resume``) so the next chunk decides as one
    continuous run would. The store in ``out`` keeps the groups, examples and entries.
    Method names may be given by their earlier spellings (``gencache``): see ``methods.ALIASES``.
    """
    from minicache.sandbox import SandboxPool

    methods = [canonical(m) for m in methods]
    subset = {canonical(k): v for k, v in (subset or {}).items()}
    options = option_values(engine_options)
    refuse_other_options([out], options)  # rows from two engines would be one method's stream

    out.mkdir(parents=True, exist_ok=True)
    if dataset in SEEDED:  # generated per seed, already in stream order
        stream = load(dataset, seed, split)[:limit] if limit else load(dataset, seed, split)
        fresh, held_out = stream[:throughput_requests], False
    else:
        everything = load(dataset, split=split)
        stream = select(everything, limit=limit, groups=groups, seed=seed)
        in_stream = {r.id for r in stream}
        labels = {r.group for r in stream}
        held = [
            r
            for r in select(everything, limit=None, groups=None, seed=seed + 1)
            if r.id not in in_stream and r.group in labels
        ][:throughput_requests]
        fresh, held_out = held or stream[:throughput_requests], bool(held)
    if concurrency and not held_out:
        print(
            f"warning: no request of the stream's groups is left out of the stream, so throughput is measured "
            f"on the stream's first {len(fresh)} requests, which the caches have already seen (favourable to "
            f"them); leave requests out (--limit, --groups) to measure on held-out ones",
            file=sys.stderr,
        )
    sandbox = sandbox or SandboxPool(size=max([2] + list(concurrency or [])))
    requests_path = out / "requests.jsonl"
    results_path = out / "results.json"
    results: dict[str, Any] = {
        "config": {
            "format": RESULTS_FORMAT,
            "dataset": dataset,
            "split": split,
            "methods": methods,
            "limit": limit,
            "groups": groups,
            "seed": seed,
            "concurrency": concurrency or [],
            "throughput_requests": len(fresh),
            "throughput_held_out": held_out,
            "pad_context": pad_tokens or [],
            "use_group_labels": use_group_labels,
            "subset": subset or {},
            "command": command,
            "background_builds": background_builds,
            "interleave": interleave,
            "engine_options": options,
            "tolerance": "math.isclose(rel_tol=1e-3, abs_tol=0.01)",
            "target": getattr(target, "name", "?"),
            "small": getattr(small, "name", "?"),
        },
        "machine": machine(),
        "methods": {},
    }
    if results_path.exists():
        previous = _renamed(json.loads(results_path.read_text()))
        results["methods"].update(previous.get("methods", {}))
    if hasattr(
        target, "warm_up"
    ):  # weights paged in and PoT's system prompt computed before any timer starts
        target.warm_up(plain_pot_messages("What is 2 + 3?"))
    if hasattr(small, "warm_up"):
        small.warm_up()
    all_rows: dict[str, list[dict[str, Any]]] = {}
    built: dict[str, tuple[Method, list[BenchRequest], bool]] = {}

    def prepare(name: str) -> tuple[Method, list[BenchRequest], bool]:
        """The method, its stream, and whether it has requests left to serve (else all are read back)."""
        method: Method = build_method(
            name,
            target,
            small,
            sandbox,
            embedder,
            str(out / f"{name}.db"),
            use_group_labels,
            background_builds,
            admission,
            engine_options,
        )
        requests = stream[: subset[name]] if subset and name in subset else stream
        recorded = read_done(requests_path)
        serves = any((name, str(r.id)) not in recorded for r in requests)
        _resume(
            method,
            [(r, recorded[(name, str(r.id))]) for r in requests if (name, str(r.id)) in recorded],
            results["methods"].get(name, {}).get("tail_builds"),
            serves,
        )
        return method, requests, serves

    interleaved: dict[str, list[dict[str, Any]]] = {}
    if interleave:
        from minicache.models.compute import CPU_LOCK

        built = {name: prepare(name) for name in methods}
        engines = {
            n: b[0].engine  # type: ignore[attr-defined]
            for n, b in built.items()
            if hasattr(getattr(b[0], "engine", None), "wait_for_builds")
        }  # methods with background builds
        with _bar(sum(len(b[1]) for b in built.values()), "+".join(methods)) as bar:
            interleaved = record_interleaved(
                {n: b[0] for n, b in built.items()},
                {n: b[1] for n, b in built.items()},
                requests_path,
                progress=bar.update,
                hold=CPU_LOCK,
                background=frozenset(engines),
                between=lambda: _forget(target, small),
            )
        for (
            engine
        ) in engines.values():  # builds still running end here, before any method's throughput
            engine.wait_for_builds()
    for name in methods:
        method, requests, serves = built[name] if name in built else prepare(name)
        if interleave:
            rows = interleaved[name]
        else:
            with _bar(len(requests), name) as bar:
                rows = record_stream(method, requests, requests_path, progress=bar.update)
        block = summarize(rows)
        if interleave:  # seconds requests waited, before their timers, for another method's builds to step aside
            block["waited_s"] = sum(row.get("waited_s", 0.0) for row in rows)
        if name == "minicache":
            block["routing"] = group_purity(rows)
            engine = method.engine  # type: ignore[attr-defined]
            engine.wait_for_builds()  # background builds still running end here, before any snapshot
            # Builds that finished after the last row: the next chunk's first row records them.
            block["tail_builds"] = method.tail()  # type: ignore[attr-defined]
            block["build_compute_s"] = (
                engine.admission.build_s_total
            )  # rows' detail.build_s, plus the tail
            previous_stats = results["methods"].get(name, {}).get("engine_stats")
            # A snapshot after the stream, before throughput and padding. The sandbox counters live
            # in this process; a run that only read the stream back did none of its work, so it
            # keeps the earlier block's figures.
            block["engine_stats"] = (
                engine.stats() if serves or not previous_stats else previous_stats
            )
        if concurrency and name in throughput_methods:
            block["throughput_rps"], block["throughput_accuracy"] = record_throughput(
                method, fresh, concurrency, requests_path, name
            )
        if pad_tokens and name in ("pot", "minicache"):
            per: dict[str, Any] = {}
            for pad in pad_tokens:
                padded = [pad_context(r, pad) for r in requests[:pad_requests]]
                tag = f"{name}@pad{pad}"
                with _bar(len(padded), tag) as bar:
                    per[str(pad)] = summarize(
                        record_stream(method, padded, requests_path, progress=bar.update, tag=tag)
                    )
            block["pad_context"] = per
        for kept in (
            "throughput_rps",
            "throughput_accuracy",
            "pad_context",
        ):  # measured by an earlier run and not asked for now
            if kept not in block and kept in results["methods"].get(name, {}):
                block[kept] = results["methods"][name][kept]
        results["methods"][name] = block
        all_rows[name] = rows
        results_path.write_text(json.dumps(results, indent=2, default=str))
    done = read_done(requests_path)
    all_rows = {
        name: all_rows.get(name) or [row for (m, _), row in done.items() if m == name]
        for name in results["methods"]
    }  # the report lists methods in results.json's order
    return _finish(out, results, all_rows)


def _forget(*models: Any) -> None:
    """Drop the last prompt from each model's KV cache where the backend keeps one in this process
    (``LlamaCppBackend.forget_request``): in an interleaved run the next method sends the same prompt."""
    for model in models:
        forget = getattr(model, "forget_request", None)
        if forget is not None:
            forget()


def _resume(
    method: Method,
    done: list[tuple[Any, dict[str, Any]]],
    tail: dict[str, Any] | None,
    serves: bool,
) -> None:
    """Give a method with state in memory what the earlier calls of a chunked run recorded
    (``Method``'s ``resume``; also when nothing is left to serve, so minicache's ``tail_builds``
    and build seconds stay whole); say so when a method that will serve cannot carry its state over."""
    if not done:
        return
    resume = getattr(method, "resume", None)
    if resume is not None:
        resume(done, tail)
    elif (
        serves and method.name == "gencache-like"
    ):  # its clusters need the programs' embeddings, not in the rows
        print(
            f"warning: gencache-like keeps its clusters in memory and cannot restore them: the {len(done)} "
            "rows read back are not in its clusters, so a stream resumed or run in chunks is not one run",
            file=sys.stderr,
        )


def _renamed(results: dict[str, Any]) -> dict[str, Any]:
    """results.json with methods written under an earlier name under the current one (``gptcache``
    for the re-implementation, in results written before ``config.format`` 2). ``config.command``
    is left as it was run."""
    config = results.get("config", {})
    current = canonical if config.get("format", 1) >= RESULTS_FORMAT else legacy_name
    results["methods"] = {current(k): v for k, v in results.get("methods", {}).items()}
    for per in results.get("per_seed", {}).values():
        for name in list(per):
            per[current(name)] = per.pop(name)
    if config.get("methods"):
        config["methods"] = [current(m) for m in config["methods"]]
    if config.get("subset"):
        config["subset"] = {current(k): v for k, v in config["subset"].items()}
    return results


def _finish(
    out: Path, results: dict[str, Any], rows: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """Add how sure each difference from the reference is (``paired``), then write results.json,
    report.md and the plots."""
    results["paired"] = compare_all(rows, reference(results["methods"]))
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    write_report(out, results, rows)
    return results


def _pooled_rows(out: Path, seeds: list[int]) -> dict[str, list[dict[str, Any]]]:
    """Every seed's rows, each tagged with its seed (request ids repeat across seeds)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for seed in seeds:
        for (name, _), row in read_done(out / f"seed{seed}" / "requests.jsonl").items():
            rows.setdefault(name, []).append(dict(row, seed=seed))
    return rows


def regenerate_report(out: Path) -> dict[str, Any]:
    """Write ``out``'s report.md, plots and the ``paired`` block of results.json again from its
    results.json and requests.jsonl alone (no model runs): for results measured before the report
    said how sure its differences are. The methods' measured blocks are kept as they are."""
    results = _renamed(json.loads((out / "results.json").read_text()))
    seeds = results["config"].get("seeds")
    if seeds:
        pooled = _pooled_rows(out, seeds)
        rows = {name: pooled.get(name, []) for name in results["methods"]}
    else:
        done = read_done(out / "requests.jsonl")
        rows = {
            name: [row for (m, _), row in done.items() if m == name] for name in results["methods"]
        }
    return _finish(out, results, rows)


def run_seeds(*, seeds: list[int], out: Path, **kwargs: Any) -> dict[str, Any]:
    """One run per seed (in ``out/seed<N>``, each resumable), then ``out/results.json`` and
    ``out/report.md`` over all of them: metrics pooled over every request of every seed (with equal
    requests per seed, pooled means and rates are the means over seeds), and each seed's own block."""
    if len(seeds) == 1:
        return run_benchmark(seed=seeds[0], out=out, **kwargs)
    per_seed = {}
    for seed in seeds:
        per_seed[str(seed)] = run_benchmark(seed=seed, out=out / f"seed{seed}", **kwargs)
    rows = _pooled_rows(out, seeds)
    first = per_seed[str(seeds[0])]
    results: dict[str, Any] = {
        "config": dict(first["config"], seed=None, seeds=seeds),
        "machine": first["machine"],
        "methods": {n: summarize(r) for n, r in rows.items() if not is_throughput_tag(n)},
        "per_seed": {s: r["methods"] for s, r in per_seed.items()},
    }
    out.mkdir(parents=True, exist_ok=True)
    return _finish(out, results, rows)
