"""Word slots (minicache.route.slots): requests of one template that differ in names, items or units
route to one group; a changed operation word keeps requests apart; off, routing is as before."""

from __future__ import annotations

import numpy as np
import pytest

from minicache.route.lexical import LexicalEmbedder
from minicache.route.router import Router, skeleton
from minicache.route.slots import GroupWords, slot_aligned, slot_role, substitution, words
from minicache.store import Example, SQLiteStore, new_id

BUYS = "{n} has {a} {i} and buys {b} more. How many {i} does {n} have?"
SELLS = "{n} has {a} {i} and sells {b} more. How many {i} does {n} have?"  # one verb changed
GIVES = "{n} had {a} {i} and gave {b} of them away. How many {i} does {n} have left?"
PEOPLE = [("Tom", "apples"), ("Maria", "pears"), ("Ken", "books"), ("Aiko", "pencils")]
MORE_PEOPLE = [("Lena", "stamps"), ("Omar", "marbles"), ("Priya", "cards"), ("Jon", "shells")]


def ask(template: str, name: str, item: str, a: int, b: int) -> str:
    return template.format(n=name, i=item, a=a, b=b)


def aligned(a: str, b: str) -> bool:
    return slot_aligned(words(skeleton(a)), words(skeleton(b)))


@pytest.fixture
def store(tmp_path):
    return SQLiteStore(tmp_path / "s.db")


def serve(router: Router, store: SQLiteStore, question: str) -> str:
    """Route ``question`` and record it as the miss path does; returns its group."""
    decision = router.route("t", question)
    store.ensure_group("t", decision.group_id)
    store.add_example(
        Example(
            id=new_id("ex"),
            tenant="t",
            group_id=decision.group_id,
            question=question,
            context=None,
            program="def solve():\n    return 1\n",
            answer=1,
            variables={},
            embedding=decision.embedding,
        )
    )
    router.recorded("t", decision.group_id, decision.embedding)
    router.forget_pending("t", question)
    return decision.group_id


def test_consistent_substitutions_of_recurring_names_and_items_are_slots():
    assert aligned(ask(BUYS, "Tom", "apples", 5, 3), ask(BUYS, "Maria", "pears", 12, 7))


def test_a_changed_operation_word_is_a_difference_not_a_slot():
    assert not aligned(ask(BUYS, "Tom", "apples", 5, 3), ask(SELLS, "Maria", "pears", 12, 7))
    assert not aligned(ask(BUYS, "Tom", "apples", 5, 3), ask(SELLS, "Tom", "apples", 5, 3))
    assert not aligned(ask(BUYS, "Tom", "apples", 5, 3), ask(GIVES, "Tom", "apples", 5, 3))


def test_an_inconsistent_substitution_is_not_a_slot():
    mixed = "Maria has 12 pears and buys 7 more. How many pears does Tom have?"
    assert not aligned(ask(BUYS, "Tom", "apples", 5, 3), mixed)


def test_a_single_name_inside_a_sentence_is_a_slot_but_a_title_or_a_first_word_is_not():
    assert aligned(
        "The store gives Tom 5 coupons worth 3 dollars each. What are they worth?",
        "The store gives Maria 8 coupons worth 2 dollars each. What are they worth?",
    )
    assert not aligned(
        "What is the Future Value of 100 invested at 5% for 3 years?",
        "What is the Present Value of 100 invested at 5% for 3 years?",
    )
    assert not aligned(
        "Double 5 and then add 3 to the result. What is it?",
        "Triple 5 and then add 3 to the result. What is it?",
    )


def test_a_substituted_word_is_a_name_an_item_after_a_number_or_neither():
    """What a hit may read a request through (minicache.hit.word_slots): "Maria" is a name where
    "Tom" stood mid-sentence, "pears" follows a number as "apples" did, and a recurring verb is
    neither, whatever it does to the computation."""
    mine = words(skeleton(ask(BUYS, "Maria", "pears", 12, 7)))
    theirs = words(skeleton(ask(BUYS, "Tom", "apples", 5, 3)))
    pairs = substitution(mine, theirs)
    assert pairs == {"maria": "tom", "pears": "apples"}
    assert {x: slot_role(mine, theirs, x) for x in pairs} == {"maria": "name", "pears": "item"}
    coins = "On Monday Tom {v} 5 coins, and on Friday Tom {v} 3 coins. How many coins in all?"
    mine, theirs = (words(skeleton(coins.format(v=v))) for v in ("earns", "spends"))
    assert substitution(mine, theirs) == {"earns": "spends"}
    assert slot_role(mine, theirs, "earns") is None


def test_a_name_varying_template_routes_to_one_group(store):
    router = Router(store, LexicalEmbedder(), word_slots=True)
    groups = {
        serve(router, store, ask(BUYS, name, item, 3 + k, 2 * k + 1))
        for k, (name, item) in enumerate(PEOPLE + MORE_PEOPLE[:2])
    }
    assert len(groups) == 1


def test_without_word_slots_the_same_template_splits_as_before(store):
    router = Router(store, LexicalEmbedder())
    groups = {
        serve(router, store, ask(BUYS, name, item, 3 + k, 2 * k + 1))
        for k, (name, item) in enumerate(PEOPLE + MORE_PEOPLE[:2])
    }
    assert len(groups) > 1


def test_templates_that_differ_in_their_operation_words_stay_two_groups(store):
    router = Router(store, LexicalEmbedder(), word_slots=True)
    buys = {serve(router, store, ask(BUYS, n, i, 4 + k, k + 2)) for k, (n, i) in enumerate(PEOPLE)}
    sells = {
        serve(router, store, ask(SELLS, n, i, 9 + k, k + 1)) for k, (n, i) in enumerate(MORE_PEOPLE)
    }
    assert len(buys) == 1 and len(sells) == 1 and buys != sells


def test_a_concurrent_first_request_with_other_names_joins_the_pending_group(store):
    router = Router(store, LexicalEmbedder(), word_slots=True)
    first = router.route("t", ask(BUYS, "Tom", "apples", 5, 3))  # not recorded yet
    second = router.route("t", ask(BUYS, "Maria", "pears", 12, 7))
    assert first.new_group and not second.new_group
    assert second.group_id == first.group_id and second.by_word_slots


def test_a_group_recorded_by_another_process_is_aligned_with_its_stored_questions(store):
    tom = serve(Router(store, LexicalEmbedder()), store, ask(BUYS, "Tom", "apples", 5, 3))
    fresh = Router(store, LexicalEmbedder(), word_slots=True)
    decision = fresh.route("t", ask(BUYS, "Maria", "pears", 12, 7))
    assert decision.group_id == tom and decision.by_word_slots


def test_a_forgotten_group_is_no_longer_a_slot_match(store):
    router = Router(store, LexicalEmbedder(), word_slots=True)
    tom = serve(router, store, ask(BUYS, "Tom", "apples", 5, 3))
    store.clear_examples("t", tom)
    router.forget_group("t", tom)
    assert router.route("t", ask(BUYS, "Maria", "pears", 12, 7)).new_group


def test_group_words_keep_a_few_distinct_sequences_and_load_the_store_once():
    loads: list[str] = []

    def load(tenant: str, group_id: str) -> list[str]:
        loads.append(group_id)
        return ["A stored question about Tom and Tom ."]

    kept = GroupWords(load, keep=2)
    kept.add("t", "g", ("x",))
    kept.add("t", "g", ("x",))
    assert kept.get("t", "g") == [words("A stored question about Tom and Tom ."), ("x",)]
    kept.add("t", "g", ("y",))
    assert kept.get("t", "g") == [("x",), ("y",)] and loads == ["g"]


def test_nearest_groups_lists_each_group_once_nearest_first(store):
    router = Router(store, LexicalEmbedder())
    a = serve(router, store, ask(BUYS, "Tom", "apples", 5, 3))
    b = serve(router, store, ask(GIVES, "Lena", "stamps", 9, 2))
    query = router.embed_request(ask(GIVES, "Lena", "stamps", 1, 1))
    assert router.index.nearest_groups("t", query, 8) == [b, a]
    assert router.index.nearest_groups("t", np.zeros(3, dtype=np.float32), 8) == []
