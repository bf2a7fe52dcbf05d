"""The wording check's cost on a dataset's own groups (minicache_bench.tools.wording_refusals)."""

from __future__ import annotations

from minicache.hit.wording import learn_wording
from minicache_bench.tools import wording_refusals

AREA = [
    "A garden plot measures 5 feet by 4 feet. What is the area of the plot?",
    "A garden plot measures 8 feet by 2 feet. What is the area of the plot?",
]


def test_each_rule_refuses_what_its_setting_refuses():
    garden = [text.replace("the area of the plot", "the garden area") for text in AREA]
    profile = learn_wording(garden)
    assert profile["asked"] == ["area", "garden"]
    elsewhere = "A garden plot measures 6 feet by 3 feet. What is the area of this garden plot?"
    assert not wording_refusals.refused_by("asked", profile, elsewhere)
    assert wording_refusals.refused_by("asked-phrase", profile, elsewhere)  # its phrase: "area"
    profile = learn_wording(AREA)
    compound = "A garden plot measures 6 feet by 3 feet. What is the usable area of the plot?"
    assert not wording_refusals.refused_by("asked", profile, compound, AREA)
    assert wording_refusals.refused_by("asked-novel", profile, compound, AREA)  # "usable"
    perimeter = "A garden plot measures 6 feet by 3 feet. What is the perimeter of the plot?"
    assert wording_refusals.refused_by("asked", profile, perimeter)
    assert not wording_refusals.refused_by("operations", profile, perimeter)


def test_the_table_counts_later_requests_of_each_gold_group_under_every_rule():
    table = wording_refusals.measure("formula", None, 3)
    lines = table.splitlines()
    assert lines[0].startswith("formula: 50 gold groups")
    rows = {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| ")}
    assert set(wording_refusals.RULES) <= set(rows)
    counts = {rule: int(rows[rule].split(" | ")[1]) for rule in wording_refusals.RULES}
    # the modes are cumulative: the asked words add refusals to the operation words', never fewer
    assert counts["operations"] <= counts["asked"] <= counts["asked-phrase"]
