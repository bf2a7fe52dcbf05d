"""report.md and the plots, from results.json and requests.jsonl alone (``regenerate DIR``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minicache_bench.engine_options import options_title
from minicache_bench.runner import percentile, route_breakdown, same_requests
from minicache_bench.stats import RESAMPLES, SEED, bootstrap_mean_ci, request_key


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base else "-"


def reference(methods: dict[str, Any]) -> str | None:
    """The method every other one is compared with: pot, or no-reuse for structured outputs."""
    return next((m for m in ("pot", "no-reuse") if m in methods), None)


def _title(config: dict[str, Any]) -> str:
    """The dataset, its split where the run used one (``--split``), and minicache's engine options
    where the run gave some (``--engine-option``)."""
    split, dataset = config.get("split"), config["dataset"]
    return (f"{dataset}, {split} split" if split else dataset) + options_title(config)


def _builds(config: dict[str, Any]) -> list[str]:
    if "background_builds" not in config:  # results written before the harness recorded it
        return []
    how = (
        "in the background, in the same process, while the stream continued (their compute slows the "
        "requests they overlap)"
        if config["background_builds"]
        else "inline, on the request that triggered them (--inline-builds: the same routes on every run)"
    )
    lines = [f"minicache builds: {how}."]
    if config.get("interleave"):
        lines.append(
            "Methods served each request in turn (--interleave; the order flips every request, and each "
            "request starts without the previous prompt in the KV cache): the rows compared on one request "
            "were measured seconds apart. While another method served, minicache's builds waited (the "
            "benchmark held the compute lock); results.json's `waited_s` counts the seconds requests "
            "waited, before their timers started, for a build to step aside."
        )
    return lines + [""]


def _paired_cells(c: dict[str, Any] | None) -> tuple[str, str, str]:
    """Accuracy difference with its interval, McNemar's p, speedup interval (dashes for the reference)."""
    if not c:
        return "-", "-", "-"
    lo, hi = c["accuracy_diff_ci95"]
    diff = f"{100 * c['accuracy_diff']:+.1f} pts [{100 * lo:+.1f}, {100 * hi:+.1f}]"
    ratio = c["latency_ratio_ci95"]
    return diff, f"{c['mcnemar_p']:.3g}", f"[{ratio[0]:.2f}, {ratio[1]:.2f}]" if ratio else "-"


def write_report(out: Path, results: dict[str, Any], rows: dict[str, list[dict[str, Any]]]) -> None:
    methods = results["methods"]
    ref_name = reference(methods)
    pot = methods.get(ref_name) if ref_name else None
    lines = [
        f"# Benchmark: {_title(results['config'])}",
        "",
        f"Command: `{results['config']['command']}`",
        "",
        f"Machine: {results['machine'].get('cpu', '?')}, {results['machine'].get('cpus')} CPUs, "
        f"Python {results['machine'].get('python')}",
        "",
        *_builds(results["config"]),
        (
            "Outputs: the task check (the requested final line with the gold solution; exactly the required JSON "
            "keys, types and values) and the stitched-output integrity check (every equation in every step holds; "
            "the whole response one JSON object)."
            if results["config"]["dataset"] == "stepcache-micro"
            else "Numeric answers: `math.isclose(answer, gold, rel_tol=1e-3, abs_tol=0.01)`; actions: equal max_price "
            "and >= 50% of the gold keywords' content words."
        ),
        "",
        "| method | n | accuracy | hit rate | wrong hits | mean latency | p50 | p95 | hit p50 | target tokens | "
        f"speedup vs {ref_name or '(no baseline run)'} (mean latency) | target tokens per request vs "
        f"{ref_name or '(no baseline run)'} |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in methods.items():
        lat = m["latency_s"]
        vs_lat = _ratio(pot["latency_s"]["mean"], lat["mean"]) if pot else "-"
        per_request = m["tokens"]["target"] / m["n"] if m["n"] else 0.0
        vs_tok = (
            _ratio(per_request, pot["tokens"]["target"] / pot["n"]) if pot and pot["n"] else "-"
        )
        lines.append(
            f"| {name} | {m['n']} | {m['accuracy']:.1%} | {m['hit_rate']:.1%} | {m['wrong_hit_rate']:.1%} | "
            f"{lat['mean']:.2f}s | {lat['p50']:.2f}s | {lat['p95']:.2f}s | {m['hit_latency_s']['p50']:.2f}s | "
            f"{m['tokens']['target']:,} | {vs_lat} | {vs_tok} |"
        )
    tp = {name: m.get("throughput_rps") for name, m in methods.items() if m.get("throughput_rps")}
    if tp:
        config = results.get("config", {})
        held = config.get("throughput_held_out")
        on = (
            f"{config.get('throughput_requests', '?')} held-out requests of the stream's groups (not in the stream)"
            if held
            else f"the stream's first {config.get('throughput_requests', '?')} requests, already seen by "
            "the caches (favourable to them)"
            if held is False
            else "requests chosen before this was recorded"
        )
        lines += [
            "",
            "## Throughput (requests/s, C concurrent clients, one instance)",
            "",
            f"Measured on {on}."
            + (
                " In parentheses: the accuracy of those answers (rows in requests.jsonl as METHOD@cC)."
                if any(m.get("throughput_accuracy") for m in methods.values())
                else ""
            ),
            "",
            "| method | " + " | ".join(f"C={c}" for c in next(iter(tp.values()))) + " |",
            "|---|" + "---|" * len(next(iter(tp.values()))),
        ]
        for name, per in tp.items():
            right = methods[name].get("throughput_accuracy") or {}  # absent from older results
            cells = (
                f"{v:.3f}" + (f" ({right[c]:.1%})" if c in right else "") for c, v in per.items()
            )
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        if "pot" in tp and "minicache" in tp:
            ratios = ", ".join(
                f"C={c}: {tp['minicache'][c] / tp['pot'][c]:.2f}x"
                for c in tp["pot"]
                if c in tp["minicache"]
            )
            lines += ["", f"minicache throughput vs pot: {ratios}"]
    pads = {name: m.get("pad_context") for name, m in methods.items() if m.get("pad_context")}
    if pads:
        base = pads.get("pot", {})
        lines += [
            "",
            "## Long-context robustness (irrelevant context tokens added)",
            "",
            "The first requests of the stream again, after it, with filler text before their context.",
            "",
            "| method | pad tokens | n | accuracy | hit rate | mean latency | speedup vs pot at this length |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, per in pads.items():
            for pad, m in per.items():
                mean = m["latency_s"]["mean"]
                ratio = (
                    f"{base[pad]['latency_s']['mean'] / mean:.2f}x" if pad in base and mean else "–"
                )
                lines.append(
                    f"| {name} | {pad} | {m['n']} | {m['accuracy']:.1%} | {m['hit_rate']:.1%} | "
                    f"{mean:.2f}s | {ratio} |"
                )
    paths = {name: m for name, m in methods.items() if m.get("paths")}
    if paths:
        lines += [
            "",
            "## StepCache paths",
            "",
            "| method | step-reuse | step-patch | step-skip | solver fallbacks | checks passed |",
            "|---|---|---|---|---|---|",
        ]
        for name, m in paths.items():
            p = m["paths"]
            lines.append(
                f"| {name} | {p['step-reuse']:.1%} | {p['step-patch']:.1%} | {p['step-skip']:.1%} | "
                f"{m['solver_fallbacks']} | {m['verified']:.1%} |"
            )
    if results.get("per_seed"):
        lines += [
            "",
            "## Per seed",
            "",
            "| seed | method | n | accuracy | mean latency | p50 | p95 | target tokens |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for seed, per in results["per_seed"].items():
            for name, m in per.items():
                lat = m["latency_s"]
                lines.append(
                    f"| {seed} | {name} | {m['n']} | {m['accuracy']:.1%} | {lat['mean']:.2f}s | "
                    f"{lat['p50']:.2f}s | {lat['p95']:.2f}s | {m['tokens']['target']:,} |"
                )
    if ref_name and rows.get(ref_name):
        paired = (results.get("paired") or {}).get("methods", {})
        lines += [
            "",
            f"## Each method against {ref_name} on the same requests, how sure, and when it was measured "
            "(UTC)",
            "",
            f"Intervals are 95%, from a paired bootstrap over the requests ({RESAMPLES:,} resamples, seed "
            f"{SEED}); McNemar's exact p counts the requests one method got right and the other wrong. An "
            f"accuracy interval that holds 0, or a speedup interval that holds 1, means this stream does not "
            f"separate the method from {ref_name}. With few discordant requests the bootstrap interval is too "
            f"narrow (answers identical on every request give [+0.0, +0.0]): read McNemar's p there.",
            "",
            f"| method | n | accuracy | {ref_name} accuracy | difference [95% CI] | McNemar p | mean latency | "
            f"{ref_name} mean latency | speedup vs {ref_name} | speedup 95% CI | measured |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in same_requests(rows, ref_name):
            diff, p, ratio = _paired_cells(paired.get(c["method"]))
            lines.append(
                f"| {c['method']} | {c['n']} | {c['accuracy']:.1%} | {c['ref_accuracy']:.1%} | {diff} | {p} | "
                f"{c['latency_mean']:.2f}s | {c['ref_latency_mean']:.2f}s | {c['speedup']:.2f}x | {ratio} | "
                f"{c['measured']} |"
            )
    if rows.get("minicache") and ref_name == "pot":
        lines += [
            "",
            "## Where minicache's time and errors go (by route; pot on the same requests)",
            "",
            "| route | n | accuracy | mean latency | p50 | pot accuracy | pot mean latency |",
            "|---|---|---|---|---|---|---|",
        ]
        for b in route_breakdown(rows["minicache"], rows.get("pot")):
            pot_acc = f"{b['baseline_accuracy']:.1%}" if b["baseline_accuracy"] is not None else "-"
            pot_lat = (
                f"{b['baseline_latency_mean']:.2f}s"
                if b["baseline_latency_mean"] is not None
                else "-"
            )
            lines.append(
                f"| {b['route']} | {b['n']} | {b['accuracy']:.1%} | {b['latency_mean']:.2f}s | "
                f"{b['latency_p50']:.2f}s | {pot_acc} | {pot_lat} |"
            )
    if ref_name == "pot" and rows.get("pot"):
        rates = [
            r
            for name, rs in rows.items()
            if name != "pot"
            for r in cache_rates(name, rs, rows["pot"])
        ]
        if rates:
            lines += [
                "",
                "## Wrong answers added (and removed) by the cache, against pot on the same requests",
                "",
                "cache_error_rate: hits wrong where pot was right, over hits; cache_gain_rate: hits right "
                "where pot was wrong, over hits.",
                "",
                "| method | extraction | hits | cache_error_rate | cache_gain_rate | hit p50 |",
                "|---|---|---|---|---|---|",
            ]
            for c in rates:
                lines.append(
                    f"| {c['method']} | {c['path']} | {c['hits']} | {c['cache_error_rate']:.1%} | "
                    f"{c['cache_gain_rate']:.1%} | {c['hit_p50']:.2f}s |"
                )
    stats = methods.get("minicache", {}).get("engine_stats") or {}
    if "audits" in stats:
        lines += [
            "",
            f"Hit checks (minicache engine): {stats.get('hit_refusals', 0)} hits refused and served as "
            f"misses; {stats['audits']} audits, {stats.get('audits_disagreed', 0)} of them disagreeing; "
            f"{stats.get('entries_demoted', 0)} entries demoted at the end. Builds spent "
            f"{stats.get('build_target_tokens', 0):,} target tokens.",
        ]
    purity = methods.get("minicache", {}).get("routing")
    if purity:
        lines += [
            "",
            f"Routing (minicache, no labels): {purity['groups_formed']} groups formed for {purity['labels']} "
            f"gold labels ({purity['groups_formed'] / purity['labels']:.2f} groups per computation), "
            f"purity {purity['purity']:.1%}.",
        ]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_plots(out, results, rows)


def cache_rates(
    method: str, rows: list[dict[str, Any]], pot: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """cache_error_rate and cache_gain_rate of a method's hits against pot on the same requests, for
    all its hits and per extraction path (rule, align, choice, free) where rows name one."""
    base = {request_key(r): r for r in pot}
    hits = [r for r in rows if r["route"] == "hit" and request_key(r) in base]
    if not hits:
        return []
    paths: dict[str, list[dict[str, Any]]] = {"all": hits}
    for r in hits:
        path = (r.get("detail") or {}).get("extraction")
        if path:
            paths.setdefault(path, []).append(r)
    out = []
    for path, rs in paths.items():
        wrong = sum(not r["correct"] and base[request_key(r)]["correct"] for r in rs)
        gained = sum(r["correct"] and not base[request_key(r)]["correct"] for r in rs)
        out.append(
            {
                "method": method,
                "path": path,
                "hits": len(rs),
                "cache_error_rate": wrong / len(rs),
                "cache_gain_rate": gained / len(rs),
                "hit_p50": percentile([r["latency_s"] for r in rs], 0.5),
            }
        )
    return out


def write_plots(out: Path, results: dict[str, Any], rows: dict[str, list[dict[str, Any]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, rs in rows.items():
        lat = np.sort([r["latency_s"] for r in rs])
        if len(lat):
            ax.plot(lat, np.arange(1, len(lat) + 1) / len(lat), label=name)
    ax.set_xscale("log")
    ax.set_xlabel("latency (s)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("Latency CDF")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "latency_cdf.png", dpi=110)
    plt.close(fig)

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for name, rs in rows.items():
        if not rs:
            continue
        hits = np.cumsum([r["route"] == "hit" for r in rs]) / np.arange(1, len(rs) + 1)
        lat = np.cumsum([r["latency_s"] for r in rs]) / np.arange(1, len(rs) + 1)
        a1.plot(hits, label=name)
        a2.plot(lat, label=name)
    a1.set_xlabel("request # in stream")
    a1.set_ylabel("cumulative hit rate")
    a2.set_xlabel("request # in stream")
    a2.set_ylabel("running mean latency (s)")
    a1.legend()
    fig.suptitle("Cold start")
    fig.tight_layout()
    fig.savefig(out / "cold_start.png", dpi=110)
    plt.close(fig)

    tp = {
        name: m["throughput_rps"]
        for name, m in results["methods"].items()
        if m.get("throughput_rps")
    }
    if tp:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, per in tp.items():
            ax.plot([int(c) for c in per], list(per.values()), marker="o", label=name)
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel("requests/s")
        ax.set_title("Throughput vs concurrency")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "throughput.png", dpi=110)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    accuracy_latency(ax, results, rows)
    fig.tight_layout()
    fig.savefig(out / "accuracy_latency.png", dpi=110)
    plt.close(fig)


def accuracy_latency(
    ax: Any, results: dict[str, Any], rows: dict[str, list[dict[str, Any]]]
) -> None:
    """Each method's mean latency and accuracy with 95% bootstrap intervals, on axes from zero:
    zoomed onto the points, a 1-point accuracy gap between two methods looks like a landslide."""
    for name, m in results["methods"].items():
        x, y, rs = m["latency_s"]["mean"], m["accuracy"], rows.get(name) or []
        if rs:
            xlo, xhi = bootstrap_mean_ci([r["latency_s"] for r in rs])
            ylo, yhi = bootstrap_mean_ci([float(bool(r["correct"])) for r in rs])
            ax.errorbar(
                x,
                y,
                xerr=[[max(0.0, x - xlo)], [max(0.0, xhi - x)]],
                yerr=[[max(0.0, y - ylo)], [max(0.0, yhi - y)]],
                fmt="o",
                capsize=3,
                label=name,
            )
        else:
            ax.scatter(x, y, label=name)
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4))
    ax.set_xlim(left=0)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("mean latency (s)")
    ax.set_ylabel("accuracy")
    ax.set_title("Accuracy vs mean latency (95% bootstrap intervals)")
