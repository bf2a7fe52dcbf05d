"""Learned extraction rules (GenCache-style): for each variable, the words that anchor its number in
the text, a keyword of its name near it, or its position among the request's numbers, learned from
validated extractions and used on a hit only when they resolve every variable unambiguously.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from minicache.programs.numbers import Candidate, find_candidates
from minicache.store.base import Variable

_TOKEN = re.compile(r"[a-z]+")
_WORD = re.compile(r"[A-Za-z]+")  # _TOKEN on text not lower-cased


def _anchor_words(text: str, cand: Candidate, width: int = 4) -> list[str]:
    return _TOKEN.findall(text[max(0, cand.start - 80) : cand.start].lower())[-width:]


_WEAK_ANCHORS = {"of", "is", "at", "and", "the", "a", "for", "to", "by", "with", "in"}


@dataclass(frozen=True)
class AnchorRule:
    """The number right after these words (the last words before it)."""

    words: tuple[str, ...]
    kind: Literal["anchor"] = "anchor"

    def apply(self, text: str, cands: list[Candidate]) -> float | int | None:
        words = list(self.words)
        hits = {c.value for c in cands if _anchor_words(text, c)[-len(words) :] == words}
        # The scaled and unscaled readings of "2.4 million" share an anchor: take the first one written,
        # which the validated examples agreed with.
        hits_ordered = [c.value for c in cands if _anchor_words(text, c)[-len(words) :] == words]
        if len(hits) == 1 or (
            hits_ordered and len({c.start for c in cands if c.value in hits}) == 1
        ):
            return hits_ordered[0]
        return None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "words": list(self.words)}


@dataclass(frozen=True)
class KeywordRule:
    """The number whose nearby words share the most stems with the variable's name."""

    stems: tuple[str, ...]
    kind: Literal["keyword"] = "keyword"

    def apply(self, text: str, cands: list[Candidate]) -> float | int | None:
        # Only a unique best (by place: "2.4 million" is read both ways at one place) counts.
        scored = [(_keyword_score(text, c, list(self.stems)), c) for c in cands]
        best = max((score for score, _ in scored), default=0)
        top = [c for score, c in scored if score == best]
        if best == 0 or len({c.start for c in top}) != 1:
            return None
        return top[0].value

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "stems": list(self.stems)}


@dataclass(frozen=True)
class PositionRule:
    """The ``index``-th of exactly ``count`` numbers in the request."""

    index: int
    count: int
    kind: Literal["position"] = "position"

    def apply(self, text: str, cands: list[Candidate]) -> float | int | None:
        return cands[self.index].value if len(cands) == self.count else None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "index": self.index, "count": self.count}


Rule = AnchorRule | KeywordRule | PositionRule


def _words(value: Any, nonempty: bool) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not 0 < len(value) <= 8:
        return None
    return tuple(value) if all(isinstance(w, str) and (w or not nonempty) for w in value) else None


def parse_rule(data: Any) -> Rule | None:
    """A rule from its stored JSON form (an entry's ``rules``, an import), or None if it is not one.

    ``parse_rule(rule.to_json()) == rule`` for every rule, and ``to_json`` writes the keys in the
    order entries already in users' stores have them."""
    if isinstance(data, (AnchorRule, KeywordRule, PositionRule)):
        data = data.to_json()  # a typed rule passes the same shape checks as a stored one
    if not isinstance(data, dict):
        return None
    kind = data.get("kind")
    if kind == "anchor" and (words := _words(data.get("words"), False)) is not None:
        return AnchorRule(words)
    if kind == "keyword" and (stems := _words(data.get("stems"), True)) is not None:
        return KeywordRule(stems)
    index, count = data.get("index"), data.get("count")
    if (
        kind == "position"
        and isinstance(index, int)
        and isinstance(count, int)
        and 0 <= index < count
    ):
        return PositionRule(index, count)
    return None


def valid_rule(rule: Any) -> bool:
    """Shape check for rules that come from outside (imports): anything else is rejected."""
    return parse_rule(rule) is not None


def apply_rule(rule: Rule | dict[str, Any], text: str) -> float | int | None:
    """The value the rule (typed, or in its stored JSON form) gives for ``text``, or None when it does
    not apply unambiguously or is not a valid rule."""
    parsed = parse_rule(rule)
    return None if parsed is None else parsed.apply(text, find_candidates(text))


def learn_rules(
    template: list[Variable], validated: list[tuple[str, dict[str, Any]]]
) -> dict[str, Rule]:
    """Per-variable rules that reproduce every validated extraction; variables without one are left out.

    ``validated`` holds (request text, variables the small model extracted and validation confirmed).
    An *anchor* rule is the shortest run of words (ending right before the number) shared by all
    examples; a *position* rule is "the k-th of exactly n numbers". A rule is kept only if applying
    it to each validated request gives back exactly the validated value.
    """
    if len(validated) < 2:
        return {}
    rules: dict[str, Rule] = {}
    for var in template:
        contexts: list[tuple[str, Candidate]] = []
        for text, values in validated:
            value = values.get(var.name)
            matches = [c for c in find_candidates(text) if c.value == value]
            if len(matches) != 1:
                contexts = []
                break
            contexts.append((text, matches[0]))
        if not contexts:
            continue
        windows = [_anchor_words(text, cand) for text, cand in contexts]
        for size in range(1, 5):
            tails = {tuple(w[-size:]) for w in windows if len(w) >= size}
            if len(tails) == 1 and all(len(w) >= size for w in windows):
                anchor = next(iter(tails))
                if anchor[-1] in _WEAK_ANCHORS and size == 1:
                    continue
                rule: Rule = AnchorRule(anchor)
                if all(apply_rule(rule, text) == vals[var.name] for text, vals in validated):
                    rules[var.name] = rule
                    break
        if var.name in rules:
            continue
        stems = name_stems(var.name)
        if stems:
            rule = KeywordRule(tuple(stems))
            if all(apply_rule(rule, text) == vals[var.name] for text, vals in validated):
                rules[var.name] = rule
                continue
        positions = set()
        for text, values in validated:
            cands = [c.value for c in find_candidates(text)]
            positions.add(
                (cands.index(values[var.name]) if values[var.name] in cands else -1, len(cands))
            )
        if len(positions) == 1:
            index, count = next(iter(positions))
            if index >= 0:
                rule = PositionRule(index, count)
                if all(apply_rule(rule, text) == vals[var.name] for text, vals in validated):
                    rules[var.name] = rule
    return rules


def name_stems(name: str) -> list[str]:
    """Five-letter stems of a variable name's words ("operating_income" -> ["opera", "incom"])."""
    return [w[:5] for w in re.split(r"[_\W\d]+", name.lower()) if len(w) >= 3]


def acronym(stems: list[str]) -> str | None:
    """The initials of a name of three or more words ("earnings_per_share" -> "eps"), or None.

    Financial text abbreviates the very quantities it names ("a share price of $78 and EPS of $9");
    a keyword rule that sees only "share" near the price and nothing it knows near "EPS" reads the
    price as the earnings per share (on Formula, 5 Price-to-Earnings hits were refused that way)."""
    return "".join(s[0] for s in stems) if len(stems) >= 3 else None


def _keyword_score(text: str, cand: Candidate, stems: list[str]) -> int:
    """How close the words of the name are to the number: up to 8 words before it count most (the
    nearer the more), up to 3 words after it less. The name's acronym counts as all of its words."""
    short = (acronym(stems) or "").upper()  # written in capitals: "EPS", never the word "air"
    before = _WORD.findall(text[max(0, cand.start - 80) : cand.start])[-8:]
    after = _WORD.findall(text[cand.end : cand.end + 40])[:3]

    def weight(word: str) -> int:
        return len(stems) if word == short else int(word[:5].lower() in stems)

    score = 0
    for distance, word in enumerate(reversed(before), start=1):
        score += (10 - distance) * weight(word)
    for distance, word in enumerate(after, start=1):
        score += (4 - distance) * weight(word)
    return score
