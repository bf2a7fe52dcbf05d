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
by a model: the solution of each equation, the record's values for each key.
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

VARIABLES = ["x", "y", "z", "n", "m", "t", "k", "p", "q", "w", "u", "r", "s"]
FORMATS = [
    "{v} = <value>",
    "Answer: <value>",
    "Final answer: {v} = <value>",
    '{{"{v}": <value>}}',
    "The solution is <value>.",
]

# Equation forms: (template, builder(rng) -> dict of constants with an integer solution "s").
# Templates use {a}.. for constants and {v} for the unknown.


def _ints(rng: random.Random, n: int, lo: int = 2, hi: int = 9) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def _f1(r):  # a v + b = c
    s, (a, b) = r.randint(2, 12), _ints(r, 2, 2, 19)
    return dict(a=a, b=b, c=a * s + b, s=s)


def _f2(r):  # a v - b = c
    s, (a, b) = r.randint(3, 12), _ints(r, 2, 2, 19)
    b = min(b, a * s - 1)
    return dict(a=a, b=b, c=a * s - b, s=s)


def _f3(r):  # a v + b = c v + d
    s, c = r.randint(2, 12), r.randint(2, 7)
    a, b = c + r.randint(1, 5), r.randint(2, 19)
    return dict(a=a, b=b, c=c, d=(a - c) * s + b, s=s)


def _f4(r):  # a (v + b) = c
    s, (a, b) = r.randint(2, 12), _ints(r, 2)
    return dict(a=a, b=b, c=a * (s + b), s=s)


def _f5(r):  # a (v - b) = c
    b, a = r.randint(2, 9), r.randint(2, 9)
    s = b + r.randint(1, 9)
    return dict(a=a, b=b, c=a * (s - b), s=s)


def _f6(r):  # b + a v = c
    return _f1(r)


def _f7(r):  # a v = b v + c
    s, b = r.randint(2, 12), r.randint(2, 8)
    a = b + r.randint(1, 6)
    return dict(a=a, b=b, c=(a - b) * s, s=s)


def _f8(r):  # v / a + b = c
    a, q, b = r.randint(2, 6), r.randint(2, 9), r.randint(2, 19)
    return dict(a=a, b=b, c=q + b, s=a * q)


def _f9(r):  # a v - b = c v + d
    s, c = r.randint(3, 12), r.randint(2, 6)
    a, b = c + r.randint(1, 5), r.randint(2, 15)
    return dict(a=a, b=b, c=c, d=(a - c) * s - b, s=s) if (a - c) * s - b > 0 else _f9(r)


def _f10(r):  # c - a v = b
    s, a, b = r.randint(2, 9), r.randint(2, 6), r.randint(2, 19)
    return dict(a=a, b=b, c=b + a * s, s=s)


BASE_FORMS = [
    ("{a}{v} + {b} = {c}", _f1),
    ("{a}{v} - {b} = {c}", _f2),
    ("{a}{v} + {b} = {c}{v} + {d}", _f3),
    ("{a}({v} + {b}) = {c}", _f4),
    ("{a}({v} - {b}) = {c}", _f5),
    ("{b} + {a}{v} = {c}", _f6),
    ("{a}{v} = {b}{v} + {c}", _f7),
    ("{v}/{a} + {b} = {c}", _f8),
    ("{a}{v} - {b} = {c}{v} + {d}", _f9),
    ("{c} - {a}{v} = {b}", _f10),
]


# Forms no base prompt has: the semantic changes ("another operation").
CHANGED_FORMS = [
    (
        "{a}{v} + {b}{v} = {c}",
        lambda r: (lambda s, a, b: dict(a=a, b=b, c=(a + b) * s, s=s))(
            r.randint(2, 9), r.randint(2, 9), r.randint(2, 9)
        ),
    ),
    (
        "({v} + {b})/{a} = {c}",
        lambda r: (lambda a, b, c: dict(a=a, b=b, c=c, s=a * c - b))(
            r.randint(2, 5), r.randint(1, 5), r.randint(3, 9)
        ),
    ),
    (
        "{a}{v} - {b}{v} = {c}",
        lambda r: (
            lambda s, b: (lambda a: dict(a=a, b=b, c=(a - b) * s, s=s))(b + r.randint(1, 5))
        )(r.randint(2, 9), r.randint(2, 6)),
    ),
    (
        "{v}/{a} - {b} = {c}",
        lambda r: (lambda a, b, c: dict(a=a, b=b, c=c, s=a * (b + c)))(
            r.randint(2, 5), r.randint(1, 9), r.randint(1, 9)
        ),
    ),
    (
        "{a}{v} + {b} = {c} + {d}",
        lambda r: (
            lambda s, a, b, c: (
                dict(a=a, b=b, c=c, d=a * s + b - c, s=s)
                if a * s + b - c > 0
                else dict(a=a, b=b, c=1, d=a * s + b - 1, s=s)
            )
        )(r.randint(2, 9), r.randint(2, 7), r.randint(2, 9), r.randint(2, 9)),
    ),
    (
        "{b} = {a}{v} - {c}",
        lambda r: (lambda s, a, c: dict(a=a, b=a * s - c, c=c, s=s))(
            r.randint(3, 9), r.randint(2, 7), r.randint(1, 5)
        ),
    ),
    (
        "{a}({v} - {b}) + {c} = {d}",
        lambda r: (lambda s, a, b, c: dict(a=a, b=b, c=c, d=a * (s - b) + c, s=s))(
            r.randint(6, 12), r.randint(2, 5), r.randint(1, 5), r.randint(2, 9)
        ),
    ),
    (
        "{a}{v} + {b} + {c} = {d}",
        lambda r: (lambda s, a, b, c: dict(a=a, b=b, c=c, d=a * s + b + c, s=s))(
            r.randint(2, 9), r.randint(2, 9), r.randint(2, 9), r.randint(2, 9)
        ),
    ),
    (
        "{a}{v} = {b} + {c}",
        lambda r: (lambda s, a, b: dict(a=a, b=b, c=a * s - b, s=s))(
            r.randint(3, 9), r.randint(2, 7), r.randint(1, 5)
        ),
    ),
    (
        "{a}({v} + {b}) = {c}({v} + {d})",
        lambda r: (
            lambda s, c, b: (
                lambda a: (
                    dict(a=a, b=b, c=c, d=(a * (s + b)) // c - s, s=s)
                    if (a * (s + b)) % c == 0 and (a * (s + b)) // c - s > 0
                    else dict(a=2 * c, b=b, c=c, d=2 * (s + b) - s, s=s)
                )
            )(c + r.randint(1, 3))
        )(r.randint(2, 9), r.randint(2, 4), r.randint(1, 6)),
    ),
    (
        "{v} - {b} = {c}/{a}",
        lambda r: (lambda a, b, q: dict(a=a, b=b, c=a * q, s=b + q))(
            r.randint(2, 6), r.randint(1, 9), r.randint(2, 9)
        ),
    ),
]

# JSON record kinds: (sentence with {slots}, fields [(key, type, slot)], extra field, key synonyms,
# values drawn per seed). String slots are quoted in the sentence.
NAMES = {
    "product": ["Desk Lamp", "Office Chair", "Water Bottle", "Travel Mug", "Notebook", "Backpack"],
    "seller": ["Brightline", "Northwind", "Acme Supply", "Globex"],
    "person": [
        "Maria Lopez",
        "Chen Wei",
        "Amara Okafor",
        "Lukas Novak",
        "Priya Raman",
        "Tom Becker",
    ],
    "dept": ["Finance", "Research", "Logistics", "Marketing"],
    "title": ["Quiet Rivers", "The Long Road", "Paper Moons", "Cold Harbor", "Silent Peaks"],
    "author": ["Ana Ruiz", "John Hale", "Mei Tanaka", "Omar Said"],
    "city": ["Lisbon", "Osaka", "Tallinn", "Porto", "Quito", "Perth"],
    "country": ["Portugal", "Japan", "Estonia", "Ecuador", "Australia"],
    "code": ["BA117", "LH402", "AF881", "KL645", "IB320"],
    "director": ["Sofia Coppola", "Ang Lee", "Jane Campion", "Bong Joon-ho"],
    "recipe": ["Lentil Soup", "Green Curry", "Apple Crumble", "Fish Tacos"],
    "ingredient": ["lentils", "coconut milk", "apples", "cod"],
    "model": ["Falcon", "Mistral", "Orion", "Vega"],
    "maker": ["Kestrel Motors", "Aurora Cars", "Delta Auto"],
    "major": ["Physics", "History", "Economics", "Biology"],
    "hotel": ["Harbor Inn", "Grand Plaza", "Alpine Lodge", "Sea Breeze"],
}


@dataclass(frozen=True)
class RecordKind:
    sentence: str
    layout: str  # the same facts in another layout (a semantic change)
    fields: tuple[
        tuple[str, str, str], ...
    ]  # (key, type, slot); the first three are the base schema
    synonyms: tuple[str, ...]  # new names for keys 1..3 (the names perturbation)


RECORDS = [
    RecordKind(
        'the product "{product}" costs {price} dollars, {stock} units are in stock and it is sold by "{seller}".',
        'product="{product}"; price={price}; stock={stock}; seller="{seller}".',
        (
            ("name", "string", "product"),
            ("price", "number", "price"),
            ("stock", "integer", "stock"),
            ("seller", "string", "seller"),
        ),
        ("product_name", "unit_price", "quantity"),
    ),
    RecordKind(
        'the employee "{person}" is {age} years old, works in "{dept}" and earns {salary} dollars a year.',
        'employee="{person}"; age={age}; department="{dept}"; salary={salary}.',
        (
            ("name", "string", "person"),
            ("age", "integer", "age"),
            ("department", "string", "dept"),
            ("salary", "integer", "salary"),
        ),
        ("full_name", "years", "team"),
    ),
    RecordKind(
        'the book "{title}" by "{author}" has {pages} pages and costs {price} dollars.',
        'book="{title}"; author="{author}"; pages={pages}; price={price}.',
        (
            ("title", "string", "title"),
            ("author", "string", "author"),
            ("pages", "integer", "pages"),
            ("price", "number", "price"),
        ),
        ("book_title", "writer", "page_count"),
    ),
    RecordKind(
        'the city "{city}" in "{country}" has {population} inhabitants and covers {area} square kilometres.',
        'city="{city}"; country="{country}"; population={population}; area={area}.',
        (
            ("city", "string", "city"),
            ("country", "string", "country"),
            ("population", "integer", "population"),
            ("area", "number", "area"),
        ),
        ("city_name", "nation", "inhabitants"),
    ),
    RecordKind(
        'flight "{code}" leaves "{city}" with {seats} seats at a fare of {fare} dollars.',
        'flight="{code}"; origin="{city}"; seats={seats}; fare={fare}.',
        (
            ("flight", "string", "code"),
            ("origin", "string", "city"),
            ("seats", "integer", "seats"),
            ("fare", "number", "fare"),
        ),
        ("flight_code", "departure_city", "seat_count"),
    ),
    RecordKind(
        'the film "{title}" from {year} runs {minutes} minutes and was directed by "{director}".',
        'film="{title}"; year={year}; minutes={minutes}; director="{director}".',
        (
            ("title", "string", "title"),
            ("year", "integer", "year"),
            ("runtime", "integer", "minutes"),
            ("director", "string", "director"),
        ),
        ("film_title", "release_year", "length_minutes"),
    ),
    RecordKind(
        'the recipe "{recipe}" serves {servings} people, takes {minutes} minutes and uses "{ingredient}".',
        'recipe="{recipe}"; servings={servings}; minutes={minutes}; ingredient="{ingredient}".',
        (
            ("recipe", "string", "recipe"),
            ("servings", "integer", "servings"),
            ("minutes", "integer", "minutes"),
            ("main_ingredient", "string", "ingredient"),
        ),
        ("dish", "portions", "cooking_time"),
    ),
    RecordKind(
        'the car "{model}" made by "{maker}" has {hp} horsepower and costs {cost} dollars.',
        'car="{model}"; maker="{maker}"; horsepower={hp}; price={cost}.',
        (
            ("model", "string", "model"),
            ("maker", "string", "maker"),
            ("horsepower", "integer", "hp"),
            ("price", "integer", "cost"),
        ),
        ("car_model", "manufacturer", "hp"),
    ),
    RecordKind(
        'the student "{person}" has a grade average of {gpa} and has completed {credits} credits in "{major}".',
        'student="{person}"; gpa={gpa}; credits={credits}; major="{major}".',
        (
            ("student", "string", "person"),
            ("gpa", "number", "gpa"),
            ("credits", "integer", "credits"),
            ("major", "string", "major"),
        ),
        ("student_name", "grade_average", "credit_count"),
    ),
    RecordKind(
        'the hotel "{hotel}" in "{city}" has {rooms} rooms at {rate} dollars per night.',
        'hotel="{hotel}"; city="{city}"; rooms={rooms}; rate={rate}.',
        (
            ("hotel", "string", "hotel"),
            ("city", "string", "city"),
            ("rooms", "integer", "rooms"),
            ("nightly_rate", "number", "rate"),
        ),
        ("hotel_name", "location", "room_count"),
    ),
]

_NUMERIC_SLOTS = {
    "price": lambda r: f"{r.randint(5, 400)}.{r.choice(['50', '99', '25', '75'])}",
    "stock": lambda r: str(r.randint(2, 90)),
    "age": lambda r: str(r.randint(22, 64)),
    "salary": lambda r: str(r.randint(40, 150) * 1000),
    "pages": lambda r: str(r.randint(120, 900)),
    "population": lambda r: str(r.randint(50, 3000) * 1000),
    "area": lambda r: f"{r.randint(20, 900)}.{r.randint(1, 9)}",
    "seats": lambda r: str(r.randint(80, 400)),
    "fare": lambda r: f"{r.randint(49, 900)}.{r.choice(['00', '50', '99'])}",
    "year": lambda r: str(r.randint(1960, 2024)),
    "minutes": lambda r: str(r.randint(20, 180)),
    "servings": lambda r: str(r.randint(2, 12)),
    "cost": lambda r: str(r.randint(15, 90) * 1000),
    "hp": lambda r: str(r.randint(90, 450)),
    "gpa": lambda r: f"{r.randint(2, 3)}.{r.randint(1, 9)}",
    "credits": lambda r: str(r.randint(30, 180)),
    "rooms": lambda r: str(r.randint(12, 400)),
    "rate": lambda r: f"{r.randint(60, 450)}.{r.choice(['00', '50'])}",
}
_STRING_SLOTS = {
    "product": "product",
    "seller": "seller",
    "person": "person",
    "dept": "dept",
    "title": "title",
    "author": "author",
    "city": "city",
    "country": "country",
    "code": "code",
    "director": "director",
    "recipe": "recipe",
    "ingredient": "ingredient",
    "model": "model",
    "maker": "maker",
    "major": "major",
    "hotel": "hotel",
}


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


def _draw_record(kind: RecordKind, rng: random.Random) -> dict[str, str]:
    """One value per slot, drawn in the order the slots appear in the sentence. (A ``set`` of slot
    names here once made the draws follow PYTHONHASHSEED: every process got other requests.)"""
    slots = list(dict.fromkeys(re.findall(r"\{(\w+)\}", kind.sentence)))
    out = {}
    for slot in slots:
        out[slot] = (
            rng.choice(NAMES[_STRING_SLOTS[slot]])
            if slot in _STRING_SLOTS
            else _NUMERIC_SLOTS[slot](rng)
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
    values = _draw_record(kind, rng)
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
            if slot in _NUMERIC_SLOTS:
                while new[slot] == values[slot]:
                    new[slot] = _NUMERIC_SLOTS[slot](rng)
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
        values = _draw_record(kind, rng)
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
