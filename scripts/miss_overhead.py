#!/usr/bin/env python3
"""What minicache adds to a miss, per dataset, from an interleaved run's rows.

usage: python3 scripts/miss_overhead.py RUN_DIR/requests.jsonl [...]

For every request both methods answered, by the dataset its id starts with: minicache's routing
seconds (median) and, on misses that produced the same target tokens as pot, minicache's target call
over pot's whole latency on the same request (median and mean) and the latency ratio (median); then
pot's mean latency over minicache's for all the dataset's requests ("sum ratio", every route).
Rows that record ``detail.cached_prompt_tokens`` (since 65f6671) split those misses in two: the ones
that started from a kept state of their group's last miss (more cached prompt tokens than the
fewest any miss had: the system prompt, which pot's calls start from too) and the others.
"""

from __future__ import annotations

import collections
import json
import statistics as st
import sys


def main(paths: list[str]) -> None:
    for path in paths:
        rows = [json.loads(line) for line in open(path, encoding="utf-8")]
        pot = {r["id"]: r for r in rows if r["method"] == "pot"}
        by: dict[str, dict[str, list[float]]] = collections.defaultdict(lambda: collections.defaultdict(list))
        for r in rows:
            if r["method"] != "minicache" or r["id"] not in pot:
                continue
            p, v = pot[r["id"]], by[r["id"].split("-")[0]]
            timings = (r.get("detail") or {}).get("timings", {})
            if r["route"] == "miss" and r["tokens"]["target"] == p["tokens"]["target"]:
                v["route"].append(timings.get("route_s", 0.0))
                v["target"].append(timings.get("target_s", 0.0) / p["latency_s"])
                v["latency"].append(r["latency_s"] / p["latency_s"])
                if "cached_prompt_tokens" in r["detail"]:
                    v["cached"].append(r["detail"]["cached_prompt_tokens"])
                    v["cached_target"].append(timings.get("target_s", 0.0) / p["latency_s"])
            v["pot"].append(p["latency_s"])
            v["mc"].append(r["latency_s"])
        print(path)
        for name, v in by.items():
            if not v["route"]:
                print(f"  {name:8s} n={len(v['pot'])} (no miss with pot's tokens)")
                continue
            print(f"  {name:8s} n={len(v['pot'])} route med {st.median(v['route']):.3f} s, target/pot med "
                  f"{st.median(v['target']):.3f} mean {st.mean(v['target']):.3f}, latency/pot med "
                  f"{st.median(v['latency']):.3f}, sum ratio {sum(v['pot']) / sum(v['mc']):.3f}")
            if v["cached"]:
                least = min(v["cached"])
                for label, kept in (("from a kept state", True), ("without", False)):
                    ratios = [t for c, t in zip(v["cached"], v["cached_target"], strict=True) if (c > least) == kept]
                    print(f"    misses {label}: {len(ratios)}" + (f", target/pot med {st.median(ratios):.3f} mean "
                                                               f"{st.mean(ratios):.3f}" if ratios else ""))


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    main(sys.argv[1:])
