"""The methods ``minicache bench`` compares. Each turns a request into an answer and says what it cost.

* ``direct``   - the target answers directly (no program).
* ``pot``      - the target writes a plain program (``def solve()``, no parameters) for every request,
  run in the sandbox (the main baseline; MiniCache's misses send the same prompt, then lift the
  program into a parameterized one when they build).
* ``pot-spec`` - pot with the small model drafting for the target (speculative decoding).
* ``exact``    - an exact-prompt cache in front of pot.
* ``gptcache-like`` - GPTCache's documented behaviour, re-implemented here (the package is frozen
  and its OpenAI adapter breaks on openai>=1), so not GPTCache itself: MiniLM embedding of the whole
  prompt, a cached answer is returned when cosine similarity >= 0.95, else pot and store.
* ``gencache-like`` - GenCache (arXiv 2511.17565) as its paper describes it, re-implemented here:
  requests are clustered by prompt similarity (T_p = 0.8) and response similarity (T_r = 0.75); once
  a cluster has nu = 4 examples the target writes a regex extractor plus a program for it, accepted
  if gamma = 50% of the cluster's examples are reproduced; no small model.
  Both were named ``gptcache`` and ``gencache`` before: those spellings stay accepted (``ALIASES``),
  so committed commands still run and rows written under them are read back under the new names.
* ``minicache`` - this project's engine.
* ``no-reuse``  - structured-output requests (``stepcache-micro``): the target writes the whole output
  for every request from the same system prompt StepCache generates with (StepCache's baseline).
* ``no-reuse+solver`` - no-reuse's full answer, checked like StepCache's and given the same fallbacks
  (the deterministic solver for equations, the record-constrained repair for JSON): the fair baseline.
* ``stepcache`` - the engine with ``mode="step"``: step-level reuse, checks, selective patching.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..admission import AdmissionConfig, request_cost
from ..engine import EngineConfig, MiniCache, SolveError, check_answer
from ..errors import ProgramError
from ..models.base import GenerationOptions, Message, ModelBackend
from ..programs import extract_code
from ..prompts import plain_pot_messages
from ..routing import Embedder
from ..sandbox import SandboxError, SandboxPool
from ..synthesis import answers_match
from .data import BenchRequest, parse_action


@dataclass
class Outcome:
    answer: Any
    route: str  # "hit" (served without the target) | "miss" | "error"
    target_tokens: int = 0
    small_tokens: int = 0
    detail: dict[str, Any] = field(default_factory=dict)


class Method(Protocol):
    """A benchmark method. One that keeps state in memory between requests (a cache) may also have
    ``resume(done, tail)``: given the rows an earlier call of a chunked run recorded (with their
    requests, in stream order), restore that state, so the next chunk continues the same stream
    (``run_benchmark`` calls it). ``tail``: what its ``tail()`` returned at the end of that call."""

    name: str

    def solve(self, request: BenchRequest) -> Outcome: ...


def _prompt_text(r: BenchRequest) -> str:
    return r.question if not r.context else f"{r.context}\n\n{r.question}"


_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _first_number(text: str) -> float | None:
    m = _NUM.search(text.replace("$", ""))
    return float(m.group(0).replace(",", "")) if m else None


class Direct:
    name = "direct"

    def __init__(self, target: ModelBackend) -> None:
        self.target = target

    def solve(self, r: BenchRequest) -> Outcome:
        system = ("Answer with the final result only: a JSON object for actions, otherwise one number "
                  "with no units or words.")
        out = self.target.complete([Message("system", system), Message("user", _prompt_text(r))],
                                   GenerationOptions(max_tokens=96))
        answer: Any = parse_action(out.text) if r.kind == "action" else _first_number(out.text)
        return Outcome(answer, "miss", out.prompt_tokens + out.completion_tokens)


class PoT:
    name = "pot"

    def __init__(self, target: ModelBackend, sandbox: SandboxPool, draft: str | None = None) -> None:
        self.target, self.sandbox, self.draft = target, sandbox, draft
        if draft:
            self.name = "pot-spec"

    def program(self, r: BenchRequest) -> tuple[str, int]:
        out = self.target.complete(plain_pot_messages(r.question, r.context),
                                   GenerationOptions(max_tokens=640, draft=self.draft))  # type: ignore[arg-type]
        return extract_code(out.text), out.prompt_tokens + out.completion_tokens

    def solve(self, r: BenchRequest) -> Outcome:
        code, tokens = self.program(r)
        try:
            return Outcome(check_answer(self.sandbox.run(code, {}).value), "miss", tokens)
        except ProgramError as exc:
            return Outcome(None, "miss", tokens, detail={"error": str(exc)})


class Exact:
    name = "exact"

    def __init__(self, pot: PoT) -> None:
        self.pot = pot
        self.cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    def resume(self, done: list[tuple[BenchRequest, dict[str, Any]]], tail: dict[str, Any] | None = None) -> None:
        """Refill the cache from an earlier chunk's rows: each answered prompt, as ``solve`` stored it."""
        for r, row in done:
            if row.get("answer") is not None:
                self.cache.setdefault(_prompt_text(r), row["answer"])

    def solve(self, r: BenchRequest) -> Outcome:
        key = _prompt_text(r)
        with self._lock:
            if key in self.cache:
                return Outcome(self.cache[key], "hit")
        out = self.pot.solve(r)
        if out.answer is not None:
            with self._lock:
                self.cache[key] = out.answer
        return out


class GPTCacheLike:
    """Semantic cache over whole prompts: MiniLM embeddings, cosine >= 0.95 returns the cached answer."""

    name = "gptcache-like"

    def __init__(self, pot: PoT, embedder: Embedder, threshold: float = 0.95) -> None:
        self.pot, self.embedder, self.threshold = pot, embedder, threshold
        self.keys: list[np.ndarray] = []
        self.answers: list[Any] = []
        self._lock = threading.Lock()

    def resume(self, done: list[tuple[BenchRequest, dict[str, Any]]], tail: dict[str, Any] | None = None) -> None:
        """Refill the cache from an earlier chunk's rows: every answered miss's prompt, embedded again
        one at a time as ``solve`` embeds it (hits stored nothing)."""
        for r, row in done:
            if row.get("route") == "miss" and row.get("answer") is not None:
                self.keys.append(self.embedder.embed([_prompt_text(r)[-2000:]])[0])
                self.answers.append(row["answer"])

    def solve(self, r: BenchRequest) -> Outcome:
        vec = self.embedder.embed([_prompt_text(r)[-2000:]])[0]
        with self._lock:
            if self.keys:
                sims = np.stack(self.keys) @ vec
                best = int(np.argmax(sims))
                if sims[best] >= self.threshold:
                    return Outcome(self.answers[best], "hit", detail={"similarity": float(sims[best])})
        out = self.pot.solve(r)
        if out.answer is not None:
            with self._lock:
                self.keys.append(vec)
                self.answers.append(out.answer)
        return out


GENCACHE_SYSTEM = """You write a reusable Python extractor and calculator for a cluster of similar requests.
Write two functions in one ```python block, using only the re and math modules:
- `def extract(text)`: returns a dict of the input values, found in the request text with regular expressions;
- `def solve(**values)`: computes the answer from those values and returns it.
They must work for every example below, not only the first."""


class GenCacheLike:
    """GenCache's documented procedure: cluster by prompt (T_p) and response (T_r) similarity; at nu
    examples the target writes regex extraction + program; accepted if gamma of the examples pass."""

    name = "gencache-like"

    def __init__(self, pot: PoT, target: ModelBackend, sandbox: SandboxPool, embedder: Embedder,
                 t_p: float = 0.8, t_r: float = 0.75, nu: int = 4, gamma: float = 0.5, attempts: int = 2) -> None:
        self.pot, self.target, self.sandbox, self.embedder = pot, target, sandbox, embedder
        self.t_p, self.t_r, self.nu, self.gamma, self.attempts = t_p, t_r, nu, gamma, attempts
        self.clusters: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def _run(self, program: str, text: str) -> Any:
        values = self.sandbox.run(program, {"text": text}, function="extract").value
        if not isinstance(values, dict):
            raise SandboxError("extract did not return a dict", kind="result")
        return check_answer(self.sandbox.run(program, values).value)

    def solve(self, r: BenchRequest) -> Outcome:
        text = _prompt_text(r)
        vec = self.embedder.embed([text[-2000:]])[0]
        with self._lock:
            cluster = None
            if self.clusters:
                sims = np.array([float(c["centroid"] @ vec) for c in self.clusters])
                best = int(np.argmax(sims))
                if sims[best] >= self.t_p:
                    cluster = self.clusters[best]
        if cluster is not None and cluster.get("program"):
            try:
                return Outcome(self._run(cluster["program"], text), "hit")
            except ProgramError:
                pass
        code, tokens = self.pot.program(r)
        try:
            answer = check_answer(self.sandbox.run(code, {}).value)
        except ProgramError as exc:
            return Outcome(None, "miss", tokens, detail={"error": str(exc)})
        rvec = self.embedder.embed([code])[0]
        with self._lock:
            similar = max((float(v @ rvec) for v in cluster["responses"]), default=1.0) if cluster else 1.0
            if cluster is None or similar < self.t_r:
                cluster = {"centroid": vec, "examples": [], "responses": [], "program": None, "failed": 0}
                self.clusters.append(cluster)
            cluster["examples"].append((text, answer))
            cluster["responses"].append(rvec)
            ready = len(cluster["examples"]) >= self.nu and not cluster["program"] and cluster["failed"] < self.attempts
            examples = list(cluster["examples"][-self.nu:])
        if ready:
            built, build = self._build(cluster, examples)
            return Outcome(answer, "miss", tokens + built, detail={"build": build})
        return Outcome(answer, "miss", tokens)

    def _build(self, cluster: dict[str, Any], examples: list[tuple[str, Any]]) -> tuple[int, dict[str, Any]]:
        """Ask the target for an extractor and program; returns its tokens and how the check went
        (recorded on the request row, so a report can say why a cluster never got hits)."""
        shown = "\n\n".join(f"Example {i}:\n{t[-1500:]}\nAnswer: {a}" for i, (t, a) in enumerate(examples, 1))
        out = self.target.complete([Message("system", GENCACHE_SYSTEM), Message("user", shown)],
                                   GenerationOptions(max_tokens=700))
        program = extract_code(out.text)
        passed, first_error = 0, None
        for text, answer in examples:
            try:
                passed += answers_match(self._run(program, text), answer)
            except ProgramError as exc:
                first_error = first_error or str(exc)[:200]
        accepted = passed >= self.gamma * len(examples)
        with self._lock:
            if accepted:
                cluster["program"] = program
            else:
                cluster["failed"] += 1
        build = {"passed": passed, "of": len(examples), "accepted": accepted, "error": first_error}
        return out.prompt_tokens + out.completion_tokens, build


class MiniCacheMethod:
    """The engine as a benchmark method. Each row records the builds that finished since the previous
    row (``detail.builds``: [seconds, ok] each; ``detail.build_s`` is their sum), so that a later
    process can restore the engine's admission estimates from the rows alone (``resume``)."""

    name = "minicache"

    def __init__(self, engine: MiniCache, use_group_labels: bool = False) -> None:
        self.engine = engine
        self.use_group_labels = use_group_labels
        self._builds: list[list[Any]] = []  # finished since the last row: [seconds, ok]
        self._lock = threading.Lock()
        self.last_id: str | None = None  # the last request served (or read back) in the stream
        engine.admission.on_build = self._built

    def _built(self, seconds: float, ok: bool) -> None:
        with self._lock:  # background builds finish on the engine's worker thread
            self._builds.append([seconds, ok])

    def _take_builds(self) -> list[list[Any]]:
        """The builds that finished since the last row (they ran while the stream continued, slowing
        the requests they overlapped: reported, not hidden)."""
        with self._lock:
            done, self._builds = self._builds, []
        return done

    def _build_detail(self) -> dict[str, Any]:
        """A row's ``builds`` (those finished since the previous row) and ``build_s``, their sum."""
        builds = self._take_builds()
        return {"build_s": sum(b[0] for b in builds), "builds": builds}

    def tail(self) -> dict[str, Any]:
        """After the stream (and ``engine.wait_for_builds``): the builds no row recorded, and the
        request they came after. The next chunk's ``resume`` carries them into its first row."""
        return {"after": self.last_id, "builds": self._take_builds()}

    def resume(self, done: list[tuple[BenchRequest, dict[str, Any]]], tail: dict[str, Any] | None = None) -> None:
        """Restore the admission estimates a process that served ``done`` (this method's read-back
        rows with their requests, in stream order) had reached, so the next chunk of a stream decides
        as one continuous run would (``Admission.replay``). Groups, examples and entries are in the
        store already. ``tail`` is the previous chunk's ``tail()``: its builds are replayed only if no
        row was recorded after it (else that row holds them), and are carried into the next row."""
        rows = [row for _, row in done]
        events: list[tuple[Any, ...]] = []
        for row in rows:
            detail = row.get("detail") or {}
            if "builds" in detail:
                events += [("build", float(s), bool(ok)) for s, ok in detail["builds"]]
            elif detail.get("build_s"):  # a row written before builds were recorded one by one: their
                events.append(("build", float(detail["build_s"]), True))  # sum, as one build, taken as ok
            route, timings = detail.get("route"), detail.get("timings") or {}
            if route in ("hit", "miss", "fallback") and detail.get("group"):
                # The same seconds the engine observed: the stages' timings, without total_s.
                events.append(("request", "default", detail["group"], route, request_cost(timings)))
        carried = tail["builds"] if tail and rows and tail.get("after") == str(rows[-1]["id"]) else []
        events += [("build", float(s), bool(ok)) for s, ok in carried]
        self.engine.admission.replay(events)
        with self._lock:
            self._builds = [list(b) for b in carried] + self._builds
        if rows:
            self.last_id = str(rows[-1]["id"])

    def solve(self, r: BenchRequest) -> Outcome:
        try:
            res = self.engine.solve(r.question, r.context, group=r.group if self.use_group_labels else None)
        except SolveError as exc:
            return Outcome(None, "error", detail={"error": str(exc), **self._build_detail()})
        finally:
            self.last_id = str(r.id)
        answer: Any = res.answer
        if r.kind == "action":
            answer = parse_action(answer) if isinstance(answer, str) else answer
        return Outcome(answer, "hit" if res.route == "hit" else "miss", res.tokens["target"], res.tokens["small"],
                       {"route": res.route, "group": res.group, "extraction": res.extraction,
                        "timings": res.timings, "fallback_reason": res.fallback_reason, **self._build_detail()})


class NoReuse:
    """The target writes every structured output in full (no reuse, no checks, no constrained decoding)."""

    name = "no-reuse"

    def __init__(self, target: ModelBackend, max_tokens: int) -> None:
        self.target, self.max_tokens = target, max_tokens

    def solve(self, r: BenchRequest) -> Outcome:
        from ..stepcache.cache import JSON_SYSTEM, MATH_SYSTEM

        system = JSON_SYSTEM if r.meta.get("task") == "json" else MATH_SYSTEM
        out = self.target.complete([Message("system", system), Message("user", r.question)],
                                   GenerationOptions(max_tokens=self.max_tokens))
        return Outcome(out.text, "miss", out.prompt_tokens + out.completion_tokens, detail={"route": "full"})


class NoReuseSolver(NoReuse):
    """No-reuse's full answer, then StepCache's checks and fallbacks without reuse or patches, so the
    deterministic solver is not what separates the two methods."""

    name = "no-reuse+solver"

    def __init__(self, target: ModelBackend, max_tokens: int, steps: Any) -> None:
        super().__init__(target, max_tokens)
        self.steps = steps  # a StepCache (its store is never written: nothing is recorded)

    def solve(self, r: BenchRequest) -> Outcome:
        full = super().solve(r)
        out = self.steps.check_or_fallback(r.question, full.answer)
        return Outcome(out.output, "miss", full.target_tokens + out.tokens,
                       detail={"route": "full", "verified": out.verified, "solver_fallback": out.solver_fallback,
                               "reason": out.reason, "repaired": bool(out.patched)})


class StepCacheMethod:
    name = "stepcache"

    def __init__(self, engine: MiniCache) -> None:
        self.engine = engine

    def solve(self, r: BenchRequest) -> Outcome:
        res = self.engine.solve(r.question, mode="step")
        return Outcome(res.output, "hit" if res.route == "step-reuse" else "miss", res.tokens["target"],
                       detail={"route": res.route, "reason": res.fallback_reason, "verified": res.verified,
                               "solver_fallback": res.solver_fallback, "reused_from": res.reused_from,
                               "timings": res.timings})


METHOD_NAMES = ("direct", "pot", "pot-spec", "exact", "gptcache-like", "gencache-like", "minicache", "no-reuse",
                "no-reuse+solver", "stepcache")
# Earlier names of the re-implemented baselines: accepted everywhere a method is named (--methods,
# --subset, rows and results.json written before the rename) and read as the current name.
ALIASES = {"gptcache": "gptcache-like", "gencache": "gencache-like"}
METHODS = METHOD_NAMES + tuple(ALIASES)  # every spelling a caller may pass


def canonical(name: str) -> str:
    """The current name of a method (its alias resolved); other names, e.g. pad tags, pass through."""
    return ALIASES.get(name, name)


def build_method(name: str, target: ModelBackend, small: ModelBackend, sandbox: SandboxPool, embedder: Embedder,
                 store_path: str, use_group_labels: bool = False, background_builds: bool = True,
                 admission: AdmissionConfig | None = None) -> Method:
    """``admission``: minicache's build admission (default: ``AdmissionConfig()``, as in serving)."""
    name = canonical(name)
    pot = PoT(target, sandbox)
    if name == "direct":
        return Direct(target)
    if name == "pot":
        return pot
    if name == "pot-spec":
        return PoT(target, sandbox, draft="small")
    if name == "exact":
        return Exact(pot)
    if name == "gptcache-like":
        return GPTCacheLike(pot, embedder)
    if name == "gencache-like":
        return GenCacheLike(pot, target, sandbox, embedder)
    if name == "minicache":
        # No audits unless asked for (MINICACHE_AUDIT_RATE): they would add target calls to the stream.
        # Builds run in the background as in serving, while the stream continues (issue 18).
        engine = MiniCache(target, small, store_path, embedder=embedder, sandbox=sandbox,
                           config=EngineConfig(background_builds=background_builds,
                                               audit_rate=float(os.environ.get("MINICACHE_AUDIT_RATE", "0")),
                                               admission=admission or AdmissionConfig()))
        return MiniCacheMethod(engine, use_group_labels)
    if name == "no-reuse":
        return NoReuse(target, EngineConfig().step.max_tokens)
    if name == "no-reuse+solver":
        from ..stepcache import StepCache
        from ..store import open_store

        config = EngineConfig().step
        return NoReuseSolver(target, config.max_tokens, StepCache(target, open_store(store_path), embedder, config))
    if name == "stepcache":
        return StepCacheMethod(MiniCache(target, small, store_path, embedder=embedder, sandbox=sandbox,
                                         config=EngineConfig(background_builds=False)))
    raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHOD_NAMES)}")


def timed(method: Method, r: BenchRequest) -> tuple[Outcome, float]:
    t = time.perf_counter()
    try:
        out = method.solve(r)
    except Exception as exc:  # noqa: BLE001 - a benchmark records failures instead of stopping
        out = Outcome(None, "error", detail={"error": f"{type(exc).__name__}: {exc}"})
    return out, time.perf_counter() - t


def dumps(value: Any) -> str:
    return json.dumps(value, default=str)
