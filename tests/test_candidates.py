"""A group's own programs as candidates (minicache.candidates): which other examples back a
candidate when the examples' programs name their parameters differently."""

from __future__ import annotations

from minicache.candidates import own_candidates
from minicache.store import Example

QUESTION = "A retailer reports current assets of ${a} and current liabilities of ${l}. What is its current ratio?"


def example(i: int, assets: int, liabilities: int, names: tuple[str, str], op: str = "/") -> Example:
    """An example whose miss program names its parameters ``names`` (as lifting names them after words)."""
    a, b = names
    program = f"def solve({a}={assets}, {b}={liabilities}):\n    return {a} {op} {b}\n"
    return Example(id=f"ex{i}", tenant="t", group_id="g", question=QUESTION.format(a=assets, l=liabilities),
                   context=None, program=program, variables={},
                   answer=assets / liabilities if op == "/" else assets - liabilities)


def test_an_example_whose_program_names_its_parameters_otherwise_backs_a_candidate_that_reads_it(sandbox):
    examples = [example(0, 500, 250, ("current_assets", "current_liabilities")),
                example(1, 900, 300, ("retailer_reports_assets", "liabilities"))]
    candidates, split = own_candidates(examples, "", sandbox, 3)
    assert not split and candidates
    # Each candidate read the other example's values the way its own example wrote them, and agreed.
    assert all(c.backed and c.score == 2 and c.checked == 2 for c in candidates)
    # Backed enough for an early build, whose validation every held example must pass, but not
    # vouched for: one example's wording is not enough to let a validation fail one held example.
    assert not any(c.vouched for c in candidates)
    newest = candidates[0]
    assert newest.origin.id == "ex1" and any(values == {"retailer_reports_assets": 500, "liabilities": 250}
                                             for _, values in newest.agreed)


def test_an_example_no_order_of_whose_values_the_candidate_computes_counts_against_it(sandbox):
    """Two computations in one group (a ratio, a difference): neither backs the other, and with
    them compared, neither has a majority."""
    examples = [example(0, 500, 250, ("current_assets", "current_liabilities")),
                example(1, 900, 300, ("assets", "liabilities"), op="-")]  # answered as another computation
    candidates, split = own_candidates(examples, "", sandbox, 3)
    assert split and not candidates


def order_example(i: int, question: str, names: tuple[str, str], values: tuple[float, float], op: str) -> Example:
    (a, b), (x, y) = names, values
    program = f"def solve({a}={x}, {b}={y}):\n    return {a} {op} {b}\n"
    return Example(id=f"ex{i}", tenant="t", group_id="g", question=question, context=None, program=program,
                   variables={}, answer=x / y if op == "/" else x * y)


def test_an_example_its_request_does_not_read_backs_a_candidate_by_its_values_in_order(sandbox):
    """The second request writes a year the first did not: no complete cue reading, so the values of
    its own program, in the order the program uses them, are tried; only that order gives its answer."""
    first = order_example(0, "What is the P/E ratio with a market value per share of $35 and earnings per share of "
                             "$3.5?", ("market_value_share", "share_earnings_share"), (35, 3.5), "/")
    second = order_example(1, "In 2023 a manufacturer's shares were priced at $45 and it earned $6 per share. "
                              "What is its P/E ratio?", ("shares_priced", "earned_share"), (45, 6), "/")
    candidates, _ = own_candidates([first, second], "", sandbox, 3)
    assert candidates and all(c.backed for c in candidates)
    by_first = next(c for c in candidates if c.origin.id == "ex0")
    assert (second_values := dict(by_first.agreed)[second.question]) == \
        {"market_value_share": 45, "share_earnings_share": 6}, second_values


def test_values_that_give_the_answer_in_either_order_back_nothing(sandbox):
    first = order_example(0, "What is the revenue of 35 units sold at $3.5 each?", ("units", "price"), (35, 3.5), "*")
    second = order_example(1, "In 2023 a shop sold 45 units, each for $6. What was its revenue?",
                           ("shop_sold", "each"), (45, 6), "*")
    candidates, _ = own_candidates([first, second], "", sandbox, 3)
    assert candidates and not any(c.backed for c in candidates)
