"""Learning an alignment exemplar from one validated example.

A validated example says, for each variable, which number of its request the variable took. The
exemplar keeps that number's kind, its scale reading and its cue words (:mod:`minicache.hit.cues`),
with the numbers masked, so it is learned from a single example where a learned rule
(:func:`minicache.hit.rules.learn_rules`) needs two that agree. A numeric exemplar also keeps its
request's skeleton where ``EngineConfig.route_word_slots`` is on, the words a request naming other
people or items is read in (:mod:`minicache.hit.word_slots`), and the places where its group's
examples had other words (:func:`minicache.hit.profile.learn_exemplars`). Text variables keep their
region (:mod:`minicache.hit.align_text`), table cells their row and column
(:mod:`minicache.hit.tables`).
Reading a request with an exemplar is :mod:`minicache.hit.align`; choosing a group's exemplars,
each checked on the other examples, is :func:`minicache.hit.profile.learn_exemplars`.
"""

from __future__ import annotations

from typing import Any

from minicache.hit.align_text import learn_text_slot
from minicache.hit.cues import number_words, positions, stems
from minicache.hit.tables import learn_table_exemplar
from minicache.programs.numbers import Position
from minicache.route.router import skeleton
from minicache.store.base import Variable


def learn_exemplar(
    template: list[Variable], text: str, values: dict[str, Any], *, word_slots: bool = False
) -> dict[str, Any] | None:
    """An exemplar from one validated (request text, values), or None if a number is not written
    exactly once in the text (then nobody can tell which number it was), two variables took the same
    number, or a text value is not the request's words in order (see :func:`learn_text_slot`).
    Values that are cells of the request's table are learned by their row and column instead.
    ``word_slots`` (``EngineConfig.route_word_slots``): a numeric exemplar also keeps its request's
    skeleton; without it the exemplar holds no more than alignment reads, since the skeleton is as
    long as the request and is stored with the entry."""
    table = learn_table_exemplar(template, text, values)
    if table is not None:
        return table
    pos = positions(text)
    slots: dict[str, Any] = {}
    texts = [var for var in template if var.type == "string"]
    if len(texts) > 1:
        return None  # two stretches of text: which words belong to which is not learned from one example
    region = pos
    for var in texts:
        learned = learn_text_slot(text, str(values.get(var.name, "")), pos)
        if learned is None:
            return None
        slots[var.name], lo, hi = learned
        region = [
            p for p in pos if not lo <= p.start < hi
        ]  # numbers inside the text are the text's
    numbers = _learn_number_slots([v for v in template if v.type != "string"], text, region, values)
    if numbers is None:
        return None
    numeric, taken = numbers
    slots.update(numeric)
    constants = [[p.kind, p.values()[0]] for p in region if p.start not in taken]
    if texts or not word_slots:
        return {"slots": slots, "constants": constants}
    # The request's words, values masked: a request that names other people, items or units is read
    # in these words (minicache.hit.word_slots). Not for a text variable, whose value is the words.
    return {"slots": slots, "constants": constants, "skeleton": skeleton(text)}


def _learn_number_slots(
    template: list[Variable], text: str, pos: list[Position], values: dict[str, Any]
) -> tuple[dict[str, Any], set[int]] | None:
    described = number_words(text, pos)
    slots: dict[str, Any] = {}
    taken: set[int] = set()
    for var in template:
        value = values.get(var.name)
        where = [(p, i) for p in pos for i, v in enumerate(p.values()) if v == value]
        if len(where) != 1 or where[0][0].start in taken:
            return None
        p, reading = where[0]
        taken.add(p.start)
        cues = set(stems([w for w, _ in described[p.start]]))
        # How the example wrote its size: a plain amount ("$450,000"), a scale word read in full
        # ("2.4 million" as 2,400,000) or a scale word taken as written (2.4, a program in millions).
        scale = "none" if len(p.readings) == 1 else "scaled" if reading == 1 else "raw"
        slots[var.name] = {"kind": p.kind, "scale": scale, "cues": sorted(cues)}
    return slots, taken
