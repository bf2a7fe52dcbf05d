"""The pass for a JSON object with typed required keys (parsing, checks and rebinding are in
:mod:`minicache.stepcache.jsontask`).

Reuse rebinds the cached object's values slot by slot to this request's record. Only the failing
keys are patched, each chosen among the record's values; if the object still fails, one full
repair of the same kind, with the problems listed, is the fallback.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from minicache.answers import Route
from minicache.stepcache import jsontask
from minicache.stepcache import steps as stepsmod
from minicache.stepcache.task import Draft, StepModel, StepOutcome, StepTask
from minicache.store.base import StepRecord

JSON_SYSTEM = "Reply with only the JSON object asked for, with exactly the required keys and types."


class JsonTask(StepTask):
    kind = "json"

    def __init__(self, request: jsontask.JsonRequest) -> None:
        self.request = request

    def schema_score(self, old: Any) -> float:
        a, b = set(old.fields), set(self.request.fields)
        return len(a & b) / len(a | b) if a | b else 1.0

    def difference(self, old: Any) -> str:
        return "the request's wording or record layout differs"

    def adapt(self, record: StepRecord, old: Any) -> Draft:
        old_obj = jsontask.parse_object(record.steps[0]) if record.steps else None
        obj = jsontask.rebind(old, old_obj or {}, self.request)
        return Draft([], obj, jsontask.check_object(self.request, obj), reused_from=record.id)

    def generate(self, model: StepModel, reason: str) -> Draft:
        text, tokens = model.complete(
            JSON_SYSTEM,
            self.request.text,
            model.config.max_tokens,
            schema=self.request.schema(from_record=True, choose_strings=False),
        )
        draft = self.read(text)
        draft.tokens, draft.reason = tokens, reason
        return draft

    def read(self, text: str) -> Draft:
        obj = jsontask.parse_object(text) or {}
        return Draft([], obj, jsontask.check_object(self.request, obj))

    def patch(self, draft: Draft, model: StepModel, *, regenerate: bool = True) -> Draft:
        """The verified keys kept, and the failing ones (when ``regenerate``) asked for anew."""
        req, obj, verdicts = self.request, draft.obj or {}, draft.verdicts
        failing = [k for k in req.keys if verdicts.get(k)]
        kept = {k: obj[k] for k in req.keys if k in obj and not verdicts.get(k)}
        tokens, patched = draft.tokens, 0
        if failing and regenerate:
            prompt = (
                req.text
                + "\n\nAlready filled and checked: "
                + json.dumps(kept, ensure_ascii=False)
                + f"\nReply with a JSON object with only these keys: {', '.join(failing)}."
            )
            text, used = model.complete(
                JSON_SYSTEM,
                prompt,
                model.config.patch_max_tokens * 2,
                schema=req.schema(only=failing, from_record=True, choose_strings=False),
            )
            tokens, patched = tokens + used, len(failing)
            kept.update(
                {k: v for k, v in (jsontask.parse_object(text) or {}).items() if k in failing}
            )
        verdicts = jsontask.check_object(req, kept)
        return replace(draft, obj=kept, verdicts=verdicts, tokens=tokens, patched=patched)

    def fall_back(self, draft: Draft, model: StepModel) -> Draft:
        """One repair of the whole object, with what was wrong, its values from the record."""
        req = self.request
        problems = "; ".join(v for v in draft.verdicts.values() if v)
        prompt = (
            req.text
            + f"\n\nA previous answer was wrong: {problems}. Reply with the corrected JSON object."
        )
        text, used = model.complete(
            JSON_SYSTEM, prompt, model.config.max_tokens, schema=req.schema(from_record=True)
        )
        obj = jsontask.parse_object(text) or {}
        return replace(
            draft,
            obj=obj,
            verdicts=jsontask.check_object(req, obj),
            tokens=draft.tokens + used,
            patched=len(req.keys),
            reason=(draft.reason + "; " if draft.reason else "") + "one-shot repair",
        )

    def outcome(self, draft: Draft, route: Route) -> StepOutcome:
        req = self.request
        text = jsontask.render(req, draft.obj or {})
        verified = (
            not any(jsontask.check_object(req, jsontask.parse_object(text)).values())
            and stepsmod.integrity([text], text, "json") is None
        )
        return StepOutcome(
            route,
            self.kind,
            text,
            [text],
            json.loads(text),
            verified,
            reused_from=draft.reused_from,
            reason=draft.reason,
            patched=draft.patched,
            tokens=draft.tokens,
        )
