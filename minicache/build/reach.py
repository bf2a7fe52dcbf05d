"""Whether any choice of a request's numbers can make a program give an answer: a check with no model.

On a hit the small model fills a program's numeric parameters by choosing among the numbers written
in the request (:mod:`minicache.hit.extraction`, candidate choice). So when a build validates a
candidate on a held example, the model can only make it pass if *some* assignment of those numbers
to the parameters reproduces the example's answer. When none does, the model call is certain to
fail the check, and a build need not pay for it: :func:`unreachable` runs the program on every
assignment in one sandbox job and says so.

Why: a failed build spends its time in those calls. Failed SVAMP builds (1.5-3.7 s each) and
TAT-QA builds (2.8-8.3 s) each ended on a held example that the small model read and the candidate
then answered wrong; on SVAMP the first such check asked a program that subtracts two numbers
for an answer that no two of the request's numbers give by subtraction.

The check answers only "certainly not" or "don't know": it is skipped (None) where it could be
wrong or dear - a string parameter, no numbers written, more than :data:`MAX_ASSIGNMENTS`
assignments, or a sandbox job that fails - and the model is asked as before.
"""

from __future__ import annotations

import itertools
from typing import Any

from minicache.answers import check_answer
from minicache.errors import MiniCacheError
from minicache.programs.numbers import candidate_values, relevant_text
from minicache.programs.signature import answers_match
from minicache.sandbox import SandboxPool
from minicache.store.base import Variable

MAX_ASSIGNMENTS = (
    2048  # numbers ** parameters, per job (a result each must fit the reply); more: ask the model
)

# Appended to the program: calls ``solve`` on each assignment inside the same sandbox job, so the
# program runs under the same limits as any hit, and one job replaces thousands.
_HARNESS = """

def minicache_reach(assignments):
    results = []
    for assignment in assignments:
        try:
            results.append(solve(**assignment))
        except Exception:
            results.append(None)
    return results
"""


def assignments(template: list[Variable], text: str) -> list[dict[str, Any]] | None:
    """Every assignment of the numbers the small model may choose from (the numbers of
    :func:`relevant_text`, as :meth:`Extractor.by_model` reads them) to ``template``'s variables,
    or None when the model's choice is not confined to them or there are too many."""
    if not template or any(v.type == "string" for v in template):
        return None
    numbers = candidate_values(relevant_text(text))
    if not numbers or len(numbers) ** len(template) > MAX_ASSIGNMENTS:
        return None
    names = [v.name for v in template]
    return [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product(numbers, repeat=len(names))
    ]


def unreachable(
    source: str, template: list[Variable], text: str, expected: Any, sandbox: SandboxPool
) -> bool:
    """True when no choice of ``text``'s numbers makes ``source`` answer ``expected`` (the small
    model's choice cannot pass this check); False when one does, or when that cannot be told cheaply."""
    tried = assignments(template, text)
    if tried is None:
        return False
    try:
        results = sandbox.run(
            source + _HARNESS, {"assignments": tried}, function="minicache_reach"
        ).value
    except MiniCacheError:
        return False
    if not isinstance(results, list) or len(results) != len(tried):
        return False
    for value in results:
        if value is None:
            continue
        try:
            if answers_match(check_answer(value), expected):
                return False
        except MiniCacheError:
            continue
    return True
