"""The re-read of a run's zero-model hits (minicache_bench.tools.reverify) on a tiny run written here:
a store with one entry whose rule reads the first amount as the assets, and hits served by it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fakes import CR_VALUES, CURRENT_RATIO
from minicache.hit.profile import learn_profile
from minicache.store import Entry, SQLiteStore, Variable
from minicache_bench.tools import reverify

CR = [
    Variable("current_assets", "integer", "current assets, dollars"),
    Variable("current_liabilities", "integer", "current liabilities, dollars"),
]
IN_ORDER = {  # learned where the examples wrote the assets first
    "current_assets": {"kind": "position", "index": 0, "count": 2},
    "current_liabilities": {"kind": "position", "index": 1, "count": 2},
}
TEXTS = {
    # The words agree with the rule's order: served with the check on too.
    "assets-first": "What is the current ratio if current assets are $64,000 and current "
    "liabilities are $16,000?",
    # The rule swaps the two amounts against their words: refused with the check on.
    "liabilities-first": "What is the current ratio if current liabilities are $16,000 and "
    "current assets are $64,000?",
}
READ_IN_ORDER = {"current_assets": 64000, "current_liabilities": 16000}
SWAPPED = {"current_assets": 16000, "current_liabilities": 64000}


def entry(entry_id: str, rules: dict[str, Any]) -> Entry:
    pairs = [
        (CURRENT_RATIO.ask(*v), dict(zip(CURRENT_RATIO.names, v, strict=True)))
        for v in CR_VALUES[:3]
    ]
    profile = learn_profile(CR, pairs, [CURRENT_RATIO.answer(*v) for v in CR_VALUES[:3]])
    profile["exemplars"] = []  # the rule alone reads the request
    return Entry(
        id=entry_id,
        tenant="default",
        group_id="grp_cr",
        template=CR,
        program="def solve(current_assets, current_liabilities):\n"
        "    return current_assets / current_liabilities\n",
        rules=rules,
        validation={"extraction": "choice", "profile": profile},
    )


def hit(request_id: str, correct: bool, values: dict[str, int], **detail: Any) -> dict[str, Any]:
    """A minicache hit row as ``minicache bench`` writes it (the fields the re-read uses)."""
    return {
        "method": "minicache",
        "id": request_id,
        "group": "Current Ratio",
        "route": "hit",
        "answer": values["current_assets"] / values["current_liabilities"],
        "correct": correct,
        "detail": {"route": "hit", "group": "grp_cr", "extraction": "rule", "variables": values}
        | detail,
    }


def pot(request_id: str, correct: bool) -> dict[str, Any]:
    return {"method": "pot", "id": request_id, "route": "miss", "correct": correct, "detail": {}}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """The rule-reading entry, then a revision that has no rules (only the small model reads with
    it); a right hit and a swapped wrong hit served by the first, found by the time they started."""
    store = SQLiteStore(str(tmp_path / reverify.STORE_FILE))
    first = store.put_entry(entry("ent_rules", IN_ORDER))
    store.put_entry(entry("ent_no_rules", {}))
    replaced = store.get_entry("default", first.id)
    assert replaced is not None and replaced.status == "superseded"
    store.close()
    before = replaced.updated_at - 1.0
    rows = [
        pot("assets-first", True),
        hit("assets-first", True, READ_IN_ORDER, started_at=before),
        pot("liabilities-first", True),
        hit("liabilities-first", False, SWAPPED, started_at=before),
        hit("model-chosen", True, READ_IN_ORDER, extraction="choice"),  # not re-read
    ]
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_the_check_refuses_the_swapped_hit_and_serves_the_one_its_words_confirm(run: Path) -> None:
    rereads, coverage = reverify.reverify(run, TEXTS)
    by_id = {r.row["id"]: r for r in rereads}
    assert sorted(by_id) == ["assets-first", "liabilities-first"]  # zero-model hits only
    assert coverage == {"entry found by time": 2}
    assert {r.entry_id for r in rereads} == {"ent_rules"}  # the version not yet replaced
    right, wrong = by_id["assets-first"], by_id["liabilities-first"]
    assert right.verdicts == {"off": reverify.Verdict.SAME, "on": reverify.Verdict.SAME}
    assert wrong.verdicts == {"off": reverify.Verdict.SAME, "on": reverify.Verdict.REFUSED}
    assert wrong.checks == {"on": "uncorroborated"}


def test_the_table_counts_the_cache_error_the_check_avoids(run: Path) -> None:
    rereads, _ = reverify.reverify(run, TEXTS)
    off, on = reverify.tally(rereads, "off"), reverify.tally(rereads, "on")
    assert off["same"] == 2 and off.get("refused", 0) == 0
    assert off["wrong_served"] == 1 and off["wrong_served_pot_right"] == 1
    assert on["same"] == 1 and on["refused"] == 1 and on["refused: uncorroborated"] == 1
    assert on["wrong_refused_pot_right"] == 1 and on.get("right_refused", 0) == 0
    assert on.get("wrong_served", 0) == 0


def test_a_row_that_names_its_entry_is_read_with_that_version_even_when_superseded(
    run: Path,
) -> None:
    rows = [
        hit("assets-first", True, READ_IN_ORDER, entry_id="ent_rules"),
        hit("liabilities-first", True, READ_IN_ORDER, entry_id="ent_no_rules"),
    ]
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rereads, coverage = reverify.reverify(run, TEXTS)
    assert coverage == {"entry found by id": 2}
    assert [r.entry_id for r in rereads] == ["ent_rules", "ent_no_rules"]
    assert rereads[0].verdicts["on"] == reverify.Verdict.SAME
    # The revision has no rules and no exemplars: only the small model, never asked, could read.
    assert rereads[1].verdicts == {
        "off": reverify.Verdict.NEEDS_MODEL,
        "on": reverify.Verdict.NEEDS_MODEL,
    }
    assert reverify.tally(rereads, "on")["needs_model"] == 1


def test_a_row_naming_an_entry_the_store_lacks_counts_as_no_entry_not_as_found_by_id(
    run: Path,
) -> None:
    rows = [
        hit("assets-first", True, READ_IN_ORDER, entry_id="ent_rules"),
        hit("liabilities-first", True, READ_IN_ORDER, entry_id="ent_gone"),
    ]
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rereads, coverage = reverify.reverify(run, TEXTS)
    assert coverage == {"entry found by id": 1, "no entry": 1}
    assert [r.entry_id for r in rereads] == ["ent_rules"]


def test_a_hit_read_as_other_values_than_the_row_served_is_counted_apart(run: Path) -> None:
    rows = [hit("assets-first", True, SWAPPED, entry_id="ent_rules")]
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rereads, _ = reverify.reverify(run, TEXTS)
    assert rereads[0].verdicts == {"off": reverify.Verdict.OTHER, "on": reverify.Verdict.OTHER}


def test_main_prints_the_table_and_the_json_from_a_dataset_file(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = tmp_path / "requests.dataset.jsonl"
    dataset.write_text(
        "".join(
            json.dumps({"id": i, "question": q, "answer": 4.0}) + "\n" for i, q in TEXTS.items()
        )
    )
    reverify.main([str(run), "--dataset", str(dataset), "--list"])
    out = capsys.readouterr().out
    assert "| zero-model hits re-read | 2 | 2 |" in out
    assert "| &nbsp;&nbsp;refused: uncorroborated | 0 | 1 |" in out
    assert "| wrong hits refused where pot was right (cache errors avoided) | 0 | 1 |" in out
    assert "| of which pot was right (cache errors kept) | 1 | 0 |" in out
    assert (
        "- liabilities-first (Current Ratio, wrong, pot right): served, same values -> refused"
        in out
    )
    reverify.main([str(run), "--dataset", str(dataset), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["settings"]["on"]["wrong_refused_pot_right"] == 1
    assert [h["on"]["verdict"] for h in report["hits"]] == ["served, same values", "refused"]


def test_a_run_without_a_store_is_an_error_not_an_empty_table(tmp_path: Path) -> None:
    (tmp_path / "requests.jsonl").write_text("")
    with pytest.raises(SystemExit, match="no minicache.db"):
        reverify.reverify(tmp_path, {})
