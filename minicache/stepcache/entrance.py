"""Which requests are StepCache's: the one decision the engine makes at its entrance.

A request is StepCache's when it is a task StepCache can verify (a linear equation to solve in
worked steps, or a JSON object with typed required keys) and the caller's ``mode`` lets it be.
"""

from __future__ import annotations

from fractions import Fraction

from minicache.errors import InvalidRequest
from minicache.request import Mode
from minicache.stepcache import bounds, jsontask, linear

StepRequest = linear.LinearRequest | jsontask.JsonRequest


def parse(text: str) -> StepRequest | None:
    """The task a request is, or None. JSON is checked first: a JSON request may contain an '='."""
    return jsontask.parse_request(text) or linear.parse_request(text)


def task_of(req: StepRequest) -> str:
    return "json" if isinstance(req, jsontask.JsonRequest) else "linear"


def _values(request: linear.LinearRequest) -> list[Fraction]:
    """The values StepCache's checks compute with: both sides' parts and the solution."""
    parts = [request.lhs.coef, request.lhs.const, request.rhs.coef, request.rhs.const]
    return [*parts, linear.solve(request)]


def step_request_of(question: str, context: str | None, mode: Mode) -> StepRequest | None:
    """The request as StepCache's task, or None when the program cache serves it.

    ``mode="program"`` never asks StepCache; ``"auto"`` asks it for a request without context (a
    context is what programs read values from); ``"step"`` insists, and a request StepCache cannot
    verify is then an InvalidRequest. A request with a number longer than StepCache takes
    (:mod:`.bounds`) is not StepCache's either."""
    if mode == "program" or (mode == "auto" and context is not None):
        return None
    request = parse(question) if bounds.numbers_fit(question) else None
    if isinstance(request, linear.LinearRequest) and not bounds.values_fit(_values(request)):
        request = None
    if request is None and mode == "step" and not bounds.numbers_fit(question):
        raise InvalidRequest(
            f"mode=step takes numbers of at most {bounds.MAX_DIGITS} digits; "
            "this request has a longer one"
        )
    if request is None and mode == "step":
        raise InvalidRequest(
            "mode=step needs a request StepCache can verify: 'solve <one linear equation>' "
            "or a JSON object with typed required keys "
            '("key" (string|number|integer|boolean))'
        )
    return request
