"""A group's own programs compared by order (minicache.candidates._by_order): two examples of one
computation whose programs gave their values different names still back each other, when the
candidate's program named its values itself and exactly one order of the other example's values
gives that example's answer."""

from __future__ import annotations

from minicache.candidates import own_candidates
from minicache.store import Example

# The target named its values: lifting keeps the names.
NAMED = ("def solve():\n    cost_of_goods_sold = 500000\n    average_inventory = 125000\n"
         "    return cost_of_goods_sold / average_inventory\n")
NAMED_TEXT = "A retailer had cost of goods sold of $500,000 and average inventory of $125,000. Inventory turnover?"
# The same computation written inline: lifting names the values after the request's words.
INLINE = "def solve():\n    return 900000 / 300000\n"
INLINE_TEXT = "A maker with costs amounting to $900,000 maintained average inventory of $300,000. Inventory turnover?"


def example(i: int, question: str, program: str, answer: float) -> Example:
    return Example(id=f"ex{i}", tenant="default", group_id="g", question=question, context=None,
                   program=program, variables={}, answer=answer)


def by_kind(candidates):
    return {("named" if c.named else "made-up"): c for c in candidates}


def test_a_named_program_is_backed_by_an_example_whose_program_named_its_values_otherwise(sandbox):
    examples = [example(0, NAMED_TEXT, NAMED, 4.0), example(1, INLINE_TEXT, INLINE, 3.0)]
    candidates, split = own_candidates(examples, "", sandbox, 2)
    found = by_kind(candidates)
    named = found["named"]
    assert named.backed and named.score == 2 and not split
    # The other example's values in the one order that gives its answer (900000 / 300000 = 3).
    assert (INLINE_TEXT, {"cost_of_goods_sold": 900000, "average_inventory": 300000}) in named.agreed
    assert candidates[0] is named  # ranked first
    # Names lifting made up are not compared by order: they would mislead the small model on hits.
    assert not found["made-up"].backed and found["made-up"].checked == 1


def test_an_example_no_order_agrees_with_is_not_compared(sandbox):
    wrong = example(1, INLINE_TEXT, INLINE, 7.0)  # neither 900000/300000 nor 300000/900000
    candidates, _ = own_candidates([example(0, NAMED_TEXT, NAMED, 4.0), wrong], "", sandbox, 2)
    named = by_kind(candidates)["named"]
    assert not named.backed and (named.checked, named.score) == (1, 1)


def test_two_orders_that_give_the_answer_say_nothing_about_which_value_is_which(sandbox):
    product = "def solve():\n    price = 20\n    quantity = 3\n    return price * quantity\n"
    inline = "def solve():\n    return 5 * 8\n"
    examples = [example(0, "A price of 20 and a quantity of 3. Total?", product, 60),
                example(1, "Pens cost 5 each and Ann buys 8 of them. Total?", inline, 40)]
    candidates, _ = own_candidates(examples, "", sandbox, 2)
    assert not by_kind(candidates)["named"].backed
