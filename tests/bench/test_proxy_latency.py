"""The proxy-latency report's statistics: paired ratios summarised by a geometric mean and a
bootstrap interval that a rerun reproduces."""

from __future__ import annotations

import math

from minicache_bench.proxy_latency import geomean, interval


def test_geomean_of_reciprocal_ratios_is_one() -> None:
    assert math.isclose(geomean([0.5, 2.0]), 1.0)


def test_interval_holds_the_geometric_mean_and_repeats_exactly() -> None:
    ratios = [0.97, 1.01, 1.04, 0.99, 1.02, 1.00, 0.98, 1.03]
    low, high = interval(ratios, resamples=2000)
    assert low < geomean(ratios) < high
    assert (low, high) == interval(ratios, resamples=2000)


def test_identical_ratios_give_a_point_interval() -> None:
    assert interval([1.02] * 5, resamples=500) == (1.02, 1.02)
