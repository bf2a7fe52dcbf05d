"""The run-reading tools on two tiny ``requests.jsonl`` files: what they read and what they report."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from minicache_bench.tools import breakdown, compare

PROBATION = "HitRefused: probation: a new entry's first hit attempts are answered by the miss path"


def row(
    method: str,
    request_id: str,
    route: str,
    answer: float,
    correct: bool,
    latency_s: float,
    **detail: Any,
) -> dict[str, Any]:
    """One row as ``minicache bench`` writes it (the fields the tools read); ``detail`` holds the
    engine's own fields, its ``engine_route`` the engine's route (``fallback`` for a refused hit,
    which the row's ``route`` reports as a ``miss``)."""
    if "engine_route" in detail:
        detail["route"] = detail.pop("engine_route")
    return {
        "method": method,
        "id": request_id,
        "group": "Quick Ratio (Acid-Test Ratio)",
        "route": route,
        "answer": answer,
        "gold": "1.0",
        "correct": correct,
        "latency_s": latency_s,
        "detail": detail,
        "waited_s": 0.0,
    }


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path / "requests.jsonl"


def earlier_rows() -> list[dict[str, Any]]:
    """r1 a miss with a build, r2 a hit, r3 a refused hit; r4 only minicache answered."""
    return [
        row("pot", "r1", "miss", 1.0, True, 4.0),
        row("minicache", "r1", "miss", 1.0, True, 4.0, engine_route="miss", builds=[[2.5, True]]),
        row("pot", "r2", "miss", 2.0, True, 4.0),
        row("minicache", "r2", "hit", 2.0, True, 0.01, engine_route="hit", extraction="align"),
        row("pot", "r3", "miss", 3.0, True, 4.0),
        row(
            "minicache",
            "r3",
            "miss",
            3.0,
            True,
            4.0,
            engine_route="fallback",
            fallback_reason=PROBATION,
        ),
        row("minicache", "r4", "hit", 4.0, True, 0.01, engine_route="hit", extraction="align"),
    ]


def later_rows() -> list[dict[str, Any]]:
    """As earlier, except r2 is now a wrong miss and r3 a hit."""
    rows = earlier_rows()
    rows[3] = row("minicache", "r2", "miss", 5.0, False, 4.0, engine_route="miss")
    rows[5] = row("minicache", "r3", "hit", 3.0, True, 0.01, engine_route="hit", extraction="align")
    return rows


@pytest.fixture
def earlier(tmp_path: Path) -> Path:
    return write(tmp_path / "earlier", earlier_rows())


@pytest.fixture
def later(tmp_path: Path) -> Path:
    return write(tmp_path / "later", later_rows())


def test_load_keeps_only_requests_both_methods_answered_in_stream_order(earlier: Path) -> None:
    cache, pot = breakdown.load(earlier)
    assert [r["id"] for r in cache] == ["r1", "r2", "r3"]
    assert sorted(pot) == ["r1", "r2", "r3"]
    assert breakdown.load(earlier.parent)[0] == cache  # a run folder reads as its requests.jsonl


def test_refusal_kind_names_the_check_that_refused_or_the_exception() -> None:
    assert breakdown.refusal_kind(PROBATION) == "probation"
    assert breakdown.refusal_kind("SandboxTimeout: 2.0 s") == "SandboxTimeout"


def test_breakdown_counts_hits_refusals_and_builds(
    earlier: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["breakdown", str(earlier.parent), "--block", "2"])
    breakdown.main()
    out = capsys.readouterr().out
    assert "3 requests answered by both methods" in out
    assert "     1-2      1 hits" in out and "     3-3      0 hits" in out
    assert "hits: 1 of 3 (33.3%); by extraction: {'align': 1}" in out
    assert "refused hits (served as misses): 1: {'probation': 1}" in out
    assert "builds: 1, 1 ok (2.5-2.5 s, mean 2.5 s), 0 failed" in out


def test_breakdown_of_the_first_requests_compares_that_prefix_with_pot(
    earlier: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["breakdown", str(earlier.parent), "--first", "2"])
    breakdown.main()
    out = capsys.readouterr().out.splitlines()
    # r1 4.0 s and r2 0.01 s against pot's 4.0 s twice: 8.0 / 4.01
    assert out[0].startswith("first 2 requests: 1.995x pot [")
    assert "accuracy 100.0% against pot's 100.0% (+0.0 points" in out[0]
    assert out[1] == "2 requests answered by both methods"


def test_compare_lists_only_the_requests_served_differently(
    earlier: Path, later: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compare.main(str(earlier), str(later))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "3 requests in the later run, 3 in both, 2 served differently"
    assert out[1].startswith("#1 r2 (Quick Ratio (Acid-Test Ratio)): hit right -> miss wrong")
    assert out[2].startswith("#2 r3 (Quick Ratio (Acid-Test Ratio)): miss right -> hit right")
    assert out[3] == f"    earlier: {PROBATION}"
    assert len(out) == 4


def test_compare_of_a_run_with_itself_finds_no_change(
    earlier: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compare.main(str(earlier), str(earlier))
    assert (
        capsys.readouterr().out == "3 requests in the later run, 3 in both, 0 served differently\n"
    )


def test_first40_compare_counts_the_requests_whose_route_answer_or_group_moved(tmp_path, capsys):
    from minicache_bench.tools import first40

    def write(folder, answers):
        folder.mkdir()
        rows = [
            {
                "method": "minicache",
                "id": f"r{i}",
                "route": route,
                "answer": answer,
                "group": "g",
                "correct": True,
                "tokens": {"target": 10, "small": 0},
            }
            for i, (route, answer) in enumerate(answers)
        ]
        (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    write(tmp_path / "before", [("miss", 1.5), ("hit", 2.0)])
    write(tmp_path / "same", [("miss", 1.5), ("hit", 2.0)])
    write(tmp_path / "moved", [("miss", 1.5), ("miss", 2.0)])
    assert first40.compare(tmp_path / "before", tmp_path / "same") == 0
    assert first40.compare(tmp_path / "before", tmp_path / "moved") == 1
    out = capsys.readouterr().out
    assert "r1: ('hit', '2.0', 'g') -> ('miss', '2.0', 'g')" in out
    assert "target tokens: 20 before, 20 after" in out
