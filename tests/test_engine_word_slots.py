"""The engine routes with word slots when ``EngineConfig.route_word_slots`` asks for them: requests of
one template that differ in names and items land in one group through ``MiniCache.solve``, and
without the option they split as the router alone splits them (tests/route/test_word_slots.py).
Once the group builds, its entry reads a request with other names or items in its exemplar's words
(minicache.hit.word_slots) and serves it as a zero-model hit; a request whose operation word differs
is not served by it, and a request in another unit is not read through the exemplar's where the
entry's program converts units. A request is read in the exemplar's words only where the entry's
examples had other words in each place it substitutes, so the streams that build entries name
several people, items or units; a comparison word every example had ("more") is not read as
another ("fewer")."""

from __future__ import annotations

import pytest

from fakes import FakeSmall, numbers_in, request_of
from minicache.config.engine import EngineConfig, VerifyConfig
from minicache.engine import MiniCache
from minicache.errors import HitRefused
from minicache.hit.word_slots import in_exemplar_words
from minicache.models import FakeBackend, GenerationOptions, Message
from minicache.route.lexical import LexicalEmbedder
from minicache.store import SQLiteStore

BUYS = "{n} has {a} {i} and buys {b} more. How many {i} does {n} have?"
PEOPLE = [("Tom", "apples"), ("Maria", "pears"), ("Ken", "books"), ("Aiko", "pencils")]
PEOPLE += [("Lena", "stamps"), ("Omar", "marbles")]


def adding_program(messages: list[Message], options: GenerationOptions) -> str:
    """The target: a plain program that adds what was bought to what was had."""
    had, bought = numbers_in(request_of(messages))[:2]
    return f"```python\ndef solve():\n    had = {had}\n    bought = {bought}\n    return had + bought\n```"


@pytest.fixture
def groups_of_six_requests(tmp_path, sandbox):
    """Solve six requests of the name-varying template with ``route_word_slots`` on or off; the
    groups they landed in, after each answer was checked."""
    engines: list[MiniCache] = []

    def solve_all(word_slots: bool) -> set[str]:
        mc = MiniCache(
            FakeBackend(adding_program, name="fake-target"),
            FakeBackend(lambda messages, options: "{}", name="fake-small"),
            store=SQLiteStore(tmp_path / f"word_slots_{word_slots}.db"),
            embedder=LexicalEmbedder(),
            sandbox=sandbox,
            # no builds: the fake target writes only the miss path's plain programs
            config=EngineConfig(
                route_word_slots=word_slots, background_builds=False, build_after=100, build_early=0
            ),
        )
        engines.append(mc)
        groups = set()
        for k, (name, item) in enumerate(PEOPLE):
            a, b = 3 + k, 2 * k + 1
            result = mc.solve(BUYS.format(n=name, i=item, a=a, b=b))
            assert result.answer == a + b
            groups.add(result.group)
        return groups

    yield solve_all
    for mc in engines:
        mc.close()


def test_with_word_slots_a_name_varying_template_lands_in_one_group(groups_of_six_requests):
    assert len(groups_of_six_requests(True)) == 1


def test_without_word_slots_the_same_requests_start_several_groups(groups_of_six_requests):
    assert len(groups_of_six_requests(False)) > 1


# Two people and one item, all three named again in the question: the first number is the first
# person's, and only their names tell the two numbers apart.
MORE = (
    "{n} collected {a} {i} on Monday and {m} collected {b} {i} on Monday as well. "
    "How many more {i} did {n} collect than {m}?"
)
FEWER = MORE.replace("more", "fewer")  # one operation word changed
# A person and a unit, both named again; the question asks in the request's own unit.
WORK = (
    "Each day the pump gives {n} {a} {u} of water for {b} days. "
    "How many {u} of water does {n} get in all?"
)
# A comparison word that follows a number and recurs: "more" and "fewer" stand where an item stands,
# and the program for "more" adds, with no constant of its own.
SINCE = (
    "{n} has {a} {i} and {m} has {b} {c} {i} than {n}. "
    "Since {m} has {c}, how many {i} does {m} have?"
)
# Two amounts in one unit, the question in hours: the program converts the unit.
PRACTICE = (
    "{n} practices {a} {u} on Monday and {b} {u} on Tuesday. "
    "How many hours does {n} practice on the two days?"
)
PER_HOUR = {"minutes": 60, "seconds": 3600}


def written_program(messages: list[Message], options: GenerationOptions) -> str:
    """The target: a plain program with the request's two numbers, which it subtracts for "more",
    adds for "fewer" (so that a request of the other operation gets another answer), the other way
    round where the second person's count is asked ("Since"), multiplies for the pump's water and
    adds and converts to hours for the practice, by the request's own unit."""
    question = request_of(messages)
    first, second = numbers_in(question)[:2]
    if "practices" in question:
        per_hour = PER_HOUR["seconds" if "seconds" in question else "minutes"]
        return (
            f"```python\ndef solve():\n    first = {first}\n    second = {second}\n"
            f"    return (first + second) / {per_hour}\n```"
        )
    op = (
        "*"
        if "pump" in question
        else "+"
        if ("fewer" in question) != ("Since" in question)
        else "-"
    )
    return (
        f"```python\ndef solve():\n    first = {first}\n    second = {second}\n"
        f"    return first {op} second\n```"
    )


@pytest.fixture
def building_engine(tmp_path, sandbox):
    """A MiniCache with word slots on (unless ``word_slots`` says otherwise) that builds after
    ``build_after`` misses (no probation, no sampled audits: each hit is served as soon as its entry
    validates)."""
    engines: list[tuple[MiniCache, FakeSmall]] = []

    def make(build_after: int, word_slots: bool = True) -> tuple[MiniCache, FakeSmall]:
        small = FakeSmall()
        mc = MiniCache(
            FakeBackend(written_program, name="fake-target"),
            small,
            store=SQLiteStore(tmp_path / f"building_{len(engines)}.db"),
            embedder=LexicalEmbedder(),
            sandbox=sandbox,
            config=EngineConfig(
                route_word_slots=word_slots,
                background_builds=False,
                build_after=build_after,
                build_early=0,
                audit_rate=0.0,
                verify=VerifyConfig(probation=0),
            ),
        )
        engines.append((mc, small))
        return mc, small

    yield make
    for mc, _small in engines:
        mc.close()


# The two numbers' sizes overlap from request to request (a second 7 above a first 6): the group's
# record of sizes does not tell the two slots apart, only the words around them do.
MORE_ASKED = [
    ("Tom", "Maria", "apples", 12, 5),
    ("Ken", "Aiko", "pears", 6, 2),
    ("Lena", "Omar", "books", 9, 7),
]
MORE_LATER = [
    ("Priya", "Jon", "stamps", 15, 8),
    ("Ravi", "Sara", "shells", 7, 3),
    ("Nina", "Paul", "cards", 11, 10),
]


def test_new_names_and_items_are_read_in_the_exemplars_words_and_served_as_zero_model_hits(
    building_engine,
):
    mc, small = building_engine(build_after=3)
    first = [mc.solve(MORE.format(n=n, m=m, i=i, a=a, b=b)) for n, m, i, a, b in MORE_ASKED]
    assert [r.route for r in first] == ["miss"] * 3
    group = first[0].group
    assert {r.group for r in first} == {group}
    entry = mc.store.active_entry("default", group)
    assert entry is not None
    asked = len(small.calls)
    for n, m, i, a, b in MORE_LATER:
        hit = mc.solve(MORE.format(n=n, m=m, i=i, a=a, b=b))
        assert (hit.route, hit.group, hit.entry_id) == ("hit", group, entry.id)
        assert hit.extraction in ("rule", "align")  # read without the small model
        assert hit.answer == a - b
    assert len(small.calls) == asked


def test_a_request_whose_operation_word_differs_is_not_served_by_the_entry(building_engine):
    """ "fewer" for "more" occurs once, in lower case: the request aligns with none of the group's,
    starts a group of its own and is answered by its own program."""
    mc, _small = building_engine(build_after=3)
    for n, m, i, a, b in MORE_ASKED:
        group = mc.solve(MORE.format(n=n, m=m, i=i, a=a, b=b)).group
    entry = mc.store.active_entry("default", group)
    assert entry is not None
    fewer = mc.solve(FEWER.format(n="Priya", m="Jon", i="stamps", a=15, b=8))
    assert fewer.route == "miss" and fewer.group != group and fewer.entry_id != entry.id
    assert fewer.answer == 15 + 8
    assert mc.store.get_entry("default", entry.id).hits == 0


def test_a_unit_the_program_does_not_convert_is_read_in_the_exemplars_unit_and_served(
    building_engine,
):
    """The question asks in the request's own unit and the program multiplies, with no constant of
    its own: its answer is right whatever unit the request names. The two examples the entry is
    built on name the unit differently (litres, gallons), so its record shows the unit's place
    varies, and "buckets" or "cups" may be read as the exemplar's "litres" (plain numbers all) and
    served without the small model."""
    mc, small = building_engine(build_after=2)
    first = [
        mc.solve(WORK.format(n=n, u=u, a=a, b=b))
        for n, u, a, b in [("Tom", "litres", 9, 2), ("Maria", "gallons", 11, 3)]
    ]
    group = first[0].group
    assert first[1].group == group
    entry = mc.store.active_entry("default", group)
    assert entry is not None
    asked = len(small.calls)
    for n, unit, a, b in [("Lena", "buckets", 15, 5), ("Aiko", "cups", 4, 6)]:
        request = WORK.format(n=n, u=unit, a=a, b=b)
        assert "litres" in in_exemplar_words(entry, request)
        hit = mc.solve(request)
        assert (hit.route, hit.group, hit.extraction) == ("hit", group, "align")
        assert hit.answer == a * b
    assert len(small.calls) == asked


SINCE_ASKED = [
    ("Tom", "Maria", "apples", 12, 5),
    ("Ken", "Aiko", "pears", 6, 2),
    ("Lena", "Omar", "books", 9, 7),
]


def test_a_comparison_word_the_examples_never_varied_is_not_read_as_theirs(building_engine):
    """ "fewer" for "more" follows a number and recurs, as an item does, and the entry's program (an
    addition) writes no constant; but every example the entry was built on had "more" there, while
    their names and items varied. A request with new names and items is served as a hit; one with
    "fewer" is refused (no example showed the template read alike with another word there) and the
    miss path subtracts."""
    mc, small = building_engine(build_after=3)
    first = [
        mc.solve(SINCE.format(n=n, m=m, i=i, a=a, b=b, c="more")) for n, m, i, a, b in SINCE_ASKED
    ]
    assert [r.answer for r in first] == [a + b for *_, a, b in SINCE_ASKED]
    group = first[0].group
    entry = mc.store.active_entry("default", group)
    assert entry is not None and "+" in entry.program
    asked = len(small.calls)
    hit = mc.solve(SINCE.format(n="Priya", m="Jon", i="stamps", a=15, b=8, c="more"))
    assert (hit.route, hit.entry_id, hit.answer) == ("hit", entry.id, 15 + 8)
    assert len(small.calls) == asked
    request = SINCE.format(n="Tom", m="Maria", i="apples", a=15, b=8, c="fewer")
    with pytest.raises(HitRefused) as refusal:
        in_exemplar_words(entry, request)
    assert "never had another word than 'more'" in refusal.value.reason
    result = mc.solve(request)
    assert result.route != "hit"
    assert result.answer == 15 - 8
    assert mc.store.get_entry("default", entry.id).hits == 1


@pytest.mark.parametrize("build_after", [2, 3])
def test_an_hours_entry_does_not_serve_a_request_in_seconds_through_its_minutes(
    building_engine, build_after
):
    """The entry divides minutes by 60; routing joins a request in seconds (the unit recurs), but it
    is not read as minutes (the entry's program writes a constant, and "1800 seconds" is not a
    unit:minute number), nor served as written, where a learned rule would read 1800 as minutes:
    the hit is refused and the miss path answers in seconds."""
    mc, _small = building_engine(build_after=build_after)
    asked = [("Tom", 30, 45), ("Maria", 20, 50), ("Ken", 15, 25)][:build_after]
    first = [mc.solve(PRACTICE.format(n=n, u="minutes", a=a, b=b)) for n, a, b in asked]
    group = first[0].group
    entry = mc.store.active_entry("default", group)
    assert entry is not None and "/ 60" in entry.program
    request = PRACTICE.format(n="Lena", u="seconds", a=1800, b=2700)
    with pytest.raises(HitRefused):
        in_exemplar_words(entry, request)
    result = mc.solve(request)
    assert result.route != "hit"
    assert result.answer == (1800 + 2700) / 3600


def test_an_entry_built_without_word_slots_keeps_no_request_words_in_its_exemplars(
    building_engine,
):
    """Off, the entry is as it was before the option existed; on, each exemplar keeps a skeleton.
    One pair of names and one item, so that the requests are one group either way."""
    for word_slots in (False, True):
        mc, _small = building_engine(build_after=3, word_slots=word_slots)
        for _n, _m, _i, a, b in MORE_ASKED:
            group = mc.solve(MORE.format(n="Tom", m="Maria", i="apples", a=a, b=b)).group
        entry = mc.store.active_entry("default", group)
        assert entry is not None
        exemplars = entry.validation["profile"]["exemplars"]
        assert exemplars and all(("skeleton" in ex) is word_slots for ex in exemplars)
        assert all(("varies" in ex) is word_slots for ex in exemplars)
