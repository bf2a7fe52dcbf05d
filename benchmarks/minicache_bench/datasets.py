"""Datasets shipped inside the package (copied from their public sources, licenses alongside).

Only loading and light normalisation live here; scoring lives with the benchmark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources

_FORMULA_RE = re.compile(r"^Use formula (?P<name>.+?) to answer the question\.")
_QUESTION_RE = re.compile(r'Question:\s*"(?P<q>.*)"\.\s*Answer:\s*$', re.S)
_NUMBER_RE = re.compile(
    r"\d[\d,]*(?:\.\d+)?"
)  # 76.0, 1,234.5: thousands separators are part of the number
_NOISE_RE = re.compile(
    r"[\s$%]|[a-z]+", re.I
)  # spaces, currency and percent signs, unit words ("million")


@dataclass(frozen=True)
class Request:
    id: str
    question: str
    answer: str
    context: str | None = None
    group: str | None = None  # ground-truth group label, for analysis only


def _data_file(*parts: str):
    return resources.files("minicache_bench").joinpath("corpus", *parts)


def formula_corrections() -> dict[tuple[str, int], str | None]:
    """Recomputed gold for the published answers known to be wrong (None: ill-posed, dropped).

    Made by ``python -m minicache_bench.tools.gold``; docs/data.md lists them with the reasons.
    """
    items = json.loads(
        _data_file("finlora_formula", "gold_corrections.json").read_text(encoding="utf-8")
    )
    return {(i["split"], i["row"]): i["corrected"] for i in items}


def formula(split: str = "train", corrected: bool = True) -> Iterator[Request]:
    """FinLoRA "Formula" requests (OpenMDW-1.0). ``group`` is the formula name.

    The request text is FinLoRA's full prompt (formula, symbol explanations and question); the
    formula name is kept only as the analysis label. With ``corrected`` (the default) the known
    wrong gold answers are replaced by recomputed ones and the one ill-posed request is left out.
    """
    if split not in ("train", "test"):
        raise ValueError("split must be 'train' or 'test'")
    fixes = formula_corrections() if corrected else {}
    text = _data_file("finlora_formula", f"formula_{split}.jsonl").read_text(encoding="utf-8")
    for i, line in enumerate(text.splitlines()):
        row = json.loads(line)
        answer = row["target"]
        if (split, i) in fixes:
            answer = fixes[(split, i)]
            if answer is None:
                continue
        match = _FORMULA_RE.match(row["context"])
        group = match.group("name") if match else None
        yield Request(
            id=f"formula-{split}-{i}", question=row["context"], answer=answer, group=group
        )


def formula_question_only(request: Request) -> str:
    """The quoted question inside a Formula prompt (without the formula boilerplate)."""
    match = _QUESTION_RE.search(request.question)
    return match.group("q").strip() if match else request.question


def equation_skeleton(equation: str) -> str:
    """The computation's shape with every number masked: ``"( 76.0 - 25.0 )"`` -> ``"N-N"``.

    Used as the gold group label of datasets that give a derivation (SVAMP's ``Equation``, TAT-QA's
    ``derivation``), so that two requests share a label exactly when they do the same arithmetic.
    Spaces, ``$``, ``%`` and unit words are dropped, square brackets read as parentheses and one
    pair of parentheses around the whole expression is removed: ``"$1,200 - $300"``,
    ``"(1200-300)"`` and ``"( 76.0 - 25.0 )"`` are all ``"N-N"``; ``"N-(N+N)"`` stays apart
    from ``"N-N+N"``.
    """
    text = _NUMBER_RE.sub("N", _NOISE_RE.sub("", equation)).replace("[", "(").replace("]", ")")
    while text.startswith("(") and text.endswith(")") and _closes_at_end(text):
        text = text[1:-1]
    return text


def _closes_at_end(text: str) -> bool:
    """Whether the parenthesis that opens ``text`` is the one that closes it."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return i == len(text) - 1
    return False


def svamp() -> Iterator[Request]:
    """SVAMP (MIT): 1,000 one-step and two-step arithmetic word problems, in the file's order.

    The request text is ``Body + " " + Question``, as SVAMP's own code joins them (some bodies end
    without a full stop; the text is left as published). The gold is ``Answer`` (a float, e.g.
    51.0) as a string; ``group`` is :func:`equation_skeleton` of ``Equation``, the analysis label
    that says which requests share a computation.
    """
    rows = json.loads(_data_file("svamp", "SVAMP.json").read_text(encoding="utf-8"))
    for row in rows:
        yield Request(
            id=f"svamp-{row['ID']}",
            question=f"{row['Body'].strip()} {row['Question'].strip()}",
            answer=str(row["Answer"]),
            group=equation_skeleton(row["Equation"]),
        )
