"""JSON-with-a-schema requests: parse the required keys, check an object, rebind cached values.

A request is recognised when it asks for a JSON object and lists its required keys with types, e.g.
``... Required keys: "name" (string), "price" (number), "stock" (integer).`` The rest of the request
is the *record*: the values must come from it. Checks (no model involved): the output parses, has
exactly the required keys, each value has its type, and each value is consistent with the request
(numbers equal a number written in the record, strings occur in it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

TYPES = ("string", "number", "integer", "boolean")
_KEY = re.compile(r"""["'`]([A-Za-z_][\w-]*)["'`]\s*\((string|number|integer|boolean)\)""")
# ``\d++`` never gives digits back: a shorter run is followed by a digit, which the lookahead refuses
# anyway, and giving them back one by one made a long number cost the square of its length.
_NUMBER = re.compile(r"(?<![\w.])-?\d++(?:,\d{3})*(?:\.\d+)?(?![\w.]*\w)")
_QUOTED = re.compile(r"""["“]([^"”]+)["”]""")


@dataclass
class JsonRequest:
    text: str
    fields: list[tuple[str, str]]  # (key, type), in the order asked for
    record: str  # the request without its key list: where the values come from
    numbers: list[str] = field(default_factory=list)  # as written, in order
    strings: list[str] = field(default_factory=list)  # quoted values, in order
    frame: str = ""  # the record with numbers and quoted values masked

    @property
    def keys(self) -> list[str]:
        return [k for k, _ in self.fields]

    def schema(
        self,
        only: list[str] | None = None,
        *,
        from_record: bool = False,
        choose_strings: bool = True,
    ) -> dict[str, Any]:
        """The JSON schema for schema-constrained generation (all keys required, nothing else).

        ``from_record`` also limits each value to the record's values (an ``enum``, without a
        ``type``: the enum already fixes it, and a flat object of enums is what the llama.cpp
        backend decodes fastest): numbers to the numbers written in it, strings to its quoted values
        and numbers as written, when it has any. StepCache generates and patches with it, so the
        model only chooses which of the request's values goes under each key. ``choose_strings=False``
        leaves string keys free text: on the embedded 1.5B, choosing among quoted names token by
        token picked another key's name (``"city": "Ecuador"`` for ``"Perth"``) where writing the
        name freely copied it right; the checks still require it to be one of the record's values."""
        keys = [(k, t) for k, t in self.fields if only is None or k in only]
        props: dict[str, Any] = {}
        for k, t in keys:
            props[k] = {"type": t}
            choices = self.choices(t) if from_record and (choose_strings or t != "string") else []
            if choices:
                props[k] = {"enum": choices}
        return {
            "type": "object",
            "properties": props,
            "required": [k for k, _ in keys],
            "additionalProperties": False,
        }

    def choices(self, kind: str) -> list[Any]:
        """The record's values a key of type ``kind`` may take (empty: no restriction is possible)."""
        if kind in ("number", "integer"):
            values = [_num(n) for n in self.numbers]
            values = [int(v) for v in values if v.is_integer()] if kind == "integer" else values
            return list(dict.fromkeys(values))
        if kind == "string" and self.strings:
            return list(dict.fromkeys(self.strings + self.numbers))
        return []


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def parse_request(text: str) -> JsonRequest | None:
    if "json" not in text.lower():
        return None
    matches = list(_KEY.finditer(text))
    if not matches:
        return None
    fields = [(m.group(1), m.group(2)) for m in matches]
    if len({k for k, _ in fields}) != len(fields):
        return None
    # the key list runs from the sentence that introduces it to the last key
    start = text.rfind(".", 0, matches[0].start()) + 1
    record = (text[:start] + " " + text[matches[-1].end() :]).strip()
    strings = _QUOTED.findall(record)
    numbers = _NUMBER.findall(_QUOTED.sub(" ", record))
    frame = _NUMBER.sub("N", _QUOTED.sub("S", record))
    return JsonRequest(text, fields, record, numbers, strings, re.sub(r"\s+", " ", frame).strip())


def parse_object(text: str) -> dict[str, Any] | None:
    """The one JSON object in ``text`` (a fenced block or surrounding prose allowed), else None."""
    text = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fenced:
        text = fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:  # malformed, or an integer longer than the interpreter converts
        return None
    return value if isinstance(value, dict) else None


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return isinstance(value, (int, float))


def check_field(req: JsonRequest, key: str, kind: str, obj: dict[str, Any]) -> str | None:
    if key not in obj:
        return f"missing key {key!r}"
    value = obj[key]
    if not _type_ok(value, kind):
        return f"{key!r} should be {kind}, got {type(value).__name__}"
    if kind in ("number", "integer"):
        if not any(abs(_num(n) - float(value)) < 1e-9 for n in req.numbers):
            return f"{key!r} = {value} is not a number in the request"
    elif kind == "string" and not _string_from_record(req, value):
        return f"{key!r} = {value!r} is not one of the request's values"
    return None


def _string_from_record(req: JsonRequest, value: str) -> bool:
    """A string value must be a whole value of the record: a quoted string, a number as written (a
    number asked for as a string), or else words of the record that hold no number and do not cut
    into a quoted value ("2 people" for the number 2, or "Desk" for "Desk Lamp", are refused)."""
    v = value.strip().lower()
    if not v:
        return False
    quoted = [q.strip().lower() for q in req.strings]
    if v in quoted or v in (n.lower() for n in req.numbers):
        return True
    try:
        if any(abs(_num(n) - float(v.replace(",", ""))) < 1e-9 for n in req.numbers):
            return True
    except ValueError:
        pass
    return (
        v in req.record.lower()
        and not re.search(r"\d", v)
        and not any(v in q or q in v for q in quoted)
    )


def check_object(req: JsonRequest, obj: dict[str, Any] | None) -> dict[str, str | None]:
    """A verdict per required key (None = verified); ``"*"`` names extra keys or a non-object."""
    if obj is None:
        return {"*": "not a JSON object"}
    verdicts: dict[str, str | None] = {k: check_field(req, k, t, obj) for k, t in req.fields}
    extra = set(obj) - set(req.keys)
    if extra:
        verdicts["*"] = f"keys not asked for: {', '.join(sorted(extra))}"
    return verdicts


def rebind(cached: JsonRequest, old: dict[str, Any], req: JsonRequest) -> dict[str, Any]:
    """The cached object adapted to ``req`` without a model. Requests with the same frame have the
    same value slots, so a value that was the k-th number (or quoted string) of the cached request
    becomes the k-th of this one; a value written literally in the shared frame stays. Keys are
    matched by name, else by position when the key lists have the same length and types (a rename).
    A key whose type changed keeps its slot: a number asked for as a string is the slot's number as
    the record writes it. Keys that cannot be filled this way (new keys, ambiguous values, a string
    asked for as a number) are left out: the checks then mark them missing and only they are patched."""
    by_name = {k: k for k, _ in req.fields if k in old}
    if len(cached.fields) == len(req.fields):
        for (ok, ot), (nk, nt) in zip(cached.fields, req.fields, strict=True):
            if nk not in by_name and ok in old and ot == nt and ok not in req.keys:
                by_name[nk] = ok
    out: dict[str, Any] = {}
    types, old_types = dict(req.fields), dict(cached.fields)
    for new_key, old_key in by_name.items():
        bound = _rebind_value(cached, old[old_key], req, old_types.get(old_key), types[new_key])
        if bound is not _UNBOUND:
            out[new_key] = bound
    return out


_UNBOUND = object()


def _rebind_value(
    cached: JsonRequest, value: Any, req: JsonRequest, old_type: str | None, new_type: str
) -> Any:
    """``value``'s slot in the cached record, filled from the same slot of ``req`` and written as
    ``new_type`` (a number asked for as a string is the number as the record writes it)."""
    if isinstance(value, bool):
        return (
            value if len(cached.numbers) == len(req.numbers) and old_type == new_type else _UNBOUND
        )
    if isinstance(value, (int, float)):
        slots = [i for i, n in enumerate(cached.numbers) if abs(_num(n) - float(value)) < 1e-9]
        if len(slots) != 1 or len(cached.numbers) != len(req.numbers):
            return _UNBOUND  # ambiguous or not from the record
        written = req.numbers[slots[0]]
        if new_type == "string":
            return written
        new = _num(written)
        if new_type == "integer":
            return int(new) if new.is_integer() else _UNBOUND
        if new_type == "number":
            return int(new) if isinstance(value, int) and new.is_integer() else new
        return _UNBOUND
    if isinstance(value, str):
        if new_type != "string":
            return _UNBOUND  # a string asked for as a number: let the patch choose
        slots = [
            i for i, s in enumerate(cached.strings) if s.strip().lower() == value.strip().lower()
        ]
        if len(slots) == 1 and len(cached.strings) == len(req.strings):
            return req.strings[slots[0]]
        numeric = [i for i, n in enumerate(cached.numbers) if n == value.strip()]
        if not slots and len(numeric) == 1 and len(cached.numbers) == len(req.numbers):
            return req.numbers[numeric[0]]  # a number written as a string, from its slot
        if (
            not slots
            and value.strip()
            and value.lower() in req.record.lower()
            and not any(value.lower() in s.lower() for s in cached.strings)
        ):
            return value  # part of the frame both requests share
        return _UNBOUND
    return _UNBOUND


def render(req: JsonRequest, obj: dict[str, Any]) -> str:
    """The object with exactly the required keys, in the order asked for."""
    return json.dumps({k: obj[k] for k in req.keys if k in obj}, ensure_ascii=False)
