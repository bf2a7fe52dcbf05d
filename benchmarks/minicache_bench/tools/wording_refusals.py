"""How often the wording check would refuse requests of one computation, on a dataset's own groups.

usage: python -m minicache_bench.tools.wording_refusals DATASET [--split dev|test] [--examples K]

Why: a wording record learned from a build's two or three examples may hold words those examples
share by chance, and then it refuses later requests of the same computation, each a miss that need
not be. This measures that cost in seconds, with no model: for each gold group of the dataset (the
ground-truth computation, which the cache never reads) its first ``K`` requests are the examples,
the record is learned from them as a build learns it (:func:`minicache.hit.wording.learn_wording`),
and every later request of the group is checked. Every refusal counted is of a request its group's
computation answers; what the table shows is the cost of each rule, not what it catches (the tests
pin that). Gold groups are wider than the cache's groups (SVAMP's gather many stories per
equation), so the figures are an upper bound on a group's refusals; SVAMP's records are mostly
empty for that reason.

Rules, as columns:

* ``asked``: the asked quantity's words every example wrote, looked for anywhere in the request's
  question, and a request's own asked phrase that shares none of them (the default check,
  ``VerifyConfig.wording = "asked"``, with the operation words);
* ``asked-phrase``: the same, with the words required in the request's own asked phrase (not a
  setting: measured to show why they are looked for anywhere);
* ``asked-novel``: with ``asked``, a word in the request's asked phrase that no example's question
  wrote ("How much *compound* interest" of a simple-interest entry; not a setting: measured to show
  what checking the words a request adds would cost);
* ``operations``: operation words the examples did not write, alone;
* ``full``: every content word every example wrote, with the rest.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence

from minicache.config.engine import Wording
from minicache.errors import HitRefused
from minicache.hit.wording import (
    asked_words,
    check_wording,
    learn_wording,
    plain_words,
    question_of,
)
from minicache.request import request_text
from minicache_bench.data import load

RULES = ("operations", "asked", "asked-phrase", "asked-novel", "full")


def refused_by(
    rule: str, profile: dict[str, list[str]], text: str, examples: Sequence[str] = ()
) -> bool:
    """Whether ``rule`` refuses ``text`` against ``profile``, learned from ``examples``."""
    if rule == "asked-novel":
        written = set().union(*(plain_words(question_of(e)) for e in examples))
        if (asked_words(question_of(text)) or set()) - written:
            return True
        rule = "asked"
    if rule == "asked-phrase":
        recorded = profile.get("asked") or []
        phrase = asked_words(question_of(text))
        if phrase is not None and any(w not in phrase for w in recorded):
            return True
        rule = "asked"  # no asked phrase: the words are looked for anywhere
    try:
        check_wording(profile, text, {}, Wording(rule))
    except HitRefused:
        return True
    return False


def measure(dataset: str, split: str | None, examples: int) -> str:
    groups: dict[str, list[str]] = defaultdict(list)
    for request in load(dataset, split=split):
        groups[request.group or request.id].append(request_text(request.question, request.context))
    checked = recorded = 0
    refused = dict.fromkeys(RULES, 0)
    for texts in groups.values():
        if len(texts) <= examples:
            continue
        profile = learn_wording(texts[:examples])
        shown = texts[:examples]
        recorded += bool(profile.get("asked"))
        for text in texts[examples:]:
            checked += 1
            for rule in RULES:
                refused[rule] += refused_by(rule, profile, text, shown)
    lines = [
        f"{dataset}{f' ({split} split)' if split else ''}: {len(groups)} gold groups, "
        f"{recorded} with an asked record from their first {examples} requests; "
        f"{checked} later requests checked",
        "",
        "| rule | refused | share |",
        "|---|---:|---:|",
    ]
    for rule in RULES:
        share = 100 * refused[rule] / checked if checked else 0.0
        lines.append(f"| {rule} | {refused[rule]} | {share:.1f}% |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", help="formula, tatqa, svamp, ... (minicache_bench.data.load)")
    parser.add_argument("--split", choices=("dev", "test"), default=None)
    parser.add_argument("--examples", type=int, default=3, help="a group's examples (default 3)")
    args = parser.parse_args(argv)
    print(measure(args.dataset, args.split, args.examples))


if __name__ == "__main__":
    main()
