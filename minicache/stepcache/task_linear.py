"""The pass for a linear equation to solve in worked steps (the arithmetic is in
:mod:`minicache.stepcache.linear`).

Reuse lifts the cached steps onto this request's unknown and constants. A failing step is patched
on its own with the check's message, conditioned on the checked steps before it, at most
``1 + repair_rounds`` times; then (or at once, when more than ``max_patched_steps`` steps fail) the
deterministic solver writes the solution.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from minicache.answers import Route
from minicache.stepcache import linear
from minicache.stepcache import steps as stepsmod
from minicache.stepcache.task import Draft, StepModel, StepOutcome, StepTask
from minicache.store.base import StepRecord

MATH_SYSTEM = (
    "You solve linear equations. Write the solution as short numbered steps, one per line, each "
    "naming the operation and showing the equation it reaches, e.g. 'Step 1: Subtract 5 from both "
    "sides: 3x = 15'. End with exactly the final line the user asks for, unnumbered, with the value "
    "as an integer or decimal."
)


class LinearTask(StepTask):
    kind = "linear"

    def __init__(self, request: linear.LinearRequest) -> None:
        self.request = request

    def schema_score(self, old: Any) -> float:
        new, mask = self.request, linear._format_mask
        same_format = mask(old.answer_format, old.variable) == mask(new.answer_format, new.variable)
        return float(same_format) + 0.5 * float(old.variable == new.variable)

    def difference(self, old: Any) -> str:
        if isinstance(old, linear.LinearRequest):
            if old.form != self.request.form:
                return f"another equation form or operation ({old.form} vs {self.request.form})"
            return "the request around the equation differs"
        return "the request's wording or record layout differs"

    def adapt(self, record: StepRecord, old: Any) -> Draft:
        steps = linear.lift_steps(old, record.steps, self.request)
        verdicts = linear.check_steps(self.request, steps) if steps else ["no steps"]
        return Draft(steps, None, verdicts, reused_from=record.id)

    def generate(self, model: StepModel, reason: str) -> Draft:
        text, tokens = model.complete(MATH_SYSTEM, self.request.text, model.config.max_tokens)
        draft = self.read(text)
        draft.tokens, draft.reason = tokens, reason
        return draft

    def read(self, text: str) -> Draft:
        steps = stepsmod.segment(text)
        return Draft(
            steps, None, linear.check_steps(self.request, steps) if steps else ["no steps"]
        )

    def patch(self, draft: Draft, model: StepModel, *, regenerate: bool = True) -> Draft:
        if not regenerate:
            return draft
        req, config = self.request, model.config
        steps, verdicts, redone = list(draft.steps), draft.verdicts, set()
        tokens, patched = draft.tokens, draft.patched
        if not steps:
            steps, verdicts = [""], ["no steps"]
        too_many = sum(map(bool, verdicts)) > config.max_patched_steps
        for _ in range(0 if too_many else 1 + config.repair_rounds):
            for i, verdict in enumerate(verdicts):
                if verdict is None:
                    continue
                line, used = self._patch_step(model, steps, i, verdict if steps[i] else None)
                steps[i], tokens, patched = line, tokens + used, patched + 1
                redone.add(i)
            verdicts = linear.check_steps(req, steps)
            # a regenerated step must show the equation it reaches (prose alone checks nothing)
            verdicts = [
                v
                or (
                    None
                    if i == len(steps) - 1
                    or i not in redone
                    or linear.has_equation(s, req.variable)
                    else "the step shows no equation"
                )
                for i, (v, s) in enumerate(zip(verdicts, steps, strict=True))
            ]  # one verdict per step
            if not any(verdicts):
                break
        failure = (
            "too many steps failed their checks"
            if too_many
            else "the target's steps failed their checks after repair"
        )
        return replace(
            draft, steps=steps, verdicts=verdicts, tokens=tokens, patched=patched, failure=failure
        )

    def _patch_step(
        self, model: StepModel, steps: list[str], i: int, error: str | None
    ) -> tuple[str, int]:
        req = self.request
        last = i == len(steps) - 1
        verified = "\n".join(f"Step {k + 1}: {s}" for k, s in enumerate(steps[:i]))
        want = (
            f"the final line, exactly in the requested format {req.answer_format!r}"
            if last
            else f"only Step {i + 1} (the operation and the equation it reaches)"
        )
        prompt = req.text + (
            "\n\nThese steps are already checked:\n" + verified if verified else ""
        )
        if error:
            prompt += f"\n\nA previous attempt at this line was wrong ({error})."
        prompt += f"\n\nWrite {want}, as a single line, nothing else."
        text, tokens = model.complete(
            MATH_SYSTEM, prompt, model.config.patch_max_tokens, stop=("\n",)
        )
        lines = [ln for ln in stepsmod.segment(text) if ln.strip()]
        return (lines[0] if lines else ""), tokens

    def fall_back(self, draft: Draft, model: StepModel) -> Draft:
        """The deterministic solver's steps, which pass every check by construction."""
        reason = (draft.reason + "; " if draft.reason else "") + draft.failure
        return replace(
            draft,
            steps=linear.solver_steps(self.request),
            verdicts=[],
            reason=reason + ": deterministic solver",
            solver=True,
        )

    def outcome(self, draft: Draft, route: Route) -> StepOutcome:
        req, steps = self.request, draft.steps
        text = stepsmod.render(steps)
        verified = (
            not any(linear.check_steps(req, steps)) and stepsmod.integrity(steps, text) is None
        )
        answer = linear.read_answer(req, steps[-1]) if steps else None
        return StepOutcome(
            route,
            self.kind,
            text,
            steps,
            float(answer) if answer is not None else None,
            verified,
            reused_from=draft.reused_from,
            reason=draft.reason,
            patched=draft.patched,
            solver_fallback=draft.solver,
            tokens=draft.tokens,
        )
