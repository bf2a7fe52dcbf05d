"""Benchmark datasets and how their answers are scored.

Numeric answers (Formula, TAT-QA, SVAMP, generic JSONL) are compared with one tolerance for every method:
``math.isclose(answer, gold, rel_tol=1e-3, abs_tol=0.01)`` (see :func:`minicache.programs.signature.answers_match`).
TAT-QA golds are in units of their ``scale``; the request says which unit it wants (we append the
scale to the question), and an answer in another unit is wrong for every method alike.
WebShop answers are Search actions ``{"keywords": str, "max_price": number}``: ``max_price`` must
equal the gold exactly and the keywords must cover at least 50% of the gold keywords' content words
(lower-cased, stop words dropped). See :func:`action_matches`.
"""

from __future__ import annotations

import json
import random
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from minicache.programs.signature import answers_match
from minicache_bench.datasets import equation_skeleton, formula, svamp
from minicache_bench.splits import TATQA_FILES, in_svamp_split, split_error


@dataclass
class BenchRequest:
    id: str
    question: str
    answer: Any
    context: str | None = None
    group: str | None = (
        None  # ground-truth label: analysis only, never routing (unless --use-group-labels)
    )
    kind: str = (
        "numeric"  # numeric | action | step (a structured output, scored by stepcache.micro)
    )
    meta: dict[str, Any] = field(default_factory=dict)


def _data(*parts: str):
    return resources.files("minicache_bench").joinpath("corpus", *parts)


def load_formula() -> list[BenchRequest]:
    out = []
    for split in ("train", "test"):
        for r in formula(split):
            out.append(BenchRequest(r.id, r.question, r.answer, group=r.group))
    return out


def _table_text(table: list[list[str]]) -> str:
    return "\n".join(" | ".join(cell.strip() for cell in row) for row in table)


def load_tatqa(split: str | None = None) -> list[BenchRequest]:
    """TAT-QA's arithmetic questions; ``split`` (dev or test) reads only that split's file."""
    out = []
    for split_file in (TATQA_FILES[split],) if split else ("dev", "test_gold"):
        path = _data("tatqa", f"tatqa_dataset_{split_file}.json")
        for doc in json.loads(path.read_text(encoding="utf-8")):
            context = (
                _table_text(doc["table"]["table"])
                + "\n\n"
                + "\n".join(p["text"] for p in doc["paragraphs"])
            )
            for q in doc["questions"]:
                if q.get("answer_type") != "arithmetic":
                    continue
                try:
                    gold = float(q["answer"])
                except (TypeError, ValueError):
                    continue
                scale = q.get("scale") or ""
                unit = {"percent": " Answer as a percentage (e.g. 12.5 for 12.5%)."}.get(
                    scale, f" Answer in {scale}s." if scale else ""
                )
                skeleton = equation_skeleton(q.get("derivation") or "")
                out.append(
                    BenchRequest(
                        f"tatqa-{split_file}-{q['uid']}",
                        q["question"].strip() + unit,
                        gold,
                        context=context,
                        group=skeleton or None,
                        meta={"scale": scale},
                    )
                )
    return out


def load_svamp(split: str | None = None) -> list[BenchRequest]:
    """SVAMP's 1,000 word problems: Body + " " + Question, gold Answer, group = the equation's skeleton;
    ``split`` (dev or test) keeps the requests of that split's skeletons (minicache_bench.splits)."""
    return [
        BenchRequest(r.id, r.question, float(r.answer), group=r.group)
        for r in svamp()
        if split is None or in_svamp_split(r.group, split)
    ]


_PRICE = re.compile(r"price lower than\s*\$?\s*([\d,]+(?:\.\d+)?)\s*dollars", re.I)
_STOP = set(
    "a an the and or of for with to in on i am looking need want find me my that is are be it its "
    "please some buy get would like".split()
)


def webshop_gold(instruction: str) -> dict[str, Any]:
    """Our reference Search action: the price clause gives max_price (1000000 when absent, as in the
    CacheSpec workload); the keywords are the instruction without the price clause and filler words."""
    m = _PRICE.search(instruction)
    price = float(m.group(1).replace(",", "")) if m else 1000000.0
    text = _PRICE.sub("", instruction)
    words = [w for w in re.findall(r"[a-z0-9]+(?:[-'][a-z0-9]+)*", text.lower()) if w not in _STOP]
    return {"keywords": " ".join(words), "max_price": price}


def load_webshop() -> list[BenchRequest]:
    path = _data("webshop_instructions", "human_prompts.jsonl")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        question = (
            "Write the WebShop Search action for this shopping instruction as JSON "
            '{"keywords": ..., "max_price": ...} (max_price 1000000 if no price is given).\n'
            f"Instruction: {row['instruction']}"
        )
        out.append(
            BenchRequest(
                f"webshop-{row['id']}",
                question,
                webshop_gold(row["instruction"]),
                kind="action",
                group="search-action",
            )
        )
    return out


def load_jsonl(path: str | Path) -> list[BenchRequest]:
    out = []
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        row = json.loads(line)
        missing = {"question", "answer"} - set(row)
        if missing:
            raise ValueError(f"{path}:{i + 1}: missing {', '.join(sorted(missing))}")
        out.append(
            BenchRequest(
                str(row.get("id", i)),
                row["question"],
                row["answer"],
                context=row.get("context"),
                group=row.get("group"),
                kind="action" if isinstance(row["answer"], dict) else "numeric",
            )
        )
    return out


def load_stepcache_micro(seed: int) -> list[BenchRequest]:
    """StepCache's micro-benchmark (222 requests, already in stream order for ``seed``)."""
    from minicache_bench.stepcache import micro

    out = []
    for r in micro.generate(seed):
        gold = float(r.gold) if r.task == "linear" else r.gold
        out.append(
            BenchRequest(
                r.id,
                r.text,
                gold,
                group=r.family,
                kind="step",
                meta={"task": r.task, "perturbation": r.perturbation},
            )
        )
    return out


def load_mix() -> list[BenchRequest]:
    """Formula, TAT-QA and SVAMP together, each group label prefixed by its dataset ("svamp:N-N").

    Two datasets' requests never share a label: the same arithmetic in a formula prompt, a table
    question and a word problem is written so differently that it is not one template.
    """
    out = []
    for name, loader in (("formula", load_formula), ("tatqa", load_tatqa), ("svamp", load_svamp)):
        for r in loader():
            r.group = f"{name}:{r.group}" if r.group else None
            out.append(r)
    return out


LOADERS = {
    "formula": load_formula,
    "tatqa": load_tatqa,
    "webshop": load_webshop,
    "svamp": load_svamp,
    "mix": load_mix,
}
SPLIT_LOADERS = {"tatqa": load_tatqa, "svamp": load_svamp}  # datasets with a dev/test split
SEEDED = {
    "stepcache-micro": load_stepcache_micro
}  # datasets generated per seed, streamed in their own order
DISTINCT = (
    "-distinct"  # suffix: one request per gold group (a stream in which no computation repeats)
)


def one_per_group(requests: list[BenchRequest]) -> list[BenchRequest]:
    """The first request of each gold group, in the dataset's order; unlabelled requests are dropped.

    A stream drawn from these repeats no computation (as far as the labels tell), so a cache can
    only lose on it: it measures what routing, recording and bookkeeping cost a user whose workload
    never repeats. The choice is fixed by the file order, not by the seed; the seed shuffles it.
    """
    seen: set[str] = set()
    out = []
    for r in requests:
        if r.group and r.group not in seen:
            seen.add(r.group)
            out.append(r)
    return out


def load(dataset: str, seed: int = 0, split: str | None = None) -> list[BenchRequest]:
    """The requests of ``dataset`` in file order; ``split`` (dev or test) only where it has one."""
    if split is not None:
        refused = split_error(dataset)
        if refused:
            raise ValueError(refused)
        base = dataset.removesuffix(DISTINCT)
        requests = SPLIT_LOADERS[base](split)
        return one_per_group(requests) if dataset.endswith(DISTINCT) else requests
    if dataset in SEEDED:
        return SEEDED[dataset](seed)
    if dataset in LOADERS:
        return LOADERS[dataset]()
    if dataset.endswith(DISTINCT) and dataset.removesuffix(DISTINCT) in LOADERS:
        return one_per_group(LOADERS[dataset.removesuffix(DISTINCT)]())
    if dataset.endswith(".jsonl") and Path(dataset).exists():
        return load_jsonl(dataset)
    raise ValueError(
        f"unknown dataset {dataset!r}: use {', '.join(LOADERS)} (or NAME{DISTINCT}, one request per "
        f"gold group), {', '.join(SEEDED)} or a path to a .jsonl file"
    )


def select(
    requests: list[BenchRequest], *, limit: int | None, groups: int | None, seed: int
) -> list[BenchRequest]:
    """``groups`` labels (spread over all), then a seeded shuffle (a cold-start stream), then ``limit``."""
    if groups:
        by: OrderedDict[str, list[BenchRequest]] = OrderedDict()
        for r in requests:
            by.setdefault(r.group or r.id, []).append(r)
        names = list(by)
        names = names[:: max(1, len(names) // groups)][:groups]
        requests = [r for n in names for r in by[n]]
    requests = list(requests)
    random.Random(seed).shuffle(requests)
    return requests[:limit] if limit else requests


# ------------------------------------------------------------------------------------------
# Scoring


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", str(text).lower()) if w not in _STOP}


def parse_action(answer: Any) -> dict[str, Any] | None:
    if isinstance(answer, dict):
        return answer
    if isinstance(answer, str):
        m = re.search(r"\{.*\}", answer, re.S)
        if m:
            try:
                data = json.loads(m.group(0))
                return data if isinstance(data, dict) else None
            except json.JSONDecodeError:
                return None
    return None


def action_matches(answer: Any, gold: dict[str, Any]) -> bool:
    """max_price equal (as numbers) and >= 50% of the gold keywords' content words present."""
    action = parse_action(answer)
    if not action:
        return False
    try:
        if float(str(action.get("max_price")).replace("$", "").replace(",", "")) != float(
            gold["max_price"]
        ):
            return False
    except (TypeError, ValueError):
        return False
    want = _content_words(gold["keywords"])
    have = _content_words(action.get("keywords", ""))
    return not want or len(want & have) / len(want) >= 0.5


def is_correct(request: BenchRequest, answer: Any) -> bool:
    if answer is None:
        return False
    if request.kind == "step":  # scored by a checker that shares no code with StepCache's verifier
        from minicache_bench.stepcache.independent_check import check

        return check(request.meta["task"], answer, request.question, request.answer)[0]
    if request.kind == "action":
        return action_matches(answer, request.answer)
    return answers_match(answer, request.answer)


_PAD_SENTENCES = (
    "The quarterly report also notes routine administrative updates and office relocations.",
    "Staffing changes in the regional teams were announced at the annual meeting.",
    "The board thanked the outgoing committee members for their service.",
    "Several unrelated operational remarks were recorded in the minutes.",
    "None of these remarks affects any figure requested below.",
    "The facilities team reviewed parking, cafeteria hours and building access.",
    "A new travel policy takes effect at the start of the next season.",
    "Employees were reminded to complete the annual compliance training.",
    "The marketing department presented a refreshed brand guideline.",
    "Minor edits were made to the internal style guide for reports.",
    "The company newsletter featured a profile of the logistics group.",
    "Feedback from the staff survey will be discussed at a later date.",
)


def pad_context(request: BenchRequest, tokens: int) -> BenchRequest:
    """Add about ``tokens`` tokens of irrelevant text before the context (long-context robustness).

    The filler's sentences are drawn per request (seeded by its id): one filler for every request
    would be a shared prompt prefix, which a backend's KV cache evaluates once for all of them.
    """
    if tokens <= 0:
        return request
    rng = random.Random(f"{request.id}:{tokens}")
    words: list[str] = []
    while len(words) < int(tokens * 0.75):
        words += rng.choice(_PAD_SENTENCES).split()
    context = " ".join(words[: int(tokens * 0.75)]) + (
        "\n\n" + request.context if request.context else ""
    )
    return BenchRequest(
        request.id,
        request.question,
        request.answer,
        context,
        request.group,
        request.kind,
        dict(request.meta, pad=tokens),
    )
