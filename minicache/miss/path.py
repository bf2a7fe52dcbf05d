"""The miss stage: the target writes a plain program-of-thought program for this request.

The prompt is the PoT baseline's own, so a miss costs one PoT call and is as accurate; the program
runs in the sandbox, and (unless the caller records nothing) the request, program and answer join
the group's examples, from which a build later lifts a parameterized program.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from minicache.answers import Route, SolveResult, check_answer, format_answer, passed_through
from minicache.config.engine import EngineConfig
from minicache.errors import BackendError, ProgramError, SolveError
from minicache.miss.prompts import plain_pot_messages
from minicache.models.base import GenerationOptions, Message, ModelBackend
from minicache.programs.lifting import program_inputs
from minicache.programs.text import extract_code
from minicache.request import request_text
from minicache.route.router import Router
from minicache.sandbox import SandboxPool
from minicache.store import Example, Store, new_id


def is_text(value: Any) -> bool:
    """A program's answer that is words, not a computed value: a string, or an object of strings
    only (``{"fr": "La bibliothèque ouvre à neuf heures."}``): what a target writes when asked
    for a program about a request that is no computation."""
    if isinstance(value, dict):
        return all(isinstance(v, str) for v in value.values())
    return isinstance(value, str)


class MissPath:
    """Answers a request with the target model (and ``miss_retries`` corrected attempts if its program
    fails: none by default, so that a miss costs what PoT costs)."""

    def __init__(
        self,
        target: ModelBackend,
        sandbox: SandboxPool,
        store: Store,
        router: Router,
        config: EngineConfig,
    ) -> None:
        self.target, self.sandbox, self.store, self.router, self.config = (
            target,
            sandbox,
            store,
            router,
            config,
        )

    def solve(
        self,
        group_id: str,
        question: str,
        context: str | None,
        timings: dict[str, float],
        tenant: str,
        *,
        record: bool,
        new_group: bool,
        label: str | None,
        embedding: np.ndarray | None = None,
        on_text: Callable[[str], None] | None = None,
        passthrough: bool = False,
    ) -> SolveResult:
        """The target's program and its answer; SolveError if the target fails or its program fails twice.

        With ``record`` the request becomes one of the group's examples (the caller then decides
        whether the group is worth building), stored with ``embedding``: the vector routing already
        computed for this request (embedded here only if the caller has none). ``on_text`` is given
        the target's text as it is generated (a streamed request shows it while the program is
        written). With ``passthrough`` a program that fails, or returns text instead of a number or an
        object, is a result with the route ``passthrough`` and nothing recorded: the caller forwards
        the request to the target as it came (a failing target call stays a SolveError)."""
        reference = None
        if self.config.lookup_draft and not new_group:
            examples = self.store.examples(tenant, group_id)
            reference = examples[-1].program if examples else None
        messages = plain_pot_messages(question, context)
        tokens = {"target": 0, "small": 0}
        target_s = sandbox_s = 0.0
        error = None
        code = ""
        value: Any = None
        tries = 1 + max(0, self.config.miss_retries)
        for _attempt in range(tries):
            t = time.perf_counter()
            try:
                out = self.target.complete(
                    messages,
                    GenerationOptions(
                        max_tokens=self.config.miss_max_tokens,
                        draft="lookup" if reference else None,
                        draft_text=reference,
                        prefix_key=f"{tenant}/{group_id}"
                        if self.config.keep_group_prefix
                        else None,
                        on_text=on_text,
                    ),
                )
            except BackendError as exc:
                raise SolveError(f"target model failed: {exc}") from exc
            target_s += time.perf_counter() - t
            tokens["target"] += out.prompt_tokens + out.completion_tokens
            # apart too, for the usage a client is billed by (prompt and completion)
            tokens["target_prompt"] = tokens.get("target_prompt", 0) + out.prompt_tokens
            tokens["target_completion"] = tokens.get("target_completion", 0) + out.completion_tokens
            cached = int(out.draft.get("cached_prompt_tokens", 0))  # prompt tokens not prefilled
            if cached:
                tokens["target_cached"] = tokens.get("target_cached", 0) + cached
            code = extract_code(out.text)
            try:
                run = self.sandbox.run(code, {})
                sandbox_s += run.seconds
                value = check_answer(run.value)
                error = None
                if passthrough and is_text(value):
                    error = f"it returned text, not a number: {str(value)[:80]!r}"
                break
            except ProgramError as exc:
                error = f"{type(exc).__name__}: {exc}"
                messages = messages + [
                    Message("assistant", out.text),
                    Message(
                        "user",
                        f"That program failed: {exc}. Write the corrected ```python block with def solve().",
                    ),
                ]
        timings["target_s"] = target_s
        timings["sandbox_s"] = sandbox_s
        if error is not None and passthrough:
            return passed_through(f"the target's program failed: {error}", group_id, tokens)
        if error is not None:
            raise SolveError(
                f"the target's program failed{f' {tries} times' if tries > 1 else ''}: {error}"
            )
        variables = program_inputs(code, request_text(question, context))
        if record:
            t = time.perf_counter()
            self.store.ensure_group(tenant, group_id, label=label)
            if embedding is None:
                embedding = self.router.embed_request(question, context)
            self.store.add_example(
                Example(
                    id=new_id("ex"),
                    tenant=tenant,
                    group_id=group_id,
                    question=question,
                    context=context,
                    program=code,
                    answer=value,
                    variables=variables,
                    embedding=embedding,
                )
            )
            self.router.recorded(tenant, group_id, embedding)
            timings["record_s"] = time.perf_counter() - t
        return SolveResult(
            answer=value,
            answer_text=format_answer(value, question),
            route=Route.MISS,
            group=group_id,
            program=code,
            variables=variables,
            timings=timings,
            tokens=tokens,
        )
