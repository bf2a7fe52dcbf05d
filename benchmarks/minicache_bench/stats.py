"""How sure a difference between two methods is, from their rows on the same requests.

A benchmark stream of a few hundred requests measures each method once. A 1.5-point accuracy gap
on 200 requests, or a 0.95x latency ratio, can be noise; a report that prints the point estimate
alone invites reading it as a result. Every method runs the *same* requests as the reference (pot),
so the comparison is paired: resampling whole requests keeps each request's two outcomes together,
which removes the between-request variance (a long TAT-QA table is slow for every method).

* accuracy difference (method minus reference, in points of accuracy): a paired bootstrap 95%
  interval, and McNemar's exact test on the discordant requests (right for one, wrong for the other),
  which does not rely on resampling when few requests disagree;
* latency ratio (reference mean / method mean, the "speedup"): a paired bootstrap 95% interval.

The resampling RNG has a fixed seed, so regenerating a report from the same rows gives the same
intervals. Pure functions of request rows: no models, no files.
"""

from __future__ import annotations

from math import comb
from typing import Any

import numpy as np

RESAMPLES = 10_000
SEED = 20261202
_CHUNK = 1_000  # resamples drawn at once: bounds memory on long streams


def request_key(row: dict[str, Any]) -> tuple[Any, str]:
    """A request's identity across methods; pooled multi-seed rows carry their seed (ids repeat)."""
    return row.get("seed"), str(row["id"])


def pair(
    rows: list[dict[str, Any]], ref_rows: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(method row, reference row) for each request both ran, in the method's order."""
    base = {request_key(r): r for r in ref_rows}
    return [(r, base[request_key(r)]) for r in rows if request_key(r) in base]


def mcnemar_exact_p(method_only: int, ref_only: int) -> float:
    """Two-sided exact McNemar p-value: under "no difference", each discordant request is equally
    likely to favour either method, so the count favouring one is Binomial(discordant, 1/2)."""
    n = method_only + ref_only
    if n == 0:
        return 1.0
    k = min(method_only, ref_only)
    tail = sum(comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def _resample_indices(n: int, resamples: int, seed: int):
    rng = np.random.default_rng(seed)
    left = resamples
    while left > 0:
        size = min(_CHUNK, left)
        yield rng.integers(0, n, size=(size, n))
        left -= size


def _interval(samples: np.ndarray) -> list[float]:
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return [float(lo), float(hi)]


def bootstrap_mean_ci(
    values: list[float], resamples: int = RESAMPLES, seed: int = SEED
) -> list[float]:
    """95% percentile-bootstrap interval of a mean (one method's accuracy or latency, for the plot)."""
    x = np.asarray(values, dtype=float)
    if not len(x):
        return [0.0, 0.0]
    means = np.concatenate(
        [x[idx].mean(axis=1) for idx in _resample_indices(len(x), resamples, seed)]
    )
    return _interval(means)


def compare(
    rows: list[dict[str, Any]],
    ref_rows: list[dict[str, Any]],
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict[str, Any] | None:
    """A method against the reference on the requests both ran (None when they share none).

    ``accuracy_diff`` is in accuracy units (0.015 = 1.5 points); ``latency_ratio`` is the reference's
    mean latency over the method's (above 1: the method is faster). Both intervals come from the same
    resampled request sets.
    """
    pairs = pair(rows, ref_rows)
    if not pairs:
        return None
    ok = np.array([bool(r["correct"]) for r, _ in pairs], dtype=float)
    ref_ok = np.array([bool(b["correct"]) for _, b in pairs], dtype=float)
    lat = np.array([float(r["latency_s"]) for r, _ in pairs])
    ref_lat = np.array([float(b["latency_s"]) for _, b in pairs])
    diffs, ratios = [], []
    for idx in _resample_indices(len(pairs), resamples, seed):
        diffs.append(ok[idx].mean(axis=1) - ref_ok[idx].mean(axis=1))
        m = lat[idx].mean(axis=1)
        ratios.append(
            np.divide(ref_lat[idx].mean(axis=1), m, out=np.full_like(m, np.inf), where=m > 0)
        )
    method_only = int(((ok == 1) & (ref_ok == 0)).sum())
    ref_only = int(((ok == 0) & (ref_ok == 1)).sum())
    mean_lat = float(lat.mean())
    no_time = mean_lat <= 0  # only fake rows: no ratio to give
    return {
        "n": len(pairs),
        "accuracy": float(ok.mean()),
        "ref_accuracy": float(ref_ok.mean()),
        "accuracy_diff": float(ok.mean() - ref_ok.mean()),
        "accuracy_diff_ci95": _interval(np.concatenate(diffs)),
        "discordant": {"method_only": method_only, "ref_only": ref_only},
        "mcnemar_p": mcnemar_exact_p(method_only, ref_only),
        "latency_ratio": None if no_time else float(ref_lat.mean() / mean_lat),
        "latency_ratio_ci95": None if no_time else _interval(np.concatenate(ratios)),
    }


def compare_all(
    rows: dict[str, list[dict[str, Any]]],
    ref: str | None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict[str, Any] | None:
    """The ``paired`` block of results.json: every other method against ``ref`` (None without one)."""
    if not ref or not rows.get(ref):
        return None
    methods = {}
    for name, rs in rows.items():
        if name != ref and rs:
            c = compare(rs, rows[ref], resamples, seed)
            if c:
                methods[name] = c
    return {
        "reference": ref,
        "how": "paired bootstrap over requests (percentile 95% intervals) and McNemar's "
        "exact test on discordant requests",
        "resamples": resamples,
        "seed": seed,
        "methods": methods,
    }
