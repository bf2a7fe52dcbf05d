"""The micro-benchmark's JSON records: ten kinds of record, each a sentence with slots, the same facts
in another layout, the typed fields its schema asks for and new names for its keys; and the values
its slots are filled with, drawn per seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

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

NUMERIC_SLOTS: dict[str, Callable[[random.Random], str]] = {
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
STRING_SLOTS = {
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


def draw_record(kind: RecordKind, rng: random.Random) -> dict[str, str]:
    """One value per slot, drawn in the order the slots appear in the sentence: a ``set`` of slot
    names would follow PYTHONHASHSEED, and every process would get other requests."""
    slots = list(dict.fromkeys(re.findall(r"\{(\w+)\}", kind.sentence)))
    out = {}
    for slot in slots:
        out[slot] = (
            rng.choice(NAMES[STRING_SLOTS[slot]])
            if slot in STRING_SLOTS
            else NUMERIC_SLOTS[slot](rng)
        )
    return out
