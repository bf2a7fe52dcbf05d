"""``minicache bench-spec``: does speculative decoding pay on this machine?

For each of N Formula groups we take two requests of the same formula. The target first writes a
program for request A with plain greedy decoding; that program plays the cached program of the
group. Then request B is decoded three ways: plain greedy, drafted by the small model, and drafted
by lookup in A's program ("cache-drafted"). We report tokens/s, seconds per request, acceptance,
speedup over plain, and how many drafted outputs are identical to plain greedy (they should all
be: verification is greedy, so any difference comes from numerics of batched evaluation).
"""

from __future__ import annotations

import statistics
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from minicache.miss.prompts import pot_messages
from minicache.models.base import DraftKind, GenerationOptions
from minicache_bench.datasets import Request, formula


def pick_pairs(n: int) -> list[tuple[Request, Request]]:
    groups: OrderedDict[str, list[Request]] = OrderedDict()
    for req in formula("train"):
        groups.setdefault(req.group or "", []).append(req)
    pairs = [(reqs[0], reqs[1]) for reqs in groups.values() if len(reqs) >= 2]
    # Spread over the 50 formulas rather than taking the first n.
    step = max(1, len(pairs) // n)
    return pairs[::step][:n]


@dataclass
class ModeResult:
    seconds: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    proposed: int = 0
    accepted: int = 0
    identical: int = 0

    def row(self, name: str, plain_mean: float | None) -> dict:
        total_s, total_tok = sum(self.seconds), sum(self.tokens)
        mean = statistics.mean(self.seconds) if self.seconds else 0.0
        return {
            "mode": name,
            "requests": len(self.seconds),
            "tok_per_s": total_tok / total_s if total_s else 0.0,
            "s_per_request": mean,
            "acceptance": (self.accepted / self.proposed) if self.proposed else None,
            "speedup": (plain_mean / mean) if plain_mean and mean else 1.0,
            "identical_to_plain": self.identical,
        }


def run(
    target, small_available: bool, n: int = 10, max_tokens: int = 320, progress=None
) -> list[dict]:
    modes = ["plain", "small", "lookup"] if small_available else ["plain", "lookup"]
    results = {m: ModeResult() for m in modes}
    for a, b in pick_pairs(n):
        ref = target.complete(
            pot_messages(a.question), GenerationOptions(max_tokens=max_tokens, draft="none")
        ).text
        plain_text = None
        for mode in modes:
            draft: DraftKind = (
                "none" if mode == "plain" else "small" if mode == "small" else "lookup"
            )
            opts = GenerationOptions(
                max_tokens=max_tokens, draft=draft, draft_text=ref if mode == "lookup" else None
            )
            began = time.perf_counter()
            out = target.complete(pot_messages(b.question), opts)
            elapsed = time.perf_counter() - began
            r = results[mode]
            r.seconds.append(elapsed)
            r.tokens.append(out.completion_tokens)
            if mode == "plain":
                plain_text = out.text
            else:
                r.proposed += int(out.draft.get("proposed", 0))
                r.accepted += int(out.draft.get("accepted", 0))
                r.identical += int(out.text == plain_text)
            if progress:
                progress(mode)
    plain_mean = statistics.mean(results["plain"].seconds)
    rows = [results[m].row(m, plain_mean) for m in modes]
    rows[0]["identical_to_plain"] = len(results["plain"].seconds)
    return rows


def format_table(rows: list[dict]) -> str:
    head = f"{'mode':<8} {'requests':>8} {'tok/s':>7} {'s/req':>7} {'accept':>7} {'speedup':>8} {'identical':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        acc = "-" if r["acceptance"] is None else f"{r['acceptance']:.0%}"
        lines.append(
            f"{r['mode']:<8} {r['requests']:>8} {r['tok_per_s']:>7.1f} {r['s_per_request']:>7.2f} "
            f"{acc:>7} {r['speedup']:>7.2f}x {r['identical_to_plain']:>5}/{r['requests']}"
        )
    return "\n".join(lines)
