"""``gptcache``: the real GPTCache library in front of pot, on fake models and a hash embedder."""

from __future__ import annotations

import json

import pytest

from minicache.sandbox import SandboxPool
from minicache_bench import run_benchmark
from minicache_bench.baselines import PoT
from minicache_bench.data import BenchRequest
from minicache_bench.methods import build_method
from tests.fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    SI_VALUES,
    SIMPLE_INTEREST,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
)

pytest.importorskip("gptcache")


def _request(i: str, domain, values) -> BenchRequest:
    return BenchRequest(i, domain.ask(*values), domain.answer(*values))


@pytest.fixture
def sandbox():
    with SandboxPool(size=1) as pool:
        yield pool


def test_a_repeated_prompt_is_served_from_gptcaches_own_cache_and_another_prompt_misses(
    tmp_path, sandbox
):
    from minicache_bench.gptcache_method import GPTCache

    target = FakeTarget()
    method = GPTCache(PoT(target, sandbox), HashEmbedder(), str(tmp_path / "gptcache-data"))
    # GPTCache's defaults, not ours: its distance evaluation, its threshold, SQLite and faiss.
    assert type(method.cache.similarity_evaluation).__name__ == "SearchDistanceEvaluation"
    assert method.cache.config.similarity_threshold == 0.8
    assert type(method.cache.data_manager.v).__name__ == "Faiss"
    assert (tmp_path / "gptcache-data" / "sqlite.db").exists()

    cr = _request("cr0", CURRENT_RATIO, CR_VALUES[0])
    first = method.solve(cr)
    assert first.route == "miss" and first.answer == pytest.approx(cr.answer)
    calls = len(target.calls)
    again = method.solve(cr)
    assert again.route == "hit" and again.answer == pytest.approx(cr.answer)
    assert len(target.calls) == calls  # answered by GPTCache, not the target
    assert again.detail["library"] == "gptcache==0.1.44"

    si = _request("si0", SIMPLE_INTEREST, SI_VALUES[0])
    other = method.solve(si)
    assert other.route == "miss" and other.answer == pytest.approx(si.answer)
    assert len(target.calls) > calls


def test_a_run_with_gptcache_records_its_rows_and_a_resumed_run_refills_its_cache(
    tmp_path, sandbox
):
    rows = [
        {"id": i, "question": domain.ask(*values), "answer": domain.answer(*values)}
        for i, domain, values in (
            ("cr0", CURRENT_RATIO, CR_VALUES[0]),
            ("si0", SIMPLE_INTEREST, SI_VALUES[0]),
        )
    ]
    dataset = tmp_path / "two.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out"
    kwargs = dict(
        dataset=str(dataset),
        methods=["gptcache"],
        small=FakeSmall(),
        embedder=HashEmbedder(),
        out=out,
        sandbox=sandbox,
        command="test",
    )
    results = run_benchmark(target=FakeTarget(), **kwargs)
    assert results["methods"]["gptcache"]["accuracy"] == 1.0
    written = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert {r["method"] for r in written} == {"gptcache"}  # not read back as gptcache-like
    assert all(r["detail"]["library"] == "gptcache==0.1.44" for r in written)
    assert (out / "gptcache.db-data" / "sqlite.db").exists()

    # A later chunk's method starts empty and is refilled from the rows read back.
    target = FakeTarget()
    method = build_method(
        "gptcache", target, FakeSmall(), sandbox, HashEmbedder(), str(out / "gptcache.db")
    )
    method.resume(
        [
            (BenchRequest(r["id"], r["question"], r["answer"]), w)
            for r, w in zip(rows, written, strict=True)
        ]
    )
    hit = method.solve(BenchRequest("cr0", rows[0]["question"], rows[0]["answer"]))
    assert hit.route == "hit" and not target.calls
