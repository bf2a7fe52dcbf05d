"""Routing replayed without a model (minicache_bench.tools.route_replay)."""

from __future__ import annotations

from minicache_bench.data import load, select
from minicache_bench.tools import route_replay


def test_the_replay_routes_a_table_stream_with_and_without_row_masks():
    table = route_replay.measure("tatqa", "dev", 60, None, 0, 3)
    lines = table.splitlines()
    assert lines[0] == "tatqa (dev): 60 requests"
    routed, written = (
        next(line for line in lines if line.strip().startswith(name))
        for name in ("table rows masked:", "rows as written:")
    )

    def groups(line: str) -> int:
        return int(line.split(":")[1].split()[0])

    # masking the rows the questions name only ever joins requests that differ in their row
    assert groups(routed) < groups(written)


def test_the_summary_counts_purity_and_the_requests_that_reach_a_built_group():
    requests = select(load("tatqa", split="dev"), limit=5, groups=None, seed=0)
    s = route_replay.summary(requests, ["a", "a", "a", "a", "b"], after=3)
    assert s["groups"] == 2 and s["reach"] == 1  # the fourth request finds three before it
    assert 0 < s["purity"] <= 1
