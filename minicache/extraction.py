"""Hit-path extraction: fill an entry's template with this request's values.

Three ways, cheapest first:

1. **Learned rules** (GenCache-style): for each variable, a pattern learned from validated
   extractions - the words that anchor its number in the text, or its position among the numbers -
   used only when it resolves every variable of the request unambiguously.
2. **Candidate choice**: the small model fills the template as schema-constrained JSON, but each
   variable may only take a value among the numbers actually found in the request (a JSON-schema
   ``enum``), so the output is a handful of tokens and cannot invent digits.
3. **Free extraction**: the same call without the enum, for variables whose values are not written
   as numbers in the text.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import BackendError, ExtractionError  # ExtractionError re-exported
from .models.base import GenerationOptions, Message, ModelBackend
from .store.base import Entry, Variable

_NUMBER = re.compile(
    r"(?<![\w.])(?P<neg>-|−)?(?P<cur>[$€£¥])?\s?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?P<pct>\s?%| percent\b)?(?:\s?(?P<scale>million|billion|thousand|mn|bn)\b)?", re.I)
_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
          "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "half": 0.5,
          "twice": 2, "double": 2, "quarterly": 4, "monthly": 12, "semi-annually": 2, "semiannually": 2,
          "annually": 1, "daily": 365, "weekly": 52}
_WORD_RE = re.compile(r"\b(" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")\b", re.I)
_SCALES = {"thousand": 1e3, "million": 1e6, "mn": 1e6, "billion": 1e9, "bn": 1e9}
_TOKEN = re.compile(r"[a-z]+")


# A string variable whose description says this was lifted from the request's own words (see
# minicache.lifting); an extracted value for it must be made of the request's words too.
REQUEST_WORDS = "words taken from the request"
_TEXT_WORD = re.compile(r"[a-z0-9]{3,}")


def check_grounded(template: list[Variable], values: dict[str, Any], text: str) -> None:
    """Reject a text value with words the request does not contain (a model copying an example)."""
    words = set(_TEXT_WORD.findall(text.lower()))
    for v in template:
        if v.type == "string" and REQUEST_WORDS in v.description:
            missing = [w for w in _TEXT_WORD.findall(str(values.get(v.name, "")).lower()) if w not in words]
            if missing or not str(values.get(v.name, "")).strip():
                raise ExtractionError(f"variable {v.name!r} should be words of the request; "
                                      f"{', '.join(missing[:5]) or 'it is empty'} not found there")


@dataclass
class Candidate:
    value: float
    start: int
    end: int
    text: str


def _clean(value: float) -> float | int:
    return int(value) if float(value).is_integer() and abs(value) < 1e15 else round(value, 10)


def find_candidates(text: str) -> list[Candidate]:
    """Every number written in ``text``, in order, plus its scaled value ("2.4 million" -> 2400000).

    Years and other numbers are all candidates: the model, or a rule, decides which one a variable is.
    """
    found: list[Candidate] = []
    for m in _NUMBER.finditer(text):
        raw = float(m.group("num").replace(",", ""))
        if m.group("neg"):
            raw = -raw
        found.append(Candidate(_clean(raw), m.start(), m.end(), m.group(0)))
        if m.group("scale"):
            found.append(Candidate(_clean(raw * _SCALES[m.group("scale").lower()]), m.start(), m.end(), m.group(0)))
    for m in _WORD_RE.finditer(text):
        found.append(Candidate(_WORDS[m.group(1).lower()], m.start(), m.end(), m.group(0)))
    found.sort(key=lambda c: (c.start, c.end))
    return found


def candidate_values(text: str) -> list[float | int]:
    seen: list[float | int] = []
    for c in find_candidates(text):
        if c.value not in seen:
            seen.append(c.value)
    return seen


# ---------------------------------------------------------------------------------------------
# Learned rules


def _anchor_words(text: str, cand: Candidate, width: int = 4) -> list[str]:
    return _TOKEN.findall(text[max(0, cand.start - 80):cand.start].lower())[-width:]


Method = Literal["rule", "align", "choice", "free"]  # how a hit's values were found; the last two use the model

_WEAK_ANCHORS = {"of", "is", "at", "and", "the", "a", "for", "to", "by", "with", "in"}


@dataclass(frozen=True)
class AnchorRule:
    """The number right after these words (the last words before it)."""

    words: tuple[str, ...]
    kind: Literal["anchor"] = "anchor"

    def apply(self, text: str, cands: list[Candidate]) -> float | int | None:
        words = list(self.words)
        hits = {c.value for c in cands if _anchor_words(text, c)[-len(words):] == words}
        # The scaled and unscaled readings of "2.4 million" share an anchor: take the first one written,
        # which the validated examples agreed with.
        hits_ordered = [c.value for c in cands if _anchor_words(text, c)[-len(words):] == words]
        if len(hits) == 1 or (hits_ordered and len({c.start for c in cands if c.value in hits}) == 1):
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
    if kind == "position" and isinstance(index, int) and isinstance(count, int) and 0 <= index < count:
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


def learn_rules(template: list[Variable], validated: list[tuple[str, dict[str, Any]]]) -> dict[str, Rule]:
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
            positions.add((cands.index(values[var.name]) if values[var.name] in cands else -1, len(cands)))
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


def _keyword_score(text: str, cand: Candidate, stems: list[str]) -> int:
    """How close the words of the name are to the number: up to 8 words before it count most (the
    nearer the more), up to 3 words after it less."""
    before = [w[:5] for w in _TOKEN.findall(text[max(0, cand.start - 80):cand.start].lower())[-8:]]
    after = [w[:5] for w in _TOKEN.findall(text[cand.end:cand.end + 40].lower())[:3]]
    score = 0
    for distance, word in enumerate(reversed(before), start=1):
        score += (10 - distance) * (word in stems)
    for distance, word in enumerate(after, start=1):
        score += (4 - distance) * (word in stems)
    return score


# ---------------------------------------------------------------------------------------------
# Model extraction


EXTRACT_SYSTEM = (
    "You fill in the variables of a calculation from a request. For each variable, pick the value "
    "the request gives for it, following its description exactly (units, percent as written). "
    "Reply with JSON only.\n\nVariables:\n{variables}"
)


def template_prompt(template: list[Variable]) -> str:
    lines = []
    for v in template:
        unit = f" [{v.unit}]" if v.unit else ""
        lines.append(f"- {v.name} ({v.type}){unit}: {v.description or v.name.replace('_', ' ')}")
    return EXTRACT_SYSTEM.format(variables="\n".join(lines))


def template_schema(template: list[Variable], candidates: list[float | int] | None) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for v in template:
        if v.type == "string":
            props[v.name] = {"type": "string", "maxLength": 200}
        elif candidates:
            props[v.name] = {"enum": candidates}
        else:
            props[v.name] = {"type": "integer" if v.type == "integer" else "number"}
    return {"type": "object", "properties": props, "required": [v.name for v in template],
            "additionalProperties": False}


@dataclass
class Extraction:
    variables: dict[str, Any]
    method: Method
    seconds: float
    small_tokens: int = 0
    detail: dict[str, Any] = field(default_factory=dict)


def check_types(template: list[Variable], values: dict[str, Any]) -> dict[str, Any]:
    """Type and range checks on an extraction: every variable present, numbers finite."""
    out: dict[str, Any] = {}
    for v in template:
        if v.name not in values:
            raise ExtractionError(f"variable {v.name!r} missing from extraction")
        value = values[v.name]
        if v.type in ("number", "integer"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ExtractionError(f"variable {v.name!r} should be a number, got {value!r}")
            if value != value or value in (float("inf"), float("-inf")) or abs(value) > 1e15:
                raise ExtractionError(f"variable {v.name!r} is out of range: {value!r}")
            if v.type == "integer":
                if float(value) != int(value):
                    raise ExtractionError(f"variable {v.name!r} should be an integer, got {value!r}")
                value = int(value)
        elif not isinstance(value, str):
            raise ExtractionError(f"variable {v.name!r} should be a string, got {value!r}")
        out[v.name] = value
    return out


class Extractor:
    def __init__(self, small: ModelBackend, *, use_rules: bool = True, use_choice: bool = True) -> None:
        self.small = small
        self.use_rules = use_rules
        self.use_choice = use_choice

    @staticmethod
    def text_for(entry: Entry, text: str) -> str:
        """What extraction reads for ``entry``: the text after the group's shared boilerplate, if the
        request starts with it (values that vary cannot be in a prefix every request shares)."""
        prefix = entry.validation.get("shared_prefix") or ""
        return text[len(prefix):] if prefix and text.startswith(prefix) else text

    def by_rules(self, entry: Entry, text: str) -> dict[str, Any] | None:
        """Values from the learned rules, or None unless every variable gets its own number."""
        if not self.use_rules or not entry.rules or any(v.name not in entry.rules for v in entry.template):
            return None
        values = {}
        for v in entry.template:
            value = apply_rule(entry.rules[v.name], text)
            if value is None:
                return None
            values[v.name] = value
        if len(set(values.values())) < len(values):
            return None  # two variables read the same number: not the unambiguous match rules need
        return values

    def by_model(self, template: list[Variable], text: str, *, choice: bool | None = None) -> Extraction:
        choice = self.use_choice if choice is None else choice
        candidates = candidate_values(text) if choice else None
        if choice and not candidates:
            candidates = None
        schema = template_schema(template, candidates)
        began = time.perf_counter()
        try:
            out = self.small.complete(
                [Message("system", template_prompt(template)), Message("user", text)],
                GenerationOptions(max_tokens=32 + 24 * len(template), json_schema=schema))
        except BackendError as exc:
            raise ExtractionError(f"small model failed: {exc}") from exc
        try:
            values = json.loads(out.text)
        except json.JSONDecodeError as exc:
            raise ExtractionError(f"small model returned invalid JSON: {out.text[:200]!r}") from exc
        if not isinstance(values, dict):
            raise ExtractionError("small model returned JSON that is not an object")
        checked = check_types(template, values)
        check_grounded(template, checked, text)
        detail = {"margins": dict(out.choice_margins)} if getattr(out, "choice_margins", None) else {}
        return Extraction(checked, "choice" if candidates else "free",
                          time.perf_counter() - began, out.prompt_tokens + out.completion_tokens, detail)

    def extract(self, entry: Entry, text: str) -> Extraction:
        began = time.perf_counter()
        text = self.text_for(entry, text)
        values = self.by_rules(entry, text)
        if values is not None:
            return Extraction(check_types(entry.template, values), "rule", time.perf_counter() - began)
        mode = entry.validation.get("extraction", "choice")
        return self.by_model(entry.template, text, choice=(mode == "choice"))
