"""A request as the pipeline reads it: validated text in, the text extraction reads, and the
boilerplate a group's requests share (which extraction skips).

Validation happens once, in :func:`validate_request`, before anything is routed or stored: a request
the engine cannot hold (not text, NUL, a lone surrogate, too long, an absurd precision) is an
:class:`~minicache.errors.InvalidRequest` and nothing is recorded.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

from minicache.answers import MAX_DECIMALS, requested_decimals
from minicache.errors import InvalidRequest

Mode = Literal["auto", "program", "step"]


def validate_text(value: Any, what: str, limit: int, required: bool) -> str | None:
    """``value`` as text (UTF-8 bytes decoded; a JSON context serialized), or InvalidRequest saying why not."""
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
        raise InvalidRequest(
            f"{what} is not valid text (a lone surrogate at character {exc.start})"
        ) from None
    if required and not value.strip():
        raise InvalidRequest(f"{what} is empty")
    if len(value) > limit:
        raise InvalidRequest(f"{what} is {len(value):,} characters; the limit is {limit:,}")
    return value


def validate_request(
    question: Any,
    context: Any,
    group: Any,
    tenant: Any,
    mode: Any,
    *,
    max_question_chars: int,
    max_context_chars: int,
) -> tuple[str, str | None, Mode]:
    """The request's question and context as text, and its mode; InvalidRequest names the first problem."""
    text = validate_text(question, "question", max_question_chars, True)
    assert text is not None  # required=True
    context = validate_text(context, "context", max_context_chars, False)
    if group is not None and (not isinstance(group, str) or not group.strip() or len(group) > 200):
        raise InvalidRequest("group must be a non-empty string of at most 200 characters")
    validate_text(group, "group", 200, False)
    if not isinstance(tenant, str) or not tenant or len(tenant) > 200:
        raise InvalidRequest("tenant must be a non-empty string of at most 200 characters")
    if (requested_decimals(text) or 0) > MAX_DECIMALS:
        raise InvalidRequest(f"the question asks for more than {MAX_DECIMALS} decimal places")
    if mode not in ("auto", "program", "step"):
        raise InvalidRequest(f"mode must be auto, program or step, not {mode!r}")
    return text, context, mode


# between a request's question and its context (minicache.programs.tables splits there)
CONTEXT_SEPARATOR = "\n\nContext:\n"


def request_text(question: str, context: str | None) -> str:
    """What extraction reads: the question, then the context (a table, a document) if any."""
    return question if not context else f"{question}{CONTEXT_SEPARATOR}{context}"


PREFIX_MIN = 40  # characters: shorter shared text is not boilerplate worth skipping


def shared_prefix(texts: list[str], minimum: int = PREFIX_MIN) -> str:
    """The text all of a group's requests begin with (boilerplate), cut back to a word boundary.

    Extraction reads only what follows it: a shorter prompt for the small model and fewer candidate
    numbers, since values that vary between requests cannot be in a prefix they all share.
    """
    if len(texts) < 2:
        return ""
    prefix = os.path.commonprefix(texts)
    cut = max(prefix.rfind(" "), prefix.rfind("\n"))
    prefix = prefix[: cut + 1] if cut >= 0 else ""
    return prefix if len(prefix) >= minimum else ""


def strip_prefix(text: str, prefix: str) -> str:
    """``text`` without the group's shared ``prefix``, or without the whole words it shares with it.

    Runs of whitespace match runs of any length: the prefix is learned from the first examples, and
    requests of one template differ in spacing. On Formula, Return on Assets learned a prefix ending
    in ``Question:`` and two spaces from its first two examples; most of its later requests wrote one
    space, kept the formula's ``x 100`` in the text extraction read, and were refused because that
    100's words ("Net Income / Total Assets") fit net income better than the chosen number's.

    A prefix learned from two examples can run past the boilerplate into words they happened to share:
    on WebShop an entry built early learned ``... Instruction: i `` and every later request that did
    not begin "i" kept the whole prompt, whose words then became its keywords. A request that leaves
    the prefix part-way loses the whole words it shares with it, when those are at least
    ``PREFIX_MIN`` characters; a shorter match leaves the text whole."""
    if not prefix:
        return text
    if text.startswith(prefix):
        return text[len(prefix) :]
    i = j = 0
    word_end = 0  # where the last whole word both share ends in text (after its whitespace)
    shared = 0  # prefix characters matched up to word_end
    while i < len(prefix):
        if prefix[i].isspace():
            if j >= len(text) or not text[j].isspace():
                break
            while i < len(prefix) and prefix[i].isspace():
                i += 1
            while j < len(text) and text[j].isspace():
                j += 1
            word_end, shared = j, i
        elif j < len(text) and text[j] == prefix[i]:
            i += 1
            j += 1
        else:
            break
    else:
        return text[j:]
    return text[word_end:] if shared >= PREFIX_MIN else text
