"""How often a SVAMP hit would meet an entry whose program is another computation (offline estimate).

SVAMP's word problems share words but not computations. This script estimates, without the 1.5B or
0.5B models, what routing does to the issue-16/18 SVAMP stream (``--dataset svamp --limit 300``,
seed 0) and what an entry built there would serve:

* **Routing is real**: MiniLM embeddings of the requests' skeletons and the router's rule (join the
  group of the nearest kept vector at cosine >= 0.80, else start a group), in stream order, each
  request recorded as it would be on a miss.
* **Programs are idealized**: each request's "program" is its gold ``Equation`` with its numbers as
  parameters, as if the target always wrote the right program. A group is built when it reaches
  3 examples (``build_after``; admission is ignored): the candidate a majority of the comparable
  examples agrees with (same number of parameters, same answer on their values), validated if it
  reproduces 2 of the 3 newest (``validate_min`` of ``validate_n``) with perfect extraction.
* **A later request routed to a built group is a hit attempt**: the script counts those whose
  entry program gives a wrong answer *even with the request's true values* (the group mixed
  computations, so no extraction can make the hit right), and runs the real zero-model path on
  each (``align`` with the entry's exemplars, ``check_values``, ``check_answer``) to count aligned
  hits right and wrong. Attempts alignment does not resolve would go to the small model (not
  simulated).
* It also prints, per similarity threshold, how many attempts are at least that similar to an
  agreeing example of their group, for SVAMP (program right / wrong) and for the Formula stream
  (419 requests, 21 formulas, whose groups are pure): whether a stricter similarity for hits than
  for grouping would separate them.

    .venv/bin/python scripts/svamp_mixing_check.py     # a few minutes on one core (MiniLM on 719 texts)
"""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minicache.align import align
from minicache.bench.data import load, select
from minicache.embedding import MiniLMEmbedder
from minicache.errors import HitRefused
from minicache.hit import VerifyConfig, check_answer, check_values, learn_profile
from minicache.route_index import TenantIndex
from minicache.routing import skeleton
from minicache.store.base import Variable

NUMBER = re.compile(r"\d+(?:\.\d+)?")
THRESHOLD = 0.80


def program(equation: str) -> tuple[str, list[float]]:
    """``"( 76.0 - 25.0 )"`` -> ``("( p0 - p1 )", [76.0, 25.0])``."""
    names = iter(range(100))
    return NUMBER.sub(lambda m: f"p{next(names)}", equation), [float(x) for x in NUMBER.findall(equation)]


def run(expression: str, values: list[float]) -> float | None:
    try:
        return float(eval(expression, {"__builtins__": {}}, {f"p{k}": v for k, v in enumerate(values)}))
    except (ArithmeticError, NameError, SyntaxError, TypeError):
        return None


def close(a: float | None, b: float) -> bool:
    return a is not None and abs(a - b) <= max(0.01, 1e-3 * abs(b))


def agrees(expr: str, arity: int, program_i: tuple[str, list[float]], gold_i: float) -> bool:
    """A candidate program reproduces an example: same number of parameters, the example's answer."""
    return len(program_i[1]) == arity and close(run(expr, program_i[1]), gold_i)


def chosen(ids: list[int], programs: list[tuple[str, list[float]]], gold: list[float]) -> int | None:
    """The member whose program a build of the group ``ids`` would choose, as the build does: the
    candidates a majority of the comparable examples agree with, best first (the newest among
    equals), the first that reproduces 2 of the 3 newest examples. None if no candidate does."""
    ranked = []
    for c in reversed(ids):
        expr, values = programs[c]
        score = sum((1 if agrees(expr, len(values), programs[i], gold[i]) else -1)
                    for i in ids if len(programs[i][1]) == len(values))
        if score > 0:
            ranked.append((score, c))
    for _, c in sorted(ranked, key=lambda t: -t[0]):
        expr, values = programs[c]
        if sum(agrees(expr, len(values), programs[i], gold[i]) for i in ids[-3:]) >= 2:
            return c
    return None


def route(vectors: np.ndarray) -> list[str]:
    index, made, out = TenantIndex(32, exact_rows=10**12), 0, []
    for v in vectors:
        group, sim = index.nearest(v)
        if group is None or sim < THRESHOLD:
            group, made = f"g{made}", made + 1
        index.add(group, v)
        out.append(group)
    return out


def main() -> int:
    rows = {f"svamp-{r['ID']}": r for r in json.loads(
        (Path(__file__).resolve().parents[1] / "minicache/data/svamp/SVAMP.json").read_text(encoding="utf-8"))}
    stream = select(load("svamp"), limit=300, groups=None, seed=0)
    embedder = MiniLMEmbedder()
    vectors = embedder.embed([skeleton(r.question) for r in stream]).astype(np.float32)
    programs = [program(rows[r.id]["Equation"]) for r in stream]
    gold = [float(r.answer) for r in stream]
    config = VerifyConfig()
    groups = route(vectors)  # every request recorded: the grouping a stream of misses would make
    members: dict[str, list[int]] = collections.defaultdict(list)
    entries: dict[str, dict] = {}
    counts: collections.Counter[str] = collections.Counter()
    similar: list[tuple[float, bool]] = []
    for n, group in enumerate(groups):
        entry = entries.get(group)
        if entry is not None:
            counts["hit attempts"] += 1
            right_program = (len(programs[n][1]) == entry["arity"]
                             and close(run(entry["expr"], programs[n][1]), gold[n]))
            counts["attempts whose entry is another computation"] += not right_program
            similar.append((max(float(vectors[i] @ vectors[n]) for i in entry["agreeing"]), right_program))
            found = next((a.values for ex in entry["exemplars"] if (a := align(ex, stream[n].question)).complete), None)
            if found is None:
                counts["not aligned (to the small model)"] += 1
            else:
                try:
                    check_values(entry["profile"], entry["template"], found, stream[n].question, config.value_range)
                    answer = run(entry["expr"], [found[f"p{k}"] for k in range(entry["arity"])])
                    check_answer(entry["profile"], answer, config.answer_range)
                    counts["aligned hits right" if close(answer, gold[n]) else "aligned hits wrong"] += 1
                except HitRefused as exc:
                    counts[f"aligned, refused by {exc.check}"] += 1
            continue
        members[group].append(n)
        ids = members[group]
        if len(ids) < 3:
            continue
        c = chosen(ids, programs, gold)
        if c is None:
            continue
        expr, values = programs[c]
        agreeing = [i for i in ids if agrees(expr, len(values), programs[i], gold[i])]
        template = [Variable(f"p{k}", "number") for k in range(len(values))]
        pairs = [(stream[i].question, {f"p{k}": x for k, x in enumerate(programs[i][1])}) for i in agreeing]
        profile = learn_profile(template, pairs, [gold[i] for i in ids])
        entries[group] = {"expr": expr, "arity": len(values), "template": template, "profile": profile,
                          "exemplars": profile["exemplars"], "agreeing": agreeing}
    print(json.dumps({"requests": len(stream), "groups": len(set(groups)),
                      "computations": len({r.group for r in stream}), "entries": len(entries), **counts}))
    formula = select(load("formula"), limit=419, groups=21, seed=0)
    fvec = embedder.embed([skeleton(r.question) for r in formula]).astype(np.float32)
    fgroups, seen, fsim = route(fvec), collections.defaultdict(list), []
    for n, group in enumerate(fgroups):
        if len(seen[group]) >= 3:
            fsim.append(max(float(fvec[i] @ fvec[n]) for i in seen[group]))
        seen[group].append(n)
    for t in (0.80, 0.85, 0.90, 0.95):
        print(json.dumps({"hit similarity at least": t,
                          "svamp attempts, right program": sum(ok and s >= t for s, ok in similar),
                          "svamp attempts, other computation": sum(not ok and s >= t for s, ok in similar),
                          "formula attempts (pure groups)": sum(s >= t for s in fsim),
                          "formula attempts in all": len(fsim)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
