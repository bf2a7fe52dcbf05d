"""The engine on the real embedded models: a cold Formula stream builds entries that then hit."""

from __future__ import annotations

import pytest

from minicache.engine import EngineConfig, MiniCache
from minicache_bench.mainjob import formula_stream, serve_and_show

pytestmark = pytest.mark.real_model


def test_formula_stream_builds_validated_entries_and_hits_match_gold(
    tmp_path, target_model, small_model
):
    stream = formula_stream(groups=5, per_group=6, seed=7)
    with MiniCache(
        target_model,
        small_model,
        store=str(tmp_path / "mc.db"),
        config=EngineConfig(background_builds=False),
    ) as mc:
        summary = serve_and_show(mc, stream, echo=lambda _m: None, progress=False)
        entries = mc.store.list_entries("default", "active")
    assert len(entries) >= 1, summary
    assert all(e.validation["passed"] >= 2 for e in entries)
    assert summary["hits"] >= 1, summary
    # Later requests of a built group are hits: each group with an entry served its last request from it.
    rows = summary["rows"]
    hit_rows = [r for r in rows if r["route"] == "hit"]
    assert sum(r["correct"] for r in hit_rows) >= 0.8 * len(hit_rows), hit_rows
