"""The MiniCache engine: route -> hit (extract + run cached program) | miss (target writes PoT) -> build.

Reading order: :meth:`MiniCache.solve` is the whole pipeline; ``_hit``, ``_miss`` and ``_build``
are its three stages. Generated code only ever runs in the sandbox's worker processes.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import math
import os
import random
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import portability
from .admission import Admission, AdmissionConfig, backing_off, record_build_failure, record_failed_hit, validation_set
from .errors import BackendError, InvalidRequest, MiniCacheError
from .events import EventLog
from .extraction import ExtractionError, Extractor, candidate_values, learn_rules
from .hit import ZERO_MODEL_PATHS, HitRefused, HitVerifier, VerifyConfig, demoted, learn_profile
from .lifting import lift, program_inputs
from .models.base import GenerationOptions, Message, ModelBackend
from .programs import extract_code
from .prompts import plain_pot_messages
from .routing import Embedder, Router
from .sandbox import SandboxError, SandboxPool, SandboxViolation
from .stepcache import StepCache, StepConfig
from .stepcache import parse as parse_step_task
from .store import Entry, Example, Store, new_id, open_store
from .synthesis import ProgramShapeError, answers_match, generalize, parse_signature

log = logging.getLogger(__name__)


class SolveError(MiniCacheError):
    """Neither the cache nor the target could produce an answer for this request."""


@dataclass
class EngineConfig:
    build_after: int = 3  # examples a group needs before a build
    validate_n: int = 3  # held examples a candidate entry is checked on
    validate_min: int = 2  # ... of which this many must match
    max_failures: int = 3  # in-service failures before an entry is evicted
    max_events: int = 10_000  # build/audit/evict events kept in memory (readers follow a cursor)
    max_build_failures: int = 3  # failed builds before a group is shown as uncacheable (it still backs off, then retries)
    build_candidates: int = 2  # the group's own programs (lifted) validated per build, best first ...
    build_retries: int = 1  # ... then this many target generalization attempts
    background_builds: bool = True
    lookup_draft: bool = False  # draft the miss program from the group's last program (bench-spec decides)
    use_rules: bool = True
    use_choice: bool = True
    route_threshold: float = 0.80
    route_refresh_s: float = 1.0  # how often a tenant's routing index reads other replicas' new examples
    route_per_group: int = 32  # embeddings the routing index keeps per group (a representative set)
    frozen: bool = False  # no new builds (existing entries keep serving)
    build_lease_s: float = 600.0  # how long a build may hold its group's lease before others may take over
    max_question_chars: int = 32_000
    max_context_chars: int = 200_000
    miss_max_tokens: int = 640
    # Hit verification and audits (minicache.hit, docs/hits.md).
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    audit_rate: float = 0.05  # share of served hits also answered by the miss path, in the background
    audit_delta: float = 0.01  # an entry caught wrong serves no model-chosen hit while its error bound exceeds this
    audit_z: float = 1.96  # the bound's confidence (Wilson score interval, z=1.96: 95% two-sided)
    step: StepConfig = field(default_factory=StepConfig)  # StepCache (structured outputs)
    # Which groups are built, and the back-off of failing ones (minicache.admission).
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)


@dataclass
class SolveResult:
    answer: Any
    route: str  # "hit" | "miss" | "fallback" (program cache); "step-reuse" | "step-patch" | "step-skip" (StepCache)
    group: str
    entry_id: str | None = None
    program: str | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=lambda: {"target": 0, "small": 0})
    similarity: float = 0.0
    extraction: str | None = None
    fallback_reason: str | None = None
    answer_text: str = ""
    # StepCache (structured outputs): the stitched output, its steps, whether every check passed,
    # and whether the deterministic solver wrote it after the target failed the checks.
    output: str | None = None
    steps: list[str] = field(default_factory=list)
    verified: bool | None = None
    solver_fallback: bool = False
    reused_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_DECIMALS = re.compile(r"(\d+|one|two|three|four) decimal places?", re.I)
_WORD_NUM = {"one": 1, "two": 2, "three": 3, "four": 4}
MAX_DECIMALS = 100  # a float has 17 significant digits; "50000000 decimal places" would be a 50 MB answer


def requested_decimals(question: str) -> int | None:
    """The decimal places the question asks for ("2 decimal places"), if any."""
    m = _DECIMALS.search(question)
    if not m:
        return None
    digits = m.group(1).lower()
    return _WORD_NUM.get(digits) or (int(digits) if len(digits) <= 9 else 10**9)


def format_answer(value: Any, question: str) -> str:
    """The answer as text, in the precision the request asks for ("2 decimal places", at most
    :data:`MAX_DECIMALS`; ``solve`` refuses requests that ask for more before anything runs)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        n = requested_decimals(question)
        if n is not None:
            return f"{value:.{min(n, MAX_DECIMALS)}f}"
        return f"{value:.10g}" if isinstance(value, float) else str(value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _is_word_list(value: Any) -> bool:
    return isinstance(value, list) and 0 < len(value) <= 50 and all(isinstance(v, str) for v in value)


def check_answer(value: Any) -> Any:
    """Answers must be finite numbers, short strings, or a small flat object of those (an action
    such as ``{"keywords": "red shoes", "max_price": 40}``)."""
    if isinstance(value, dict):
        if not 0 < len(value) <= 20 or len(json.dumps(value)) > 2000:
            raise SandboxError("program returned an object that is empty or too large", kind="result")
        # A list of words as one of its values ("keywords": ["red", "shoes"]) is read as one text.
        return {str(k): check_answer(" ".join(map(str, v)) if _is_word_list(v) else v) for k, v in value.items()}
    if isinstance(value, bool) or value is None:
        raise SandboxError(f"program returned {value!r}, not a number", kind="result")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise SandboxError(f"program returned a non-finite number {value!r}", kind="result")
        return value
    if isinstance(value, str) and 0 < len(value) <= 500:
        try:
            return float(value.replace(",", ""))
        except ValueError:
            return value
    raise SandboxError(f"program returned {type(value).__name__}, not a number", kind="result")


def _request_text(question: str, context: str | None) -> str:
    """What extraction reads: the question, then the context (a table, a document) if any."""
    return question if not context else f"{question}\n\nContext:\n{context}"


def shared_prefix(texts: list[str], minimum: int = 40) -> str:
    """The text all of a group's requests begin with (boilerplate), cut back to a word boundary.

    Extraction reads only what follows it: a shorter prompt for the small model and fewer candidate
    numbers, since values that vary between requests cannot be in a prefix they all share.
    """
    if len(texts) < 2:
        return ""
    prefix = os.path.commonprefix(texts)
    cut = max(prefix.rfind(" "), prefix.rfind("\n"))
    prefix = prefix[:cut + 1] if cut >= 0 else ""
    return prefix if len(prefix) >= minimum else ""


def _strip_prefix(text: str, prefix: str) -> str:
    return text[len(prefix):] if prefix and text.startswith(prefix) else text


def _validate_text(value: Any, what: str, limit: int, required: bool) -> str | None:
    if value is None:
        if required:
            raise InvalidRequest(f"{what} is required")
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(f"{what} is not valid UTF-8 (byte {exc.start})") from None
    if isinstance(value, (dict, list)) and what == "context":
        value = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str):
        raise InvalidRequest(f"{what} must be text, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidRequest(f"{what} contains NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: no store or response can hold it
        raise InvalidRequest(f"{what} is not valid text (a lone surrogate at character {exc.start})") from None
    if required and not value.strip():
        raise InvalidRequest(f"{what} is empty")
    if len(value) > limit:
        raise InvalidRequest(f"{what} is {len(value):,} characters; the limit is {limit:,}")
    return value


@dataclass
class _Candidate:
    """A program a build may turn into an entry, and where its defaults (one request's values) came from."""

    kind: str  # "lifted" (a plain miss program, lifted) | "miss-program" (already parameterized) | "target-build"
    source: str
    origin: Example
    score: int = 0  # model-free agreements minus disagreements with the group's other examples
    checked: int = 0  # examples (its own included) whose own program could be compared with it
    agreed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (request text, values) that agreed


_ROUTE_COUNTERS = {"hit": "hits", "miss": "misses", "fallback": "fallbacks",
                   "step-reuse": "step_reuse", "step-patch": "step_patch", "step-skip": "step_skip"}


def _without_defaults(source: str) -> str:
    """``source`` without comments and with ``solve``'s defaults blanked. Candidates that differ only
    there compute the same on every example compared (each gets a value for every parameter), so a
    build runs one of them per example, not each of them: with each example's lifted program its own
    candidate, comparing all of them made a build quadratic in sandbox runs (tests/test_server_load.py)."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "solve":
            node.args.defaults = [ast.Constant(None) for _ in node.args.defaults]
            node.args.kw_defaults = [None if d is None else ast.Constant(None) for d in node.args.kw_defaults]
    return ast.unparse(tree)


class MiniCache:
    """Parameterized program cache in front of a target model, with a small model for extraction."""

    def __init__(self, target: ModelBackend, small: ModelBackend, store: Store | str | None = None, *,
                 embedder: Embedder | None = None, sandbox: SandboxPool | None = None,
                 config: EngineConfig | None = None) -> None:
        self.target = target
        self.small = small
        self.store = open_store(store)
        self.config = config or EngineConfig()
        if embedder is None:
            from .embedding import shared_embedder

            embedder = shared_embedder()
        self.router = Router(self.store, embedder, self.config.route_threshold,
                             refresh_s=self.config.route_refresh_s, per_group=self.config.route_per_group)
        self.sandbox = sandbox or SandboxPool()
        self._own_sandbox = sandbox is None
        self.extractor = Extractor(small, use_rules=self.config.use_rules, use_choice=self.config.use_choice)
        self.verifier = HitVerifier(self.extractor, self.config.verify)
        self._audits: list[Future] = []
        self._audit_rng = random.Random()
        self._builds = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minicache-build")
        self._building: dict[tuple[str, str], Future] = {}
        self._build_lock = threading.Lock()
        # Build, audit and eviction events for progress displays and the dashboard; bounded.
        self.events = EventLog(self.config.max_events)
        self._owner = new_id("replica")  # this engine's name in build leases
        self.admission = Admission(self.config.admission)
        self.steps = StepCache(target, self.store, embedder, self.config.step)

    @classmethod
    def local(cls, store: Store | str | None = "minicache.db", **kwargs: Any) -> MiniCache:
        """The embedded default models (see `minicache models`) with a SQLite store."""
        from .config import build_backends

        target, small = build_backends()
        return cls(target, small, store, **kwargs)

    # ------------------------------------------------------------------------------------------
    def solve(self, question: Any, context: Any = None, group: str | None = None, tenant: str = "default", *,
              no_cache: bool = False, no_store: bool = False, force_refresh: bool = False,
              mode: str = "auto") -> SolveResult:
        """Answer one request. ``no_cache`` skips the lookup, ``no_store`` records nothing,
        ``force_refresh`` recomputes with the target (and records the result).

        ``mode`` picks the cache: ``"program"`` (parameterized programs), ``"step"`` (StepCache, for
        structured outputs it can verify) or ``"auto"``: StepCache for a request without context that
        it recognises (a linear equation to solve in steps, a JSON object with typed keys), else programs."""
        began = time.perf_counter()
        question = _validate_text(question, "question", self.config.max_question_chars, True)
        context = _validate_text(context, "context", self.config.max_context_chars, False)
        if group is not None and (not isinstance(group, str) or not group.strip() or len(group) > 200):
            raise InvalidRequest("group must be a non-empty string of at most 200 characters")
        _validate_text(group, "group", 200, False)
        if not isinstance(tenant, str) or not tenant or len(tenant) > 200:
            raise InvalidRequest("tenant must be a non-empty string of at most 200 characters")
        assert question is not None
        if (requested_decimals(question) or 0) > MAX_DECIMALS:
            raise InvalidRequest(f"the question asks for more than {MAX_DECIMALS} decimal places")
        if mode not in ("auto", "program", "step"):
            raise InvalidRequest(f"mode must be auto, program or step, not {mode!r}")
        step_request = None
        if mode == "step" or (mode == "auto" and context is None):
            step_request = parse_step_task(question)
            if step_request is None and mode == "step":
                raise InvalidRequest("mode=step needs a request StepCache can verify: 'solve <one linear equation>' "
                                     "or a JSON object with typed required keys "
                                     "(\"key\" (string|number|integer|boolean))")
        try:
            if step_request is not None:
                result = self._solve_steps(question, step_request, tenant, no_store=no_store,
                                           reuse=not (no_cache or force_refresh))
            else:
                result = self._serve(question, context, group, tenant, no_cache=no_cache, no_store=no_store,
                                     force_refresh=force_refresh)
        except BaseException:
            if not no_store:
                self.store.bump(tenant, "requests")
                self.store.bump(tenant, "errors")
            raise
        finally:
            self.router.forget_pending(tenant, question)
        if not no_store:
            # Counted together at the end, so that requests == the routes' counters + errors.
            self.store.bump(tenant, "requests")
            self.store.bump(tenant, _ROUTE_COUNTERS[result.route])
            if result.tokens["target"]:
                self.store.bump(tenant, "target_tokens", result.tokens["target"])
            if result.route in ("hit", "miss", "fallback"):  # its cost without any build it triggered
                self.admission.observe_request(tenant, result.group, result.route,
                                               sum(v for k, v in result.timings.items() if k != "total_s"))
        result.timings["total_s"] = time.perf_counter() - began
        return result

    def _serve(self, question: str, context: str | None, group: str | None, tenant: str, *, no_cache: bool,
               no_store: bool, force_refresh: bool) -> SolveResult:
        """Route, then hit if the group has an entry and it works, else miss (a fallback if a hit failed)."""
        timings: dict[str, float] = {}
        t = time.perf_counter()
        decision = self.router.route(tenant, question, group)
        timings["route_s"] = time.perf_counter() - t
        fallback_reason = None
        refused: HitRefused | None = None
        entry = None
        if not (no_cache or force_refresh):
            entry = self.store.active_entry(tenant, decision.group_id)
            if entry is not None:
                try:
                    result = self._hit(entry, question, context, timings, tenant, record=not no_store)
                    result.similarity = decision.similarity
                    return result
                except HitRefused as exc:  # the hit could not be shown right: not the entry's failure
                    refused, fallback_reason = exc, f"HitRefused: {exc}"
                    if not no_store:
                        self.store.bump(tenant, "hit_refusals")
                except (ExtractionError, SandboxError, SandboxViolation) as exc:
                    fallback_reason = f"{type(exc).__name__}: {exc}"
                    if not no_store:
                        self._count_failure(tenant, entry, question, fallback_reason)
        result = self._miss(decision.group_id, question, context, timings, tenant, record=not no_store,
                            new_group=decision.new_group, label=group)
        result.similarity = decision.similarity
        if fallback_reason:
            result.route, result.fallback_reason = "fallback", fallback_reason
        if refused is not None and refused.shadow and entry is not None and not no_store:
            # A demoted entry's would-be hit, checked against this miss answer, is its way back.
            self._schedule_audit(tenant, entry, question, context, reference=result.answer)
        return result

    def _solve_steps(self, question: str, request: Any, tenant: str, *, no_store: bool, reuse: bool) -> SolveResult:
        out = self.steps.solve(question, tenant, record=not no_store, reuse=reuse, request=request)
        return SolveResult(answer=out.answer, route=out.route, group=f"step:{out.task}", timings=dict(out.timings),
                           tokens={"target": out.tokens, "small": 0}, fallback_reason=out.reason or None,
                           answer_text=out.output, output=out.output, steps=out.steps, verified=out.verified,
                           solver_fallback=out.solver_fallback, reused_from=out.reused_from)

    async def asolve(self, *args: Any, **kwargs: Any) -> SolveResult:
        """``solve`` off the event loop (models, sandbox and store all block)."""
        return await asyncio.to_thread(self.solve, *args, **kwargs)

    # -- hit --------------------------------------------------------------------------------------
    def _hit(self, entry: Entry, question: str, context: str | None, timings: dict[str, float],
             tenant: str, record: bool = True) -> SolveResult:
        """Verified values (minicache.hit), the program, then the answer's plausibility; whatever cannot
        be shown right raises HitRefused. A demoted entry serves zero-model hits only."""
        allow_model = not demoted(entry, self.config.audit_delta, self.config.audit_z)
        extraction = self.verifier.extract(entry, _request_text(question, context), allow_model=allow_model)
        timings["extract_s"] = extraction.seconds
        run = self.sandbox.run(entry.program, extraction.variables)
        timings["sandbox_s"] = run.seconds
        value = check_answer(run.value)
        self.verifier.check_answer(entry, value)
        if record:
            self.store.record_hit(tenant, entry.id)
            if extraction.small_tokens:
                self.store.bump(tenant, "small_tokens", extraction.small_tokens)
            if self.config.audit_rate > 0 and self._audit_rng.random() < self.config.audit_rate:
                self._schedule_audit(tenant, entry, question, context, hit_answer=value, method=extraction.method)
        return SolveResult(answer=value, answer_text=format_answer(value, question), route="hit",
                           group=entry.group_id, entry_id=entry.id, program=entry.program,
                           variables=extraction.variables, timings=timings,
                           tokens={"target": 0, "small": extraction.small_tokens}, extraction=extraction.method)

    # -- audits -----------------------------------------------------------------------------------
    def _schedule_audit(self, tenant: str, entry: Entry, question: str, context: str | None, **kwargs: Any) -> None:
        """Run :meth:`_audit` on the background executor (builds' one), or now without background builds."""
        if not self.config.background_builds:
            self._audit(tenant, entry, question, context, **kwargs)
            return
        with self._build_lock:
            self._audits = [f for f in self._audits if not f.done()]
            self._audits.append(self._builds.submit(self._audit, tenant, entry, question, context, **kwargs))

    def _audit(self, tenant: str, entry: Entry, question: str, context: str | None, *, hit_answer: Any = None,
               method: str | None = None, reference: Any = None) -> bool | None:
        """Compare a hit's answer with the miss path's on one request and add it to the entry's record.

        A served hit brings ``hit_answer`` (the miss path answers again, recording nothing); a demoted
        entry's refused request brings the miss answer as ``reference`` (the would-be hit is computed
        here, with every check). Returns whether they agreed, or None if either side had no answer.
        A zero-model hit caught wrong also counts as the entry's failure: its values were unambiguous,
        so the program is the likely culprit."""
        try:
            if reference is None:
                miss = self._miss(entry.group_id, question, context, {}, tenant, record=False, new_group=False,
                                  label=None)
                reference = miss.answer
                self.store.bump(tenant, "target_tokens", miss.tokens["target"])
            if hit_answer is None:
                extraction = self.verifier.extract(entry, _request_text(question, context))
                hit_answer = check_answer(self.sandbox.run(entry.program, extraction.variables).value)
                self.verifier.check_answer(entry, hit_answer)
                method = extraction.method
        except (MiniCacheError, SandboxError, SandboxViolation):
            return None
        agreed = answers_match(hit_answer, reference)
        self.store.record_audit(tenant, entry.id, agreed)
        self.store.bump(tenant, "audits")
        if not agreed:
            self.store.bump(tenant, "audits_disagreed")
            if method in ZERO_MODEL_PATHS:
                self._count_failure(tenant, entry)
        self.events.append({"event": "audit", "group": entry.group_id, "entry": entry.id, "agreed": agreed,
                            "extraction": method})
        return agreed

    def wait_for_audits(self, timeout: float | None = None) -> None:
        with self._build_lock:
            futures = list(self._audits)
        for f in futures:
            f.result(timeout=timeout)

    def _count_failure(self, tenant: str, entry: Entry, question: str | None = None, reason: str = "") -> None:
        failures = self.store.record_failure(tenant, entry.id)
        if question is not None:  # the next build of the group must answer this request right
            record_failed_hit(self.store, tenant, entry.group_id, question, reason,
                              evicted=failures >= self.config.max_failures)
        if failures >= self.config.max_failures:
            self.store.set_entry_status(tenant, entry.id, "evicted")
            self.store.bump(tenant, "evictions")
            self.events.append({"event": "evict", "group": entry.group_id, "entry": entry.id, "failures": failures})

    # -- miss -------------------------------------------------------------------------------------
    def _miss(self, group_id: str, question: str, context: str | None, timings: dict[str, float], tenant: str,
              *, record: bool, new_group: bool, label: str | None) -> SolveResult:
        """Plain program-of-thought: the same request the PoT baseline makes, so a miss costs one PoT
        call and is as accurate. The build lifts these programs into parameterized ones later."""
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
        for attempt in range(2):
            t = time.perf_counter()
            try:
                out = self.target.complete(messages, GenerationOptions(
                    max_tokens=self.config.miss_max_tokens, draft="lookup" if reference else None,
                    draft_text=reference))
            except BackendError as exc:
                raise SolveError(f"target model failed: {exc}") from exc
            target_s += time.perf_counter() - t
            tokens["target"] += out.prompt_tokens + out.completion_tokens
            code = extract_code(out.text)
            try:
                run = self.sandbox.run(code, {})
                sandbox_s += run.seconds
                value = check_answer(run.value)
                error = None
                break
            except (SandboxError, SandboxViolation) as exc:
                error = f"{type(exc).__name__}: {exc}"
                messages = messages + [Message("assistant", out.text), Message(
                    "user", f"That program failed: {exc}. Write the corrected ```python block with def solve().")]
        timings["target_s"] = target_s
        timings["sandbox_s"] = sandbox_s
        if error is not None:
            raise SolveError(f"the target's program failed twice: {error}")
        variables = program_inputs(code, _request_text(question, context))
        if record:
            t = time.perf_counter()
            self.store.ensure_group(tenant, group_id, label=label)
            example = Example(id=new_id("ex"), tenant=tenant, group_id=group_id, question=question,
                              context=context, program=code, answer=value, variables=variables,
                              embedding=self.router.embed_request(question))
            self.store.add_example(example)
            self.router.recorded(tenant, group_id, example.embedding)
            timings["record_s"] = time.perf_counter() - t
            self._maybe_build(tenant, group_id)
        return SolveResult(answer=value, answer_text=format_answer(value, question), route="miss", group=group_id,
                           program=code, variables=variables, timings=timings, tokens=tokens)

    # -- build ------------------------------------------------------------------------------------
    def _maybe_build(self, tenant: str, group_id: str) -> None:
        if self.config.frozen:
            return
        group = self.store.get_group(tenant, group_id)
        if group is None or group.n_examples < self.config.build_after:
            return
        if group.build_failures and backing_off(group, self.store.group_failure(tenant, group_id)):
            return
        if self.store.active_entry(tenant, group_id) is not None:
            return
        seen = max(group.n_examples, self.admission.arrivals(tenant, group_id))
        if not self.admission.admits(tenant, seen)[0]:  # its arrivals do not predict hits that pay for a build
            return
        key = (tenant, group_id)
        with self._build_lock:
            running = self._building.get(key)
            if running is not None and not running.done():
                return
            if self.config.background_builds:
                future = self._builds.submit(self._build, tenant, group_id)
                future.add_done_callback(lambda done: self._build_done(tenant, group_id, done))
                self._building[key] = future
                return
        try:
            self._build(tenant, group_id)
        except Exception as exc:  # noqa: BLE001 - a failed build must not fail the request that triggered it
            self._build_crashed(tenant, group_id, exc)

    def _build_done(self, tenant: str, group_id: str, future: Future) -> None:
        error = None if future.cancelled() else future.exception()
        if error is not None:
            self._build_crashed(tenant, group_id, error)

    def _build_crashed(self, tenant: str, group_id: str, exc: BaseException) -> None:
        """A build that raised (not one that ran and found no candidate): count it, log why, show it.

        A background build's exception would otherwise stay inside its Future, unseen."""
        log.error("build of group %s (tenant %s) failed: %s: %s", group_id, tenant, type(exc).__name__, exc,
                  exc_info=exc)
        self.store.bump(tenant, "builds_failed")
        self.events.append({"event": "build", "group": group_id, "ok": False, "attempts": 0, "error": str(exc)})

    def wait_for_builds(self, timeout: float | None = None) -> None:
        with self._build_lock:
            futures = list(self._building.values())
        for f in futures:
            f.result(timeout=timeout)

    def _validate(self, source: str, held: list[Example], origin: Example, prefix: str) -> dict[str, Any]:
        """Run the real hit path (extraction by the small model, then the program) on each held
        example; the candidate passes if enough answers match the ones its examples were served."""
        try:
            signature = parse_signature(source)
        except ProgramShapeError as exc:
            return {"ok": False, "error": f"program shape: {exc}"}
        # Candidate choice works only if the values are written in the request: check on the example
        # whose values the program's defaults are.
        written = candidate_values(_strip_prefix(_request_text(origin.question, origin.context), prefix))
        numeric = [v for v in signature.defaults.values() if not isinstance(v, str)]
        mode = "choice" if self.config.use_choice and all(v in written for v in numeric) else "free"
        needed = min(self.config.validate_min, len(held))
        checks: list[dict[str, Any]] = []
        validated: list[tuple[str, dict[str, Any]]] = []
        for n, ex in enumerate(held):
            if sum(c["match"] for c in checks) + (len(held) - n) < needed:
                break  # cannot reach the required matches any more
            text = _strip_prefix(_request_text(ex.question, ex.context), prefix)
            check: dict[str, Any] = {"example": ex.id, "expected": ex.answer}
            try:
                extraction = self.extractor.by_model(signature.template, text, choice=(mode == "choice"))
                check["variables"] = extraction.variables
                value = check_answer(self.sandbox.run(source, extraction.variables).value)
                check.update(got=value, match=answers_match(value, ex.answer))
                if check["match"]:
                    validated.append((text, extraction.variables))
            except (ExtractionError, SandboxError, SandboxViolation) as exc:
                check.update(match=False, error=str(exc))
            checks.append(check)
        passed = sum(c["match"] for c in checks)
        return {"ok": passed >= needed, "template": signature.template, "extraction": mode, "checks": checks,
                "validated": validated, "passed": passed, "of": len(held), "shared_prefix": prefix}

    def _own_candidates(self, examples: list[Example], prefix: str) -> tuple[list[_Candidate], bool]:
        """The group's own programs as parameterized candidates, best first.

        Each example's program is lifted against its own request (see :mod:`minicache.lifting`). A
        candidate is then checked against the other examples without any model: where an example's
        own program lifts to the same parameters, running the candidate on that example's values must
        give its answer. Only a candidate a majority of the examples it could be compared with agree
        with is kept (one example's mistake must not become every later request's), ranked by
        agreements minus disagreements (the newest first among equals); the agreeing (request,
        values) pairs later help learn extraction rules. Also returns whether the programs were
        compared and none has a majority (the group's examples disagree: nothing to cache yet)."""
        texts = {ex.id: _strip_prefix(_request_text(ex.question, ex.context), prefix) for ex in examples}
        found: list[_Candidate] = []
        # Each example's own values, lifted once here: lifting per (candidate, example) pair made a
        # build quadratic in lifts, and queued builds of busy groups took minutes (tests/test_server_load.py).
        inputs: dict[str, dict[str, Any]] = {}
        shapes: set[str] = set()
        for ex in reversed(examples):
            try:
                inputs[ex.id] = parse_signature(ex.program).defaults
                kind, source = "miss-program", ex.program
            except ProgramShapeError:
                lifted = lift(ex.program, texts[ex.id])
                inputs[ex.id] = lifted.defaults if lifted else {}
                if lifted is None:
                    continue
                kind, source = "lifted", lifted.program
            shape = _without_defaults(source)
            if shape not in shapes:  # one candidate per function: the newest example's defaults
                shapes.add(shape)
                found.append(_Candidate(kind, source, ex))
        for cand in found:
            defaults = parse_signature(cand.source).defaults
            for ex in examples:
                own = inputs[ex.id]  # as lifting.own_values: only under the same parameter names
                values = defaults if ex is cand.origin else own if own and set(own) == set(defaults) else None
                if values is None:
                    continue
                try:
                    agrees = answers_match(check_answer(self.sandbox.run(cand.source, values).value), ex.answer)
                except (SandboxError, SandboxViolation):
                    agrees = False
                cand.score += 1 if agrees else -1
                cand.checked += 1
                if agrees:
                    cand.agreed.append((texts[ex.id], values))
        found.sort(key=lambda c: -c.score)
        # agreements = (score + checked) / 2 must be more than half of checked, i.e. score > 0
        kept = [c for c in found if c.score > 0]
        split = not kept and any(c.checked >= 2 for c in found)  # compared with each other, and no majority
        return kept[: self.config.build_candidates], split

    def _build(self, tenant: str, group_id: str) -> Entry | None:
        """Build under the group's lease in the store, so two replicas never build one group at once."""
        if not self.store.acquire_build_lease(tenant, group_id, self._owner, self.config.build_lease_s):
            return None
        try:
            if self.store.active_entry(tenant, group_id) is not None:  # another replica just built it
                return None
            began = time.perf_counter()
            entry = self._build_locked(tenant, group_id)
            self.admission.observe_build(time.perf_counter() - began, entry is not None)
            return entry
        finally:
            self.store.release_build_lease(tenant, group_id, self._owner)

    def _build_locked(self, tenant: str, group_id: str) -> Entry | None:
        examples = self.store.examples(tenant, group_id)
        # What failed last time (minicache.admission) must pass now, and seeds the target's feedback.
        failure = self.store.group_failure(tenant, group_id)
        held, must = validation_set(examples, failure, self.config.validate_n)
        # Values that vary cannot be in the boilerplate every request of the group starts with.
        prefix = shared_prefix([_request_text(ex.question, ex.context) for ex in held])
        candidates, split = self._own_candidates(examples, prefix)
        feedback = failure.get("feedback") if failure else None
        attempts: list[dict[str, Any]] = []
        failed_checks: list[dict[str, Any]] = []
        no_majority = not candidates and split
        if no_majority:  # the group's own programs contradict each other: nothing to cache yet
            attempts.append({"source": "agreement", "ok": False, "error": "no program has a majority of the examples"})
        while not no_majority:
            if candidates:
                cand = candidates.pop(0)
            elif sum(a["source"] == "target-build" for a in attempts) < self.config.build_retries:
                try:
                    source, used = generalize(self.target, held, feedback)
                except BackendError as exc:
                    attempts.append({"source": "target-build", "error": str(exc)})
                    break
                self.store.bump(tenant, "target_tokens", used)
                cand = _Candidate("target-build", source, held[0])  # its defaults: the first example's values
            else:
                break
            record = self._validate(cand.source, held, cand.origin, prefix)
            if record["ok"] and not must <= {c["example"] for c in record["checks"] if c["match"]}:
                record.update(ok=False, error="it fails a request the group failed on before")
            attempts.append({"source": cand.kind, "ok": record["ok"], "error": record.get("error"),
                             "agreements": cand.score})
            if record["ok"]:
                template = record["template"]
                pairs = list(record["validated"])
                pairs += [p for p in cand.agreed if all(p[0] != q[0] for q in pairs)]
                rules = learn_rules(template, pairs) if self.config.use_rules else {}
                if len(pairs) < 3:  # positions are only trusted with three agreeing examples
                    rules = {k: r for k, r in rules.items() if r["kind"] != "position"}
                entry = Entry(id=new_id("ent"), tenant=tenant, group_id=group_id, template=template,
                              program=cand.source,
                              validation={"extraction": record["extraction"], "passed": record["passed"],
                                          "shared_prefix": record["shared_prefix"],
                                          "of": record["of"], "source": cand.kind, "attempts": attempts,
                                          "rule_examples": len(pairs),
                                          "profile": learn_profile(template, pairs, [ex.answer for ex in examples],
                                                                   self.config.verify.exemplars),
                                          "held": [ex.id for ex in held], "at": time.time()},
                              rules=rules)
                self.store.put_entry(entry)
                if failure:
                    self.store.set_group_failure(tenant, group_id, None)
                self.store.bump(tenant, "builds_ok")
                self.events.append({"event": "build", "group": group_id, "entry": entry.id, "ok": True,
                                    "source": cand.kind, "rules": len(rules)})
                return entry
            failing = [c for c in record.get("checks", []) if not c["match"]]
            failed_checks += failing
            feedback = "\n".join(f"- expected {c['expected']}, got {c.get('got', c.get('error'))} with "
                                 f"variables {c.get('variables')}" for c in failing[:4]) or record.get("error")
        group = self.store.get_group(tenant, group_id)
        if group is not None:  # back off exponentially; record why for the next attempt
            record_build_failure(self.store, group, attempts, failed_checks, feedback, self.config.admission,
                                 self.config.max_build_failures)
        self.store.bump(tenant, "builds_failed")
        self.events.append({"event": "build", "group": group_id, "ok": False, "attempts": len(attempts)})
        return None

    # -- management ---------------------------------------------------------------------------------
    def stats(self, tenant: str = "default") -> dict[str, Any]:
        counters = self.store.counters(tenant)
        entries = self.store.list_entries(tenant)
        groups = self.store.list_groups(tenant)
        requests = counters.get("requests", 0)
        return {
            "requests": requests, "hits": counters.get("hits", 0), "misses": counters.get("misses", 0),
            "fallbacks": counters.get("fallbacks", 0), "errors": counters.get("errors", 0),
            "hit_rate": counters.get("hits", 0) / requests if requests else 0.0,
            "builds_ok": counters.get("builds_ok", 0), "builds_failed": counters.get("builds_failed", 0),
            "evictions": counters.get("evictions", 0),
            "hit_refusals": counters.get("hit_refusals", 0), "audits": counters.get("audits", 0),
            "audits_disagreed": counters.get("audits_disagreed", 0),
            "entries_demoted": sum(e.status == "active" and demoted(e, self.config.audit_delta, self.config.audit_z)
                                   for e in entries),
            "step_reuse": counters.get("step_reuse", 0), "step_patch": counters.get("step_patch", 0),
            "step_skip": counters.get("step_skip", 0),
            "target_tokens": counters.get("target_tokens", 0), "small_tokens": counters.get("small_tokens", 0),
            "groups": len(groups), "uncacheable_groups": sum(g.status == "uncacheable" for g in groups),
            "entries_active": sum(e.status == "active" for e in entries), "entries_total": len(entries),
            "sandbox": dict(self.sandbox.stats),
        }

    def invalidate(self, *, group: str | None = None, entry: str | None = None, tenant: str = "default") -> int:
        """Evict one active entry; or, for a group (label or group id), evict its active entries and
        forget its examples, so the next requests start it afresh instead of rebuilding the same
        program. Returns how many active entries were evicted."""
        if entry:
            found = self.store.get_entry(tenant, entry)
            if found is None or found.status != "active":
                return 0
            self.store.set_entry_status(tenant, entry, "evicted")
            return 1
        if group:
            gid = group if self.store.get_group(tenant, group) else f"label:{group}"
            n = 0
            for e in self.store.list_entries(tenant, "active"):
                if e.group_id == gid:
                    self.store.set_entry_status(tenant, e.id, "evicted")
                    n += 1
            self.store.clear_examples(tenant, gid)
            self.router.forget_group(tenant, gid)
            return n
        raise InvalidRequest("invalidate needs group= or entry=")

    def export_entries(self, tenant: str = "default", examples: int = 3) -> list[dict[str, Any]]:
        """Active entries as JSON, each with up to ``examples`` of its group's requests, which let an
        importing cache route unlabelled requests to it (see :mod:`minicache.portability`)."""
        return portability.export_entries(self.store, tenant, examples)

    def import_entries(self, data: list[dict[str, Any]], tenant: str = "default") -> int:
        """Import an export (parsed JSON): the whole document is validated first
        (:class:`~minicache.portability.EntryExport`; :class:`InvalidRequest` names the first
        problem), then written in one transaction. Returns how many entries were imported."""
        return portability.import_entries(self.store, portability.parse_export(data), tenant,
                                          lambda: self.router.embedder, self.router.recorded)

    def warm_start(self, path: str | Path, tenant: str = "default") -> int:
        """Import an export file, as :meth:`import_entries` (unreadable files are InvalidRequest too)."""
        return portability.import_entries(self.store, portability.load_export(path), tenant,
                                          lambda: self.router.embedder, self.router.recorded)

    def close(self) -> None:
        self._builds.shutdown(wait=True)
        if self._own_sandbox:
            self.sandbox.close()
        self.store.close()

    def __enter__(self) -> MiniCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
