#!/usr/bin/env bash
# The three methods on one seed, interleaved in chunks: each call of `minicache bench` with a larger
# --limit resumes the same stream (rows already in requests.jsonl are read back, StepCache's store
# persists in the folder), so no-reuse, no-reuse+solver and stepcache take turns every CHUNK
# requests and rows compared with each other were measured minutes apart, not an hour. The load
# averages before and after each call go to load.log (other work shares the machine's 2 cores).
# usage: run.sh OUT_DIR CHUNK SEED [SEED...]
set -euo pipefail
cd "$(dirname "$0")/../../.."
out="$1"; chunk="$2"; shift 2
mkdir -p "$out"
for seed in "$@"; do
  for limit in $(seq "$chunk" "$chunk" 221) 222; do
    echo "seed $seed limit $limit before: $(date -u +%FT%TZ) $(uptime)" >> "$out/load.log"
    .venv/bin/minicache bench --dataset stepcache-micro --methods "${METHODS:-no-reuse,no-reuse+solver,stepcache}" \
      --seed "$seed" --limit "$limit" --out "$out/seed$seed" 2>>"$out/bench.stderr"
    echo "seed $seed limit $limit after:  $(date -u +%FT%TZ) $(uptime)" >> "$out/load.log"
  done
done
