"""The StepCache micro-benchmark: math and JSON variants, 222 requests per seed.

Built from the StepCache paper's description (arXiv 2603.28795; no code was published):

* two tasks, 10 base prompts each: linear equations to solve in numbered steps (10 equation forms),
  and JSON objects with a typed schema filled from a short record (10 record kinds);
* three perturbations of each base prompt, three variants each: numeric constants (new numbers,
  same form), names (JSON: one key renamed; equations: the unknown renamed) and output schema
  (equations: another final-line format; JSON: a key added, a key dropped, a type changed);
* 22 semantic changes (11 per task) that must not reuse: an equation of a form no base prompt has
  (another operation), a record written in another layout.

10 x 2 base + 10 x 2 x 9 variants + 22 = 222 requests, shuffled by the seed (which also draws every
constant), so each family starts cold somewhere in the stream. Gold answers are computed here, not
by a model: the solution of each equation, the record's values for each key. The equation forms
are :mod:`.equations`' table, the record kinds :mod:`.records`'; this module makes the requests
from them and checks outputs against their gold answers.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from minicache.stepcache import jsontask, linear
from minicache.stepcache import steps as stepsmod
from minicache_bench.stepcache.equations import BASE_FORMS, CHANGED_FORMS, FORMATS, VARIABLES
from minicache_bench.stepcache.records import NUMERIC_SLOTS, RECORDS, RecordKind, draw_record


@dataclass
class MicroRequest:
    id: str
    task: str  # linear | json
    text: str
    gold: Any  # linear: the solution (a Fraction); json: the expected object
    family: str  # base prompt it derives from
    perturbation: str  # base | constants | names | schema | semantic


def _math_text(form: str, values: dict[str, int], v: str, fmt: str) -> str:
    eq = form.format(v=v, **{k: x for k, x in values.items() if k != "s"})
    return (
        f"Solve for {v}: {eq}. Show your work as numbered steps, one per line, and end with the line "
        f"'{fmt.format(v=v)}'."
    )


def _math_family(i: int, rng: random.Random) -> list[MicroRequest]:
    form, build = BASE_FORMS[i]
    v, fmt = VARIABLES[i], FORMATS[i % len(FORMATS)]
    values = build(rng)
    fam = f"math{i}"
    out = [
        MicroRequest(
            f"{fam}-base",
            "linear",
            _math_text(form, values, v, fmt),
            Fraction(values["s"]),
            fam,
            "base",
        )
    ]
    seen = {tuple(sorted(values.items()))}
    k = 0
    while k < 3:
        new = build(rng)
        if tuple(sorted(new.items())) in seen:
            continue
        seen.add(tuple(sorted(new.items())))
        out.append(
            MicroRequest(
                f"{fam}-constants{k}",
                "linear",
                _math_text(form, new, v, fmt),
                Fraction(new["s"]),
                fam,
                "constants",
            )
        )
        k += 1
    others = [x for x in VARIABLES if x != v]
    for k, nv in enumerate(rng.sample(others, 3)):
        out.append(
            MicroRequest(
                f"{fam}-names{k}",
                "linear",
                _math_text(form, values, nv, fmt),
                Fraction(values["s"]),
                fam,
                "names",
            )
        )
    for k, nf in enumerate(
        [f for f in FORMATS if f != fmt][:3] if i % 2 else [f for f in FORMATS if f != fmt][-3:]
    ):
        out.append(
            MicroRequest(
                f"{fam}-schema{k}",
                "linear",
                _math_text(form, values, v, nf),
                Fraction(values["s"]),
                fam,
                "schema",
            )
        )
    return out


def _typed(value: str, kind: str) -> Any:
    if kind == "integer":
        return int(value)
    if kind == "number":
        return float(value)
    return value


def _json_text(
    kind: RecordKind,
    values: dict[str, str],
    fields: list[tuple[str, str, str]],
    layout: bool = False,
) -> str:
    record = (kind.layout if layout else kind.sentence).format(**values)
    intro = (
        "Create a JSON object from this record: "
        if layout
        else "Create a JSON object for this record: "
    )
    keys = ", ".join(f'"{k}" ({t})' for k, t, _ in fields)
    return f"{intro}{record} Return only the JSON. Required keys: {keys}."


def _json_gold(values: dict[str, str], fields: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {k: _typed(values[slot], t) for k, t, slot in fields}


def _json_family(i: int, rng: random.Random) -> list[MicroRequest]:
    kind = RECORDS[i]
    base_fields = list(kind.fields[:3])
    values = draw_record(kind, rng)
    fam = f"json{i}"
    out = [
        MicroRequest(
            f"{fam}-base",
            "json",
            _json_text(kind, values, base_fields),
            _json_gold(values, base_fields),
            fam,
            "base",
        )
    ]
    for k in range(3):
        new = dict(values)
        for slot in new:
            if slot in NUMERIC_SLOTS:
                while new[slot] == values[slot]:
                    new[slot] = NUMERIC_SLOTS[slot](rng)
        out.append(
            MicroRequest(
                f"{fam}-constants{k}",
                "json",
                _json_text(kind, new, base_fields),
                _json_gold(new, base_fields),
                fam,
                "constants",
            )
        )
    for k in range(3):
        renamed = [
            (kind.synonyms[j] if j == k else key, t, slot)
            for j, (key, t, slot) in enumerate(base_fields)
        ]
        out.append(
            MicroRequest(
                f"{fam}-names{k}",
                "json",
                _json_text(kind, values, renamed),
                _json_gold(values, renamed),
                fam,
                "names",
            )
        )
    numeric = next(j for j, (_, t, _) in enumerate(base_fields) if t in ("integer", "number"))
    schemas = [
        list(kind.fields),  # a key added
        base_fields[:2],  # a key dropped
        [
            (key, "string", slot) if j == numeric else (key, t, slot)
            for j, (key, t, slot) in enumerate(base_fields)
        ],
    ]
    for k, fields in enumerate(schemas):
        out.append(
            MicroRequest(
                f"{fam}-schema{k}",
                "json",
                _json_text(kind, values, fields),
                _json_gold(values, fields),
                fam,
                "schema",
            )
        )
    return out


def generate(seed: int) -> list[MicroRequest]:
    """The 222 requests of one seed, in stream order."""
    rng = random.Random(seed)
    requests: list[MicroRequest] = []
    for i in range(10):
        requests += _math_family(i, rng)
        requests += _json_family(i, rng)
    for j, (form, build) in enumerate(CHANGED_FORMS):
        values = build(rng)
        i = j % 10
        requests.append(
            MicroRequest(
                f"math{i}-semantic{j}",
                "linear",
                _math_text(form, values, VARIABLES[i], FORMATS[i % len(FORMATS)]),
                Fraction(values["s"]),
                f"math{i}",
                "semantic",
            )
        )
    for j in range(11):
        kind = RECORDS[j % 10]
        values = draw_record(kind, rng)
        fields = list(kind.fields[:3])
        text = _json_text(kind, values, fields, layout=True)
        if j >= 10:  # a second layout for the kind already used: a table
            rows = " | ".join(f"{slot}: {values[slot]}" for slot in values)
            text = (
                f"Create a JSON object from this table row: {rows}. Required keys: "
                + ", ".join(f'"{k}" ({t})' for k, t, _ in fields)
                + "."
            )
        requests.append(
            MicroRequest(
                f"json{j % 10}-semantic{j}",
                "json",
                text,
                _json_gold(values, fields),
                f"json{j % 10}",
                "semantic",
            )
        )
    for r in requests:
        r.id = f"s{seed}-{r.id}"
    rng.shuffle(requests)
    return requests


# ------------------------------------------------------------------------------------------
# Scoring: the task check plus the stitched-output integrity check, for every method alike


def check_output(task: str, text: str, question: str, gold: Any) -> tuple[bool, str]:
    """(correct, why not). Linear: the last line in the requested format with the gold solution, and
    every equality in every step holding. JSON: the whole response one JSON object (a code fence
    allowed) with exactly the required keys, their types, and the record's values."""
    if task == "linear":
        req = linear.parse_request(question)
        steps = stepsmod.segment(text or "")
        if req is None or not steps:
            return False, "no steps"
        value = linear.read_answer(req, steps[-1])
        if value is None:
            return False, "the last line is not in the requested format"
        if abs(value - Fraction(gold)) > linear.TOLERANCE:
            return (
                False,
                f"wrong answer {linear.fmt_number(value)} (gold {linear.fmt_number(Fraction(gold))})",
            )
        bad = [v for v in linear.check_steps(req, steps) if v]
        return (False, f"a step does not hold: {bad[0]}") if bad else (True, "")
    body = (text or "").strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.S)
    body = fenced.group(1) if fenced else body
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return False, "not one JSON object"
    if not isinstance(obj, dict):
        return False, "not a JSON object"
    if set(obj) != set(gold):
        return False, f"keys {sorted(obj)} != {sorted(gold)}"
    json_req = jsontask.parse_request(question)
    types = dict(json_req.fields) if json_req else {}
    for key, want in gold.items():
        got = obj[key]
        if types and not jsontask._type_ok(got, types[key]):
            return False, f"{key}: wrong type"
        if isinstance(want, str):
            ok = got.strip().lower() == want.strip().lower() if isinstance(got, str) else False
            if not ok and isinstance(got, str):
                try:
                    ok = math.isclose(float(got), float(want))
                except ValueError:
                    pass
        else:
            ok = not isinstance(got, (str, bool)) and math.isclose(float(got), float(want))
        if not ok:
            return False, f"{key}: {got!r} != {want!r}"
    return True, ""
