"""Recompute the FinLoRA Formula gold answers known to be wrong (see docs/data.md) and write
``minicache_bench/corpus/finlora_formula/gold_corrections.json``.

Run: ``python -m minicache_bench.tools.gold``"""

import json
from pathlib import Path


def pv_ordinary(flows, rate):
    return sum(cf / (1 + rate) ** t for t, cf in enumerate(flows, start=1))


def annuity(payment, rate, n):
    return payment * (1 - (1 + rate) ** -n) / rate


FIXES = [
    # (split, row, corrected, reason)
    (
        "test",
        0,
        pv_ordinary([3500] * 5, 0.08) - 13000,
        "gold ignores the stated $13,000 upfront cost and discounts from t=0",
    ),
    (
        "test",
        1,
        pv_ordinary([600] * 4, 0.03) - 2000,
        "gold ignores the stated $2,000 outlay and discounts from t=0",
    ),
    (
        "test",
        3,
        pv_ordinary([20000, 30000, 50000], 0.09),
        "inflows in the first, second, third year: gold discounts from t=0",
    ),
    (
        "train",
        14,
        pv_ordinary([4000] * 6, 0.05) - 20000,
        "gold ignores the stated $20,000 upfront cost",
    ),
    ("train", 13, None, "ill-posed: the initial investment amount is never given"),
    (
        "train",
        0,
        pv_ordinary([6000] * 4, 0.08),
        "annual inflows: gold discounts the first one at t=0",
    ),
    (
        "train",
        1,
        pv_ordinary([10000] * 5, 0.10),
        "annual inflows: gold discounts the first one at t=0",
    ),
    (
        "train",
        2,
        pv_ordinary([12000] * 2, 0.03),
        "annual inflows: gold discounts the first one at t=0",
    ),
    (
        "train",
        3,
        pv_ordinary([4500] * 6, 0.07),
        "annual inflows: gold discounts the first one at t=0",
    ),
    (
        "train",
        4,
        pv_ordinary([3000] * 8, 0.06),
        "annual inflows: gold discounts the first one at t=0",
    ),
    (
        "train",
        7,
        pv_ordinary([9000, 10000, 11000], 0.09),
        "annual inflows: gold discounts the first one at t=0",
    ),
    (
        "train",
        8,
        pv_ordinary([20000] * 10, 0.02),
        "annual inflows: gold discounts the first one at t=0",
    ),
    (
        "train",
        9,
        pv_ordinary([15000, 16000, 17000, 18000], 0.05),
        "end-of-year inflows: gold discounts from t=0",
    ),
    (
        "train",
        12,
        pv_ordinary([50000] * 15, 0.07),
        "annual inflows: gold discounts the first one at t=0",
    ),
    (
        "train",
        15,
        pv_ordinary([4400] * 3, 0.11),
        "'at the end of each year': gold discounts from t=0",
    ),
    (
        "train",
        37,
        annuity(8000, 0.04, 3),
        "annuity: gold discounts a single payment for one period",
    ),
    (
        "train",
        38,
        annuity(5000, 0.035, 6),
        "annuity: gold discounts a single payment for one period",
    ),
    (
        "train",
        42,
        20000 * 2.718281828459045 ** (-0.022 * 8),
        "'continuously compounding': gold uses discrete compounding",
    ),
    (
        "test",
        11,
        annuity(10000, 0.04, 10),
        "annuity: gold discounts a single payment for one period",
    ),
]


def main() -> None:
    base = Path(__file__).resolve().parents[1] / "corpus" / "finlora_formula"
    out = []
    for split, row, value, reason in FIXES:
        line = (base / f"formula_{split}.jsonl").read_text(encoding="utf-8").splitlines()[row]
        gold = json.loads(line)["target"]
        out.append(
            {
                "split": split,
                "row": row,
                "published": gold,
                "corrected": None if value is None else f"{value:.2f}",
                "reason": reason,
            }
        )
    (base / "gold_corrections.json").write_text(json.dumps(out, indent=2) + "\n")
    for item in out:
        print(
            f"{item['split']:>5} {item['row']:>3}  {item['published']:>10} -> {item['corrected']}  "
            f"({item['reason']})"
        )


if __name__ == "__main__":
    main()
