"""The dev/test splits of TAT-QA and SVAMP: disjoint, fixed in the code, recorded, and refused by
the datasets that have none before any model loads."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from minicache.cli.main import Runtime, main
from minicache_bench.data import load, load_svamp, load_tatqa
from minicache_bench.datasets import svamp
from minicache_bench.splits import SVAMP_TEST_SKELETONS, has_split, svamp_test_rule
from tests.fakes import FakeSmall, FakeTarget, HashEmbedder


def test_tatqa_dev_and_test_share_no_request_and_together_are_the_whole_dataset():
    dev, test = load_tatqa("dev"), load_tatqa("test")
    assert dev and test
    assert {r.id for r in dev}.isdisjoint({r.id for r in test})
    assert {(r.question, r.context) for r in dev}.isdisjoint(
        {(r.question, r.context) for r in test}
    )
    assert {r.context for r in dev}.isdisjoint(
        {r.context for r in test}
    )  # other companies' reports
    assert all(r.id.startswith("tatqa-dev-") for r in dev)
    assert all(r.id.startswith("tatqa-test_gold-") for r in test)
    assert [r.id for r in dev + test] == [r.id for r in load_tatqa()]  # no split: both, as before


def test_svamp_dev_and_test_share_no_request_and_no_equation_skeleton():
    dev, test = load_svamp("dev"), load_svamp("test")
    assert {r.id for r in dev}.isdisjoint({r.id for r in test})
    assert {r.group for r in dev}.isdisjoint({r.group for r in test})
    assert {r.group for r in test} == set(SVAMP_TEST_SKELETONS)
    assert len(dev) + len(test) == len(load_svamp()) == 1000
    assert (len(dev), len(test)) == (756, 244)


def test_svamps_listed_test_skeletons_still_follow_the_rule_they_were_chosen_by():
    """The list is the split; the rule says how it was made. A change to the data or to the
    skeleton's masking that would move requests between the splits fails here."""
    assert svamp_test_rule(r.group for r in svamp() if r.group) == SVAMP_TEST_SKELETONS
    assert len(SVAMP_TEST_SKELETONS) == len({r.group for r in svamp()}) // 3


def test_a_distinct_stream_keeps_its_split_and_other_datasets_refuse_one():
    assert {r.group for r in load("svamp-distinct", split="test")} == set(SVAMP_TEST_SKELETONS)
    assert has_split("tatqa-distinct") and not has_split("mix-distinct")
    for dataset in ("formula", "webshop", "mix", "stepcache-micro"):
        with pytest.raises(ValueError, match="has no dev/test split"):
            load(dataset, split="dev")


def _no_models() -> Runtime:
    def refuse():
        raise AssertionError("models loaded before --split was checked")

    return Runtime(backends=refuse, embedder=HashEmbedder)


@pytest.mark.parametrize("dataset", ["formula", "webshop", "mix"])
def test_split_on_a_dataset_without_one_is_refused_before_any_model_loads(tmp_path, dataset):
    result = CliRunner().invoke(
        main,
        ["bench", "--dataset", dataset, "--split", "test", "--out", str(tmp_path / "b")],
        obj=_no_models(),
    )
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert f"dataset {dataset!r} has no dev/test split" in result.stderr
    assert "only tatqa, svamp" in result.stderr
    assert not (tmp_path / "b").exists()


def test_a_split_run_records_its_split_and_its_report_names_it(tmp_path):
    out = tmp_path / "b"
    runtime = Runtime(backends=lambda: (FakeTarget(), FakeSmall()), embedder=lambda: HashEmbedder())
    args = ["bench", "--dataset", "svamp", "--split", "test", "--limit", "3", "--methods", "pot"]
    result = CliRunner().invoke(main, [*args, "--out", str(out)], obj=runtime)
    assert result.exit_code == 0, result.stderr
    config = json.loads((out / "results.json").read_text())["config"]
    assert (
        config["split"] == "test"
    )  # the command line (config.command) is sys.argv, not the runner's
    assert (out / "report.md").read_text().startswith("# Benchmark: svamp, test split\n")
    ids = {json.loads(line)["id"] for line in (out / "requests.jsonl").read_text().splitlines()}
    assert ids <= {r.id for r in load_svamp("test")} and len(ids) == 3
