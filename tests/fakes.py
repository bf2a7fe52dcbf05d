"""Test doubles for the engine: a hash embedder and a tiny two-domain "world" of fake models.

Nothing here loads weights or reaches the network:

* :class:`HashEmbedder` stands in for MiniLM: a bag of lowercase words hashed into 256 buckets.
  The router embeds a request's *skeleton* (numbers already masked as NUM/MONEY/PCT), so two
  requests of the same template wording embed identically (cosine 1.0) and requests of different
  domains share almost no words (cosine well under the 0.80 routing threshold).
* :class:`Domain` describes one computation (current ratio, simple interest): how its requests
  are worded, the parameterized program a good target writes for them, and the true answer.
* :class:`FakeTarget` / :class:`FakeSmall` are :class:`minicache.models.FakeBackend` subclasses
  that play the target (writes ``def solve(...)`` programs) and the small model (fills extraction
  templates as JSON). Both have a ``mode`` attribute tests switch to make them misbehave.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from minicache.errors import BackendError
from minicache.models import FakeBackend, GenerationOptions, Message

DIM = 256
_WORD = re.compile(r"[a-z]+")


def _bucket(word: str) -> int:
    # hashlib, not hash(): str hashes are salted per process and the tests must be deterministic.
    return int.from_bytes(hashlib.md5(word.encode("utf-8")).digest()[:4], "little") % DIM


class HashEmbedder:
    """Deterministic bag-of-words embedder: ``embed(texts) -> (n, 256) float32`` unit vectors."""

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            for word in words or ["<empty>"]:
                out[i, _bucket(word)] += 1.0
            out[i] /= np.linalg.norm(out[i])
        return out


def cosine(embedder: HashEmbedder, a: str, b: str) -> float:
    va, vb = embedder.embed([a, b])
    return float(va @ vb)


# ---------------------------------------------------------------------------------------------
# The world: two domains whose requests the fake models understand.


_NUM = re.compile(r"\d[\d,]*(?:\.\d+)?")


def numbers_in(text: str) -> list[int | float]:
    """The numbers written in ``text``, in order ("$45,000" -> 45000, "5%" -> 5)."""
    values: list[int | float] = []
    for raw in _NUM.findall(text):
        raw = raw.rstrip(",").replace(",", "")
        value = float(raw)
        values.append(int(value) if value.is_integer() and "." not in raw else value)
    return values


@dataclass(frozen=True)
class Domain:
    name: str
    keyword: str  # a phrase that identifies the domain in a request
    wording: str  # request text with {0}, {1}, ... for the values (already formatted)
    params: tuple[tuple[str, str], ...]  # (parameter name, comment)
    expression: str  # the program's return expression
    compute: Callable[..., float]

    def ask(self, *values: int | float) -> str:
        return self.wording.format(*[f"{v:,}" for v in values])

    def answer(self, *values: int | float) -> float:
        return self.compute(*values)

    def plain_program(self, values: list[int | float]) -> str:
        """What a target writes for plain PoT: the request's values assigned at the top of solve()."""
        lines = ["def solve():"]
        for (name, comment), value in zip(
            self.params, values, strict=False
        ):  # a request may hold fewer numbers
            lines.append(f"    {name} = {value!r}  # {comment}")
        lines.append(f"    return {self.expression}")
        return "\n".join(lines) + "\n"

    def program(self, values: list[int | float]) -> str:
        """The parameterized program (what a build's generalization writes)."""
        lines = ["def solve("]
        for (name, comment), value in zip(
            self.params, values, strict=False
        ):  # a request may hold fewer numbers
            lines.append(f"    {name}={value!r},  # {comment}")
        lines.append("):")
        lines.append(f"    return {self.expression}")
        return "\n".join(lines) + "\n"

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.params]


CURRENT_RATIO = Domain(
    name="current_ratio",
    keyword="current ratio",
    wording="What is the current ratio if current assets are ${0} and current liabilities are ${1}?",
    params=(
        ("current_assets", "current assets, dollars"),
        ("current_liabilities", "current liabilities, dollars"),
    ),
    expression="current_assets / current_liabilities",
    compute=lambda assets, liabilities: assets / liabilities,
)

SIMPLE_INTEREST = Domain(
    name="simple_interest",
    keyword="simple interest",
    wording="A loan of ${0} accrues simple interest at {1}% per year for {2} years. How much interest is owed?",
    params=(
        ("principal", "loan principal, dollars"),
        ("rate_pct", "annual interest rate, percent as written"),
        ("years", "loan term, years"),
    ),
    expression="principal * rate_pct / 100 * years",
    compute=lambda principal, rate, years: principal * rate / 100 * years,
)

DOMAINS = (CURRENT_RATIO, SIMPLE_INTEREST)

# Value sets that give distinct answers (so a wrong extraction is always noticed).
CR_VALUES = [
    (45000, 30000),
    (120000, 80000),
    (9000, 4000),
    (56000, 70000),
    (33000, 11000),
    (18000, 24000),
    (75000, 25000),
    (64000, 16000),
    (21000, 14000),
    (99000, 33000),
]
SI_VALUES = [(12000, 5, 3), (8000, 4, 2), (15000, 6, 5), (2500, 3, 4), (40000, 7, 10), (6000, 2, 6)]


def domain_of(text: str) -> Domain | None:
    lowered = text.lower()
    for domain in DOMAINS:
        if domain.keyword in lowered:
            return domain
    return None


def request_of(messages: list[Message]) -> str:
    """The request text in a miss-path prompt (see minicache.miss.prompts.plain_pot_messages)."""
    body = messages[1].content
    if "Request:\n" not in body:
        raise AssertionError(f"not a miss-path prompt: {body[:200]!r}")
    request = body.split("Request:\n", 1)[1]
    return request.split("\n\nDo not answer directly.", 1)[0]


def first_build_request(messages: list[Message]) -> str:
    """The first example's request in a build prompt (see minicache.programs.signature.build_messages)."""
    m = re.search(r"Example 1:\nRequest: (.*)\n", messages[1].content)
    if not m:
        raise AssertionError("build prompt without examples")
    return m.group(1)


BROKEN_PROGRAM = "def solve(x=1,  # a number\n):\n    return x / 0\n"


# ---------------------------------------------------------------------------------------------
# The fake models


class FakeTarget(FakeBackend):
    """Writes the correct plain PoT program for a miss-path request (its numbers assigned to names).

    ``mode`` (miss path): "ok" | "parameterized" (a ``def solve(x=...)`` with the request's values as
    defaults) | "broken" (program raises) | "broken_once" (first attempt of each request raises, the
    retry is fine) | "constant" (a correct answer returned as one number, so nothing to lift) |
    "other" (the sum of the request's numbers: as if it asked for another computation) |
    "raise" (BackendError).
    ``build_mode`` (generalization calls from a build): "ok" | "broken" | "raise" | "no_defaults"
    (the parameterized program with no default values, as the 1.5B model often writes it).
    """

    def __init__(self, mode: str = "ok", build_mode: str = "ok") -> None:
        super().__init__(self._reply, name="fake-target")
        self.mode = mode
        self.build_mode = build_mode
        self.miss_calls = 0
        self.build_calls = 0

    def _reply(self, messages: list[Message], options: GenerationOptions) -> Any:
        if "Request:\n" in messages[1].content:
            self.miss_calls += 1
            return self._miss(messages)
        self.build_calls += 1
        return self._build(messages)

    def _miss(self, messages: list[Message]) -> Any:
        if self.mode == "raise":
            return BackendError("fake target is down")
        question = request_of(messages)
        domain = domain_of(question)
        if domain is None:
            return "I don't know how to solve that."
        values = numbers_in(question)[: len(domain.params)]
        if self.mode == "broken" or (self.mode == "broken_once" and len(messages) == 2):
            return f"```python\n{BROKEN_PROGRAM}```"
        if self.mode == "constant":
            return f"```python\ndef solve():\n    return {domain.answer(*values)!r}\n```"
        if self.mode == "other":
            return f"```python\ndef solve():\n    return {float(sum(values))!r}\n```"
        if self.mode == "parameterized":
            return f"Here is the program.\n```python\n{domain.program(values)}```\n"
        return f"Here is the program.\n```python\n{domain.plain_program(values)}```\n"

    def _build(self, messages: list[Message]) -> Any:
        if self.build_mode == "raise":
            return BackendError("fake target is down (build)")
        if self.build_mode == "broken":
            return f"```python\n{BROKEN_PROGRAM}```"
        question = first_build_request(messages)
        domain = domain_of(question)
        assert domain is not None, question
        program = domain.program(numbers_in(question)[: len(domain.params)])
        if self.build_mode == "no_defaults":
            program = re.sub(r"=[^,]+,", ",", program)
        return f"```python\n{program}```"


# The computations a SamplingTarget's samples write, as expressions over a domain's own expression.
SAMPLED_COMPUTATIONS = {"A": "{0}", "B": "-({0})", "C": "({0}) * ({0})"}


class SamplingTarget(FakeTarget):
    """A :class:`FakeTarget` whose sampled miss-prompt calls (temperature above zero: a build's
    self-consistency, minicache.build.consistency) write, for each request in turn, the computations
    of ``script``: "A" the domain's own, "B" its negation, "C" its square (plain PoT programs with the
    request's values assigned at the top). Greedy calls are FakeTarget's; ``sample_calls`` counts the
    sampled ones."""

    def __init__(self, script: tuple[str, ...] = ("A", "A", "B"), **modes: str) -> None:
        super().__init__(**modes)
        self.script = script
        self.sample_calls = 0
        self._drawn: dict[str, int] = {}

    def _reply(self, messages: list[Message], options: GenerationOptions) -> Any:
        if options.temperature <= 0 or "Request:\n" not in messages[1].content:
            return super()._reply(messages, options)
        question = request_of(messages)
        domain = domain_of(question)
        assert domain is not None, question
        drawn = self._drawn.get(question, 0)
        self._drawn[question] = drawn + 1
        self.sample_calls += 1
        expression = SAMPLED_COMPUTATIONS[self.script[drawn % len(self.script)]]
        written = replace(domain, expression=expression.format(domain.expression))
        return f"```python\n{written.plain_program(numbers_in(question)[: len(domain.params)])}```"


class FakeSmall(FakeBackend):
    """Fills an extraction template: the request's numbers, in order, to the variables, in order.

    The variables come from ``options.json_schema["properties"]`` (as the engine sends them); with
    candidate choice each has an ``enum`` of the numbers in the request, and a good answer is one
    of them. ``mode``: "ok" | "wrong" (every variable gets the request's first number) |
    "invalid_json" | "raise" (BackendError) | "missing" (leaves a variable out) | "not_object" |
    "string" (numbers as text).
    """

    def __init__(self, mode: str = "ok") -> None:
        super().__init__(self._reply, name="fake-small")
        self.mode = mode

    def _reply(self, messages: list[Message], options: GenerationOptions) -> Any:
        schema = options.json_schema
        assert schema is not None, "extraction calls are schema-constrained"
        assert messages[0].role == "system" and "Variables:" in messages[0].content
        props: dict[str, Any] = schema["properties"]
        names = list(props)
        for name in names:
            assert f"- {name} (" in messages[0].content, "the prompt lists every variable"
        if self.mode == "raise":
            return BackendError("fake small model failed")
        if self.mode == "invalid_json":
            return "{current_assets: forty-five thousand"
        if self.mode == "not_object":
            return "[1, 2, 3]"
        text = messages[1].content
        found = numbers_in(text)
        if self.mode == "wrong":
            values = [found[0]] * len(names)
        else:
            values = (found + [0] * len(names))[: len(names)]
        out: dict[str, Any] = {}
        for name, value in zip(names, values, strict=True):
            enum = props[name].get("enum")
            if enum is not None and self.mode in ("ok", "wrong") and value not in enum:
                # Only a second choice takes a number of the request out of a variable's choices
                # (minicache.hit.verify); a grammar-constrained model then writes one of the others.
                assert len(enum) < len(set(found)), (
                    f"{value!r} is not among the candidates {enum!r}"
                )
                value = enum[0]
            out[name] = str(value) if self.mode == "string" else value
        if self.mode == "missing":
            out.pop(names[-1])
        return out


def spy_on_admission(engine: Any) -> list[dict[str, int]]:
    """Record the arguments of every admission decision the engine asks for (its ``first_misses``
    and ``failures``), passing each on to the real :meth:`Admission.admits`."""
    told: list[dict[str, int]] = []
    admits = engine.admission.admits

    def spy(
        tenant: str, n: int, first_misses: int = 0, failures: int = 0, samples: int = 0
    ) -> tuple[bool, dict[str, float]]:
        told.append({"first_misses": first_misses, "failures": failures})
        return admits(tenant, n, first_misses, failures, samples)

    engine.admission.admits = spy
    return told


# A tiny vocabulary and tokenizer for tests of object decoding (minicache.models.choice) and of the
# small model's choice, which a scripted model answers token by token.
VOCAB = [
    '{"',
    "a",
    "b",
    '":',
    " ",
    "1",
    "2",
    "5",
    "0",
    ".",
    ",",
    ' "',
    "}",
    '"x"',
    '"y"',
    '"',
    "red",
    " shoes",
    '",',
    "\\n",
    "k",
]


def tokenize(text: str) -> list[int]:
    """Greedy longest-match over VOCAB (a stand-in for a BPE tokenizer)."""
    out, i = [], 0
    while i < len(text):
        match = max((t for t in VOCAB if text.startswith(t, i)), key=len)
        out.append(VOCAB.index(match))
        i += len(match)
    return out


@contextmanager
def guarded_server(tmp_path: Path, sandbox: Any, config: Any) -> Iterator[Any]:
    """A real uvicorn server, as ``minicache serve`` runs it (the guarded protocol and its
    connection bounds), in front of an engine on the fake models: for the tests of what the server
    does with connections, keys and forwarded addresses before the engine is asked anything."""
    from minicache.engine import EngineConfig, MiniCache
    from minicache.server import create_app
    from minicache.server.connections import uvicorn_options
    from minicache.server.testing import BackgroundServer
    from minicache.store import SQLiteStore

    engine = MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=SQLiteStore(tmp_path / "guarded.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False),
    )
    try:
        with BackgroundServer(create_app(engine, config), **uvicorn_options(config)) as server:
            yield server
    finally:
        engine.close()


# What a target's own answers look like in the pass-through tests: a chat reply, a tool call, and the
# tool it was offered (OpenAI's format).
GREETING = "Hello! How can I help you today?"
WEATHER_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


class FakeOpenAIServer:
    """An OpenAI-compatible target on a loopback port (a real HTTP server, one thread per request):
    ``POST /v1/completions`` answers ``text`` whole, or streamed one SSE event per word when the
    body asks, its last word held until :attr:`release` is set (at once unless ``gated``), then the
    finish and the usage when asked for. Each body it was sent is kept in :attr:`bodies`."""

    def __init__(self, text: str = GREETING, gated: bool = False) -> None:
        self.words = re.findall(r"\s*\S+\s*", text)
        self.bodies: list[dict[str, Any]] = []
        self.release = threading.Event()
        if not gated:
            self.release.set()
        self.last_sent_at = 0.0
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._http.server_port}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    def _events(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        base = {
            "id": "cmpl-stub",
            "object": "text_completion",
            "created": 0,
            "model": body["model"],
        }

        def chunk(text: str, finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
            return {**base, "choices": [choice]}

        for i, word in enumerate(self.words):
            if i == len(self.words) - 1:
                self.release.wait(10)
                self.last_sent_at = time.perf_counter()
            yield chunk(word)
        yield chunk("", "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            yield {**base, "choices": [], "usage": self.usage(body)}

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        prompt, completion = len(str(body.get("prompt") or "").split()), len(self.words)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _handler(self) -> Any:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.bodies.append(body)
                if self.path != "/v1/completions":
                    self.send_error(404)
                    return
                self.send_response(200)
                if not body.get("stream"):
                    choice = {"index": 0, "text": "".join(stub.words), "finish_reason": "stop"}
                    whole = {"id": "cmpl-stub", "object": "text_completion", "choices": [choice]}
                    payload = json.dumps({**whole, "usage": stub.usage(body)}).encode()
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
                for event in stub._events(body):
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

            def log_message(self, *args: Any) -> None:
                pass

        return Handler
