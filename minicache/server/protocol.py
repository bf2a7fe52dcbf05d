"""The wire formats as pydantic models: what a request body may hold, checked before the engine runs.

These models are the single description of the API's inputs: FastAPI validates bodies and query
parameters with them, and ``/openapi.json`` is generated from them. Every rejection they make is a
400 with an OpenAI-style body (see :mod:`.errors`); a custom error type (``PydanticCustomError``)
becomes the error's ``code``. Numbers and flags are strict (``temperature: "hot"``, ``n: true``
are type errors, as in the OpenAI API); only the cache flags also take the strings HTTP headers and
OpenAI's string-valued ``metadata`` can carry ("1", "true", "off", ...).
"""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

MAX_LABEL_CHARS = 200
FLAG_NAMES = ("no_cache", "no_store", "force_refresh")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def check_label(value: str) -> str:
    """A name that is stored and typed back later (tenant, group, entry id): visible text only.

    Blank names, surrounding spaces and control characters (NUL above all: PostgreSQL refuses it)
    would make tenants and groups that no one can name again."""
    if not value or value != value.strip():
        raise PydanticCustomError(
            "invalid_value", "must be non-empty, without leading or trailing spaces"
        )
    if len(value) > MAX_LABEL_CHARS:
        raise PydanticCustomError(
            "invalid_value", "must be at most {limit} characters", {"limit": MAX_LABEL_CHARS}
        )
    if any(unicodedata.category(c) in ("Cc", "Cs", "Cn", "Zl", "Zp") for c in value):
        raise PydanticCustomError("invalid_value", "must not contain control characters")
    return value


Label = Annotated[str, Field(min_length=1, max_length=MAX_LABEL_CHARS), AfterValidator(check_label)]


def _flag(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise PydanticCustomError(
        "invalid_type",
        "must be a boolean (true/false, 1/0), not {value}",
        {"value": repr(value)[:40]},
    )


Flag = Annotated[bool, BeforeValidator(_flag)]


def _mode(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in ("auto", "program", "step"):
        return value.strip().lower()
    raise PydanticCustomError(
        "invalid_value", "must be auto, program or step, not {value}", {"value": repr(value)[:40]}
    )


Mode = Annotated[Literal["auto", "program", "step"], BeforeValidator(_mode)]


class CacheControls(BaseModel):
    """MiniCache's per-request switches: the ``minicache`` object of a chat body (also accepted as
    ``metadata.minicache_<name>`` and ``X-MiniCache-<Name>`` headers, in that order of precedence)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    group: Label | None = Field(
        default=None, description="Route to this named group instead of by similarity."
    )
    mode: Mode | None = Field(
        default=None, description="auto (default) | program | step (StepCache)."
    )
    no_cache: Flag | None = Field(default=None, description="Skip the cache lookup.")
    no_store: Flag | None = Field(default=None, description="Record nothing for this request.")
    force_refresh: Flag | None = Field(
        default=None, description="Recompute with the target and record the result."
    )

    def merged(self, *lower: CacheControls) -> CacheControls:
        """These controls, with unset fields taken from ``lower`` (highest precedence first)."""
        values = self.model_dump(exclude_none=True)
        for other in lower:
            for name, value in other.model_dump(exclude_none=True).items():
                values.setdefault(name, value)
        return CacheControls(**values)

    def engine_kwargs(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "mode": self.mode or "auto",
            **{name: bool(getattr(self, name)) for name in FLAG_NAMES},
        }


def controls_from_headers(headers: Any) -> CacheControls:
    """``X-MiniCache-Group``, ``-Mode``, ``-No-Cache``, ``-No-Store``, ``-Force-Refresh`` (an invalid
    value is reported under the header's name)."""
    names = {name: "x-minicache-" + name.replace("_", "-") for name in CacheControls.model_fields}
    found = {name: headers[header] for name, header in names.items() if header in headers}
    # HTTP's own way to say "record nothing", honoured as X-MiniCache-No-Store: 1
    if "no-store" in str(headers.get("cache-control", "")).lower():
        found.setdefault("no_store", "1")
    try:
        return CacheControls.model_validate(found)
    except ValidationError as exc:
        raise ValidationError.from_exception_data(
            "headers",
            [
                {
                    "type": PydanticCustomError(e["type"], e["msg"]),
                    "loc": (names.get(str(e["loc"][0]), "headers"),),
                    "input": e["input"],
                }
                for e in exc.errors()
            ],
        ) from None


def controls_from_metadata(metadata: dict[str, Any] | None) -> CacheControls:
    if not metadata:
        return CacheControls()
    return CacheControls.model_validate(
        {
            name: metadata[f"minicache_{name}"]
            for name in CacheControls.model_fields
            if metadata.get(f"minicache_{name}") is not None
        }
    )


# -- chat completions -------------------------------------------------------------------------------


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    type: Literal["text"]
    text: str


class OtherPart(BaseModel):
    """An image, audio or file part: not a computation the cache serves (the request passes
    through to the target)."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str


def _part(value: Any) -> Any:
    if isinstance(value, dict) and value.get("type") != "text":
        return OtherPart.model_validate(value)
    return value


Part = Annotated[TextPart | OtherPart | str, BeforeValidator(_part)]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: list[Part] | str | None = None
    name: str | None = Field(default=None, max_length=256)

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(
            p if isinstance(p, str) else p.text
            for p in self.content
            if not isinstance(p, OtherPart)
        )

    def has_other_parts(self) -> bool:
        return isinstance(self.content, list) and any(
            isinstance(p, OtherPart) for p in self.content
        )


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    include_usage: Flag = False


MetadataValue = Annotated[str | bool | int | float | None, Field(union_mode="left_to_right")]


class ChatCompletionRequest(BaseModel):
    """The OpenAI chat completion request. The last user message is the question; the messages before
    it are its context. Sampling parameters are checked as OpenAI checks them and otherwise unused:
    MiniCache's answer is computed, not sampled. What asks for more than one computed answer
    (``tools``, ``response_format``, ``n > 1``, ``logprobs``) passes the request through to the
    target (:mod:`.passthrough`), which also reads the fields MiniCache does not know."""

    model_config = ConfigDict(extra="ignore", strict=True)

    messages: list[ChatMessage] = Field(min_length=1)
    model: str | None = Field(default=None, max_length=256)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: StrictInt | None = Field(default=None, ge=1, le=128)
    temperature: StrictFloat | StrictInt | None = Field(default=None, ge=0, le=2)
    top_p: StrictFloat | StrictInt | None = Field(default=None, ge=0, le=1)
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    max_completion_tokens: StrictInt | None = Field(default=None, ge=1)
    presence_penalty: StrictFloat | StrictInt | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: StrictFloat | StrictInt | None = Field(default=None, ge=-2, le=2)
    seed: StrictInt | None = None
    stop: str | list[str] | None = None
    user: str | None = Field(default=None, max_length=256)
    metadata: dict[str, MetadataValue] | None = Field(default=None, max_length=64)
    minicache: CacheControls | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    response_format: dict[str, Any] | None = None
    logprobs: bool | None = None

    @model_validator(mode="after")
    def _has_a_question(self) -> ChatCompletionRequest:
        if not any(m.role == "user" for m in self.messages):
            raise PydanticCustomError(
                "missing_user_message", "messages must contain a user message (the question)"
            )
        return self

    def question_and_context(self) -> tuple[str, str | None]:
        texts = [m.text() for m in self.messages]
        at = max(i for i, m in enumerate(self.messages) if m.role == "user")
        return texts[at], "\n\n".join(t for t in texts[:at] if t.strip()) or None

    def controls(self, headers: Any) -> CacheControls:
        return (self.minicache or CacheControls()).merged(
            controls_from_metadata(self.metadata), controls_from_headers(headers)
        )


class CompletionRequest(BaseModel):
    """The legacy ``/v1/completions`` request: always forwarded to the target (a prompt to continue
    is not a question to compute), its other fields passed on as they came."""

    model_config = ConfigDict(extra="allow", strict=True)

    prompt: str | list[str]
    model: str | None = Field(default=None, max_length=256)
    stream: bool | None = False
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    minicache: CacheControls | None = None


# -- native API --------------------------------------------------------------------------------------


class SolveRequest(BaseModel):
    """``POST /v1/solve``: a question, an optional context (text, or JSON that is serialized as text),
    and the cache controls as top-level fields or a ``minicache`` object."""

    model_config = ConfigDict(extra="forbid", strict=True)

    question: Any = Field(
        description="The request text (the engine checks it: non-empty, bounded, no NUL)."
    )
    context: Any = Field(
        default=None, description="A table or document the question is about (text or JSON)."
    )
    group: Label | None = None
    mode: Mode | None = None
    no_cache: Flag | None = None
    no_store: Flag | None = None
    force_refresh: Flag | None = None
    minicache: CacheControls | None = None
    metadata: dict[str, MetadataValue] | None = Field(default=None, max_length=64)

    def controls(self, headers: Any) -> CacheControls:
        top = CacheControls(**{name: getattr(self, name) for name in CacheControls.model_fields})
        return (self.minicache or CacheControls()).merged(
            controls_from_metadata(self.metadata), top, controls_from_headers(headers)
        )


class SolveResponse(BaseModel):
    """What ``POST /v1/solve`` answers: the engine's ``SolveResult``."""

    answer: Any
    answer_text: str
    route: str = Field(description="hit | miss | fallback | step-reuse | step-patch | step-skip")
    group: str
    entry_id: str | None = None
    program: str | None = None
    variables: dict[str, Any] = {}
    timings: dict[str, float] = {}
    tokens: dict[str, int] = {}
    similarity: float = 0.0
    extraction: str | None = None
    pinned: list[str] = Field(
        [], description="variables whose values learned rules read and gave the small model"
    )
    fallback_reason: str | None = None
    output: str | None = None
    steps: list[str] = []
    verified: bool | None = None
    solver_fallback: bool = False
    reused_from: str | None = None
    lock_wait_s: float = Field(
        0.0,
        description="seconds this request waited for the compute lock (other requests' "
        "or a build's model calls)",
    )
    passthrough_reason: str | None = Field(
        None, description="why a chat request was left to the target (never set here)"
    )


# -- admin -------------------------------------------------------------------------------------------

EntryStatus = Literal["candidate", "active", "superseded", "evicted"]


class InvalidateRequest(BaseModel):
    """Exactly one of ``group`` (a label or a group id) or ``entry`` (an entry id)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    group: Label | None = None
    entry: Label | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> InvalidateRequest:
        if (self.group is None) == (self.entry is None):
            raise PydanticCustomError("invalid_request", "give exactly one of group or entry")
        return self


class FreezeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    frozen: StrictBool


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(BaseModel):
    """Every error response: ``{"error": {"message", "type", "param", "code"}}``."""

    error: ErrorDetail
