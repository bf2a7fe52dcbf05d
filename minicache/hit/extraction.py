"""Hit-path extraction: fill an entry's template with this request's values.

Three ways, cheapest first:

1. **Learned rules** (GenCache-style, :mod:`minicache.hit.rules`): for each variable, a pattern learned
   from validated extractions - the words that anchor its number in the text, or its position among
   the numbers (:mod:`minicache.programs.numbers`) - used only when it resolves every variable of the request
   unambiguously.
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
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from minicache.errors import BackendError, ExtractionError  # ExtractionError re-exported
from minicache.hit.rules import apply_rule
from minicache.models.base import GenerationOptions, Message, ModelBackend
from minicache.programs.lifting import REQUEST_WORDS
from minicache.programs.numbers import candidate_values, relevant_text
from minicache.request import strip_prefix
from minicache.store.base import Entry, Variable

_TEXT_WORD = re.compile(r"[a-z0-9]{3,}")


def check_grounded(template: list[Variable], values: dict[str, Any], text: str) -> None:
    """Reject a text value with words the request does not contain (a model copying an example)."""
    words = set(_TEXT_WORD.findall(text.lower()))
    for v in template:
        if v.type == "string" and REQUEST_WORDS in v.description:
            missing = [
                w for w in _TEXT_WORD.findall(str(values.get(v.name, "")).lower()) if w not in words
            ]
            if missing or not str(values.get(v.name, "")).strip():
                raise ExtractionError(
                    f"variable {v.name!r} should be words of the request; "
                    f"{', '.join(missing[:5]) or 'it is empty'} not found there"
                )


class Method(StrEnum):
    """How a hit's values were found: the first two without the small model, the rest with it.

    The value is what answers and events record (``SolveResult.extraction``); a StrEnum, so it
    compares equal to, and serializes as, that string."""

    RULE = "rule"  # the entry's learned rules (minicache.hit.rules)
    ALIGN = "align"  # alignment with a validated example (minicache.hit.align)
    CHOICE = "choice"  # the model chose among the numbers the request writes
    FREE = "free"  # the model wrote the values (none are written as numbers)
    # A second choice with the one value the hit checks refuted taken out (HitVerifier._second_choice)
    SECOND_CHOICE = "second-choice"


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


def template_schema(
    template: list[Variable],
    candidates: list[float | int] | None,
    exclude: Mapping[str, Collection[Any]] | None = None,
    fixed: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON schema of an extraction: each number one of ``candidates`` (less the values
    ``exclude`` takes out for that variable) when given, else any number of its type; a variable
    ``fixed`` gives a value among the candidates has that value alone (the decoder writes it)."""
    props: dict[str, Any] = {}
    for v in template:
        if v.type == "string":
            props[v.name] = {"type": "string", "maxLength": 200}
        elif candidates and fixed and v.name in fixed and fixed[v.name] in candidates:
            props[v.name] = {"enum": [fixed[v.name]]}
        elif candidates:
            out = (exclude or {}).get(v.name, ())
            allowed = [c for c in candidates if c not in out]
            if not allowed:
                raise ExtractionError(f"no value left for {v.name!r} once {list(out)} is taken out")
            props[v.name] = {"enum": allowed}
        else:
            props[v.name] = {"type": "integer" if v.type == "integer" else "number"}
    return {
        "type": "object",
        "properties": props,
        "required": [v.name for v in template],
        "additionalProperties": False,
    }


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
                    raise ExtractionError(
                        f"variable {v.name!r} should be an integer, got {value!r}"
                    )
                value = int(value)
        elif not isinstance(value, str):
            raise ExtractionError(f"variable {v.name!r} should be a string, got {value!r}")
        out[v.name] = value
    return out


class Extractor:
    def __init__(
        self, small: ModelBackend, *, use_rules: bool = True, use_choice: bool = True
    ) -> None:
        self.small = small
        self.use_rules = use_rules
        self.use_choice = use_choice

    @staticmethod
    def text_for(entry: Entry, text: str) -> str:
        """What extraction reads for ``entry``: the text after the group's shared boilerplate, if the
        request starts with it (values that vary cannot be in a prefix every request shares)."""
        return strip_prefix(text, entry.validation.get("shared_prefix") or "")

    def by_rules(self, entry: Entry, text: str) -> dict[str, Any] | None:
        """Values from the learned rules, or None unless every variable gets its own number."""
        if (
            not self.use_rules
            or not entry.rules
            or any(v.name not in entry.rules for v in entry.template)
        ):
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

    def by_model(
        self,
        template: list[Variable],
        text: str,
        *,
        choice: bool | None = None,
        exclude: Mapping[str, Collection[Any]] | None = None,
        fixed: Mapping[str, Any] | None = None,
    ) -> Extraction:
        """The small model fills ``template``: choosing among the request's numbers (``choice``),
        with the values ``exclude`` names taken out of a variable's choices, and the variables
        ``fixed`` names given the value it names (when that is one of the choices), or freely."""
        choice = self.use_choice if choice is None else choice
        text = relevant_text(text)
        candidates = candidate_values(text) if choice else None
        if choice and not candidates:
            candidates = None
        schema = template_schema(template, candidates, exclude, fixed)
        began = time.perf_counter()
        try:
            out = self.small.complete(
                [Message("system", template_prompt(template)), Message("user", text)],
                GenerationOptions(max_tokens=32 + 24 * len(template), json_schema=schema),
            )
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
        detail = (
            {"margins": dict(out.choice_margins)} if getattr(out, "choice_margins", None) else {}
        )
        return Extraction(
            checked,
            Method.CHOICE if candidates else Method.FREE,
            time.perf_counter() - began,
            out.prompt_tokens + out.completion_tokens,
            detail,
        )

    def extract(self, entry: Entry, text: str) -> Extraction:
        began = time.perf_counter()
        text = self.text_for(entry, text)
        values = self.by_rules(entry, text)
        if values is not None:
            return Extraction(
                check_types(entry.template, values), Method.RULE, time.perf_counter() - began
            )
        mode = entry.validation.get("extraction", Method.CHOICE)
        return self.by_model(entry.template, text, choice=(mode == Method.CHOICE))
