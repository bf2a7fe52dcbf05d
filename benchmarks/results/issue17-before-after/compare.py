"""Compare two runs of formula40.py request by request: route, answer and group must be the same.

usage: python compare.py BEFORE_DIR AFTER_DIR
"""
import json
import sys
from collections import Counter


def rows(folder: str) -> dict[str, dict]:
    with open(f"{folder}/requests.jsonl", encoding="utf-8") as f:
        return {r["id"]: r for r in map(json.loads, f)}


before, after = rows(sys.argv[1]), rows(sys.argv[2])
assert before.keys() == after.keys(), "the two runs served different requests"
differ = [i for i in before if (before[i]["route"], before[i]["answer"], before[i]["group"])
          != (after[i]["route"], after[i]["answer"], after[i]["group"])]
for i in differ:
    print("differs:", i, before[i]["route"], before[i]["answer"], "->", after[i]["route"], after[i]["answer"])
print(f"{len(before)} requests compared, {len(differ)} differ in route, answer or group")
print("routes:", dict(Counter(r["route"] for r in after.values())), "correct:",
      sum(r["correct"] for r in before.values()), "before,", sum(r["correct"] for r in after.values()), "after")
print("target tokens:", sum(r["tokens"]["target"] for r in before.values()), "before,",
      sum(r["tokens"]["target"] for r in after.values()), "after")
sys.exit(1 if differ else 0)
