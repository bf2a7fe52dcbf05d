"""The engine routes with word slots when ``EngineConfig.route_word_slots`` asks for them: requests of
one template that differ in names and items land in one group through ``MiniCache.solve``, and
without the option they split as the router alone splits them (tests/route/test_word_slots.py)."""

from __future__ import annotations

import pytest

from fakes import numbers_in, request_of
from minicache.config.engine import EngineConfig
from minicache.engine import MiniCache
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
