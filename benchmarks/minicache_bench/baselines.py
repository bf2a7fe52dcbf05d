"""The baselines ``minicache bench`` compares MiniCache with, and what every method returns.

``direct`` and ``pot`` ask the target for every request; ``exact``, ``gptcache-like`` and
``gencache-like`` put a cache in front of pot as those systems document it (see
:mod:`minicache_bench.methods` for the list of every method and how they are built).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from minicache.engine import check_answer
from minicache.errors import ProgramError
from minicache.miss.prompts import plain_pot_messages
from minicache.models.base import GenerationOptions, Message, ModelBackend
from minicache.programs.signature import answers_match
from minicache.programs.text import extract_code
from minicache.route.router import Embedder
from minicache.sandbox import SandboxError, SandboxPool
from minicache_bench.data import BenchRequest, parse_action


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
        system = (
            "Answer with the final result only: a JSON object for actions, otherwise one number "
            "with no units or words."
        )
        out = self.target.complete(
            [Message("system", system), Message("user", _prompt_text(r))],
            GenerationOptions(max_tokens=96),
        )
        answer: Any = parse_action(out.text) if r.kind == "action" else _first_number(out.text)
        return Outcome(answer, "miss", out.prompt_tokens + out.completion_tokens)


class PoT:
    name = "pot"

    def __init__(
        self, target: ModelBackend, sandbox: SandboxPool, draft: str | None = None
    ) -> None:
        self.target, self.sandbox, self.draft = target, sandbox, draft
        if draft:
            self.name = "pot-spec"

    def program(self, r: BenchRequest) -> tuple[str, int]:
        out = self.target.complete(
            plain_pot_messages(r.question, r.context),
            GenerationOptions(max_tokens=640, draft=self.draft),  # type: ignore[arg-type]
        )
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

    def resume(
        self, done: list[tuple[BenchRequest, dict[str, Any]]], tail: dict[str, Any] | None = None
    ) -> None:
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

    def resume(
        self, done: list[tuple[BenchRequest, dict[str, Any]]], tail: dict[str, Any] | None = None
    ) -> None:
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
                    return Outcome(
                        self.answers[best], "hit", detail={"similarity": float(sims[best])}
                    )
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

    def __init__(
        self,
        pot: PoT,
        target: ModelBackend,
        sandbox: SandboxPool,
        embedder: Embedder,
        t_p: float = 0.8,
        t_r: float = 0.75,
        nu: int = 4,
        gamma: float = 0.5,
        attempts: int = 2,
    ) -> None:
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
            similar = (
                max((float(v @ rvec) for v in cluster["responses"]), default=1.0)
                if cluster
                else 1.0
            )
            if cluster is None or similar < self.t_r:
                cluster = {
                    "centroid": vec,
                    "examples": [],
                    "responses": [],
                    "program": None,
                    "failed": 0,
                }
                self.clusters.append(cluster)
            cluster["examples"].append((text, answer))
            cluster["responses"].append(rvec)
            ready = (
                len(cluster["examples"]) >= self.nu
                and not cluster["program"]
                and cluster["failed"] < self.attempts
            )
            examples = list(cluster["examples"][-self.nu :])
        if ready:
            built, build = self._build(cluster, examples)
            return Outcome(answer, "miss", tokens + built, detail={"build": build})
        return Outcome(answer, "miss", tokens)

    def _build(
        self, cluster: dict[str, Any], examples: list[tuple[str, Any]]
    ) -> tuple[int, dict[str, Any]]:
        """Ask the target for an extractor and program; returns its tokens and how the check went
        (recorded on the request row, so a report can say why a cluster never got hits)."""
        shown = "\n\n".join(
            f"Example {i}:\n{t[-1500:]}\nAnswer: {a}" for i, (t, a) in enumerate(examples, 1)
        )
        out = self.target.complete(
            [Message("system", GENCACHE_SYSTEM), Message("user", shown)],
            GenerationOptions(max_tokens=700),
        )
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


def timed(method: Method, r: BenchRequest) -> tuple[Outcome, float]:
    t = time.perf_counter()
    try:
        out = method.solve(r)
    except Exception as exc:  # noqa: BLE001 - a benchmark records failures instead of stopping
        out = Outcome(None, "error", detail={"error": f"{type(exc).__name__}: {exc}"})
    return out, time.perf_counter() - t
