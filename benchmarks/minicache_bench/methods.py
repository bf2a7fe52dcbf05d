"""The methods ``minicache bench`` compares. Each turns a request into an answer and says what it cost.

* ``direct``   - the target answers directly (no program).
* ``pot``      - the target writes a plain program (``def solve()``, no parameters) for every request,
  run in the sandbox (the main baseline; MiniCache's misses send the same prompt, then lift the
  program into a parameterized one when they build).
* ``pot-spec`` - pot with the small model drafting for the target (speculative decoding).
* ``exact``    - an exact-prompt cache in front of pot.
* ``gptcache`` - the real GPTCache library (its put/get API over ``init_similar_cache``: SQLite and
  faiss, its default evaluation and threshold) with the same MiniLM embedder (minicache_bench.gptcache_method).
* ``gptcache-like`` - GPTCache's documented behaviour, re-implemented here before the library was
  measured beside it (its OpenAI adapter breaks on openai>=1): MiniLM embedding of the whole
  prompt, a cached answer is returned when cosine similarity >= 0.95, else pot and store.
* ``gencache-like`` - GenCache (arXiv 2511.17565) as its paper describes it, re-implemented here:
  requests are clustered by prompt similarity (T_p = 0.8) and response similarity (T_r = 0.75); once
  a cluster has nu = 4 examples the target writes a regex extractor plus a program for it, accepted
  if gamma = 50% of the cluster's examples are reproduced; no small model.
  Both were named ``gptcache`` and ``gencache`` before. ``gencache`` stays accepted (``ALIASES``);
  ``gptcache`` now names the library, and rows and results written under it by the re-implementation
  are read back as ``gptcache-like`` (``row_method``, ``LEGACY_ALIASES``).
* ``minicache`` - this project's engine.
* ``no-reuse``  - structured-output requests (``stepcache-micro``): the target writes the whole output
  for every request from the same system prompt StepCache generates with (StepCache's baseline).
* ``no-reuse+solver`` - no-reuse's full answer, checked like StepCache's and given the same fallbacks
  (the deterministic solver for equations, the record-constrained repair for JSON): the fair baseline.
* ``stepcache`` - the engine with ``mode="step"``: step-level reuse, checks, selective patching.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from minicache.build.admission import observed_route, request_cost
from minicache.config.engine import AdmissionConfig
from minicache.engine import EngineConfig, MiniCache, SolveError
from minicache.models.base import GenerationOptions, Message, ModelBackend
from minicache.route.embedding import shared_embedder
from minicache.route.router import Embedder, LazyMiniLM
from minicache.sandbox import SandboxPool
from minicache_bench.baselines import (
    Direct,
    Exact,
    GenCacheLike,
    GPTCacheLike,
    Method,
    Outcome,
    PoT,
)
from minicache_bench.data import BenchRequest, parse_action
from minicache_bench.engine_options import minicache_config


def _outcome(ok: Any) -> bool | None:
    """A row's build outcome as admission takes it: None (an early build that made no entry) stays None."""
    return None if ok is None else bool(ok)


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

    def _built(self, seconds: float, ok: bool | None) -> None:
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

    def resume(
        self, done: list[tuple[BenchRequest, dict[str, Any]]], tail: dict[str, Any] | None = None
    ) -> None:
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
                events += [("build", float(s), _outcome(ok)) for s, ok in detail["builds"]]
            elif detail.get(
                "build_s"
            ):  # a row written before builds were recorded one by one: their
                events.append(
                    ("build", float(detail["build_s"]), True)
                )  # sum, as one build, taken as ok
            route = observed_route(detail.get("route"), detail.get("fallback_reason"))
            timings = detail.get("timings") or {}
            if route in ("hit", "miss", "fallback") and detail.get("group"):
                # The same seconds the engine observed: the stages' timings, without total_s.
                events.append(("request", "default", detail["group"], route, request_cost(timings)))
        carried = (
            tail["builds"] if tail and rows and tail.get("after") == str(rows[-1]["id"]) else []
        )
        events += [("build", float(s), _outcome(ok)) for s, ok in carried]
        self.engine.admission.replay(events)
        with self._lock:
            self._builds = [list(b) for b in carried] + self._builds
        if rows:
            self.last_id = str(rows[-1]["id"])

    def solve(self, r: BenchRequest) -> Outcome:
        try:
            res = self.engine.solve(
                r.question, r.context, group=r.group if self.use_group_labels else None
            )
        except SolveError as exc:
            return Outcome(
                None,
                "error",
                detail={
                    "error": str(exc),
                    "fallback_reason": exc.fallback_reason,
                    **self._build_detail(),
                },
            )
        finally:
            self.last_id = str(r.id)
        answer: Any = res.answer
        if r.kind == "action":
            answer = parse_action(answer) if isinstance(answer, str) else answer
        return Outcome(
            answer,
            "hit" if res.route == "hit" else "miss",
            res.tokens["target"],
            res.tokens["small"],
            {
                "route": res.route,
                "group": res.group,
                "entry_id": res.entry_id,  # the entry version that served a hit (tools.reverify)
                "extraction": res.extraction,
                "variables": res.variables,
                "pinned": res.pinned,
                "timings": res.timings,
                "lock_wait_s": res.lock_wait_s,
                "fallback_reason": res.fallback_reason,
                "cached_prompt_tokens": res.tokens.get("target_cached", 0),
                **self._build_detail(),
            },
        )


class NoReuse:
    """The target writes every structured output in full (no reuse, no checks, no constrained decoding)."""

    name = "no-reuse"

    def __init__(self, target: ModelBackend, max_tokens: int) -> None:
        self.target, self.max_tokens = target, max_tokens

    def solve(self, r: BenchRequest) -> Outcome:
        from minicache.stepcache.cache import JSON_SYSTEM, MATH_SYSTEM

        system = JSON_SYSTEM if r.meta.get("task") == "json" else MATH_SYSTEM
        out = self.target.complete(
            [Message("system", system), Message("user", r.question)],
            GenerationOptions(max_tokens=self.max_tokens),
        )
        return Outcome(
            out.text, "miss", out.prompt_tokens + out.completion_tokens, detail={"route": "full"}
        )


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
        return Outcome(
            out.output,
            "miss",
            full.target_tokens + out.tokens,
            detail={
                "route": "full",
                "verified": out.verified,
                "solver_fallback": out.solver_fallback,
                "reason": out.reason,
                "repaired": bool(out.patched),
            },
        )


class StepCacheMethod:
    name = "stepcache"

    def __init__(self, engine: MiniCache) -> None:
        self.engine = engine

    def solve(self, r: BenchRequest) -> Outcome:
        res = self.engine.solve(r.question, mode="step")
        return Outcome(
            res.output,
            "hit" if res.route == "step-reuse" else "miss",
            res.tokens["target"],
            detail={
                "route": res.route,
                "reason": res.fallback_reason,
                "verified": res.verified,
                "solver_fallback": res.solver_fallback,
                "reused_from": res.reused_from,
                "timings": res.timings,
            },
        )


METHOD_NAMES = (
    "direct",
    "pot",
    "pot-spec",
    "exact",
    "gptcache",
    "gptcache-like",
    "gencache-like",
    "minicache",
    "no-reuse",
    "no-reuse+solver",
    "stepcache",
)
# Earlier names of the re-implemented baselines: accepted everywhere a method is named (--methods,
# --subset, rows and results.json written before the rename) and read as the current name.
ALIASES = {"gencache": "gencache-like"}
METHODS = METHOD_NAMES + tuple(ALIASES)  # every spelling a caller may pass
# Before the real library was a method, "gptcache" named the re-implementation. results.json files
# from RESULTS_FORMAT on (config.format) use the current names; older ones are read through these.
LEGACY_ALIASES = {"gptcache": "gptcache-like", **ALIASES}
RESULTS_FORMAT = 2


def canonical(name: str) -> str:
    """The current name of a method (its alias resolved); other names, e.g. pad tags, pass through."""
    return ALIASES.get(name, name)


def legacy_name(name: str) -> str:
    """The current name of a method named in a results.json written before RESULTS_FORMAT."""
    return LEGACY_ALIASES.get(name, name)


def row_method(row: dict[str, Any]) -> str:
    """A requests.jsonl row's method under its current name: a ``gptcache`` row that does not name
    the library in its detail was written by the re-implementation (``gptcache-like``)."""
    name = str(row["method"])
    if name == "gptcache" and not (row.get("detail") or {}).get("library"):
        return "gptcache-like"
    return canonical(name)


def build_method(
    name: str,
    target: ModelBackend,
    small: ModelBackend,
    sandbox: SandboxPool,
    embedder: Embedder | None,
    store_path: str,
    use_group_labels: bool = False,
    background_builds: bool = True,
    admission: AdmissionConfig | None = None,
    engine_options: Sequence[str] = (),
) -> Method:
    """``admission``: minicache's build admission (default: ``AdmissionConfig()``, as in serving).
    ``engine_options``: ``KEY=VALUE`` engine options over minicache's own settings
    (``minicache_bench.engine_options``; a key they set overrides ``background_builds`` or ``admission``).
    ``embedder`` (a test's fake) replaces every method's; None gives minicache its configured
    routing embedder and the baselines and StepCache the MiniLM sentence embedding they were
    written for (GPTCache and GenCache compare sentence embeddings)."""
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
    if name == "gptcache":
        from minicache_bench.gptcache_method import GPTCache

        # Beside the other methods' stores, and like them untracked in results folders (*.db*).
        data_dir = None if store_path == ":memory:" else store_path + "-data"
        return GPTCache(pot, embedder or shared_embedder(), data_dir)
    if name == "gptcache-like":
        return GPTCacheLike(pot, embedder or shared_embedder())
    if name == "gencache-like":
        return GenCacheLike(pot, target, sandbox, embedder or shared_embedder())
    if name == "minicache":
        # Builds run in the background as in serving, while the stream continues; no audits
        # unless MINICACHE_AUDIT_RATE asks for them (minicache_config).
        config = minicache_config(
            engine_options, background_builds=background_builds, admission=admission
        )
        engine = MiniCache(
            target, small, store_path, embedder=embedder, sandbox=sandbox, config=config
        )
        return MiniCacheMethod(engine, use_group_labels)
    if name == "no-reuse":
        return NoReuse(target, EngineConfig().step.max_tokens)
    if name == "no-reuse+solver":
        from minicache.stepcache import StepCache
        from minicache.store import open_store

        config = EngineConfig().step
        steps = StepCache(target, open_store(store_path), embedder or LazyMiniLM(), config)
        return NoReuseSolver(target, config.max_tokens, steps)
    if name == "stepcache":
        return StepCacheMethod(
            MiniCache(
                target,
                small,
                store_path,
                embedder=embedder,
                sandbox=sandbox,
                config=EngineConfig(background_builds=False),
            )
        )
    raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHOD_NAMES)}")
