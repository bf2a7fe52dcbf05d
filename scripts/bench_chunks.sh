#!/usr/bin/env bash
# bench_chunks.sh - run one long `minicache bench` stream in chunks that can span work sessions.
#
# usage: scripts/bench_chunks.sh OUT_DIR CHUNK TOTAL -- <minicache bench args without --limit/--out>
#   e.g. scripts/bench_chunks.sh /tmp/formula-run 140 419 -- --dataset formula --groups 21 --methods pot,minicache
#
# Calls `minicache bench ARGS --limit L --out OUT_DIR` for L = CHUNK, 2*CHUNK, ..., TOTAL. Each call
# reads back the rows already in OUT_DIR/requests.jsonl and serves the next CHUNK requests with
# every method in turn, so the methods alternate every chunk and rows compared with each other were
# measured minutes apart (the stream is shuffled, then truncated: a shorter stream is a prefix of a
# longer one). minicache's store stays in OUT_DIR and its admission estimates are restored from the
# rows at each call (docs/results.md, "Long runs in chunks").
#
# Load: the date and `uptime` before and after each call go to OUT_DIR/load.log; the calls' stderr
# to OUT_DIR/bench.stderr (their stdout, the report, is OUT_DIR/report.md already).
# Pause: create OUT_DIR/STOP (`touch OUT_DIR/STOP`). The loop stops cleanly before the next chunk,
# never inside a request; the chunk under way finishes first. Delete STOP and run the same command
# again to resume.
# Resume: OUT_DIR/chunks.done holds the last limit whose call finished; a rerun starts after it (the
# call with that limit would only read rows back). Delete the file to make every call again.
# Exit status: 0 when TOTAL is done or STOP was found; a failing call's status otherwise (the loop
# stops there; rerun to retry that chunk: its recorded rows are kept).
# Not here: --concurrency and --pad-context (refused): run them in one call after the loop.
# MINICACHE overrides the command (default: this checkout's .venv/bin/minicache), e.g. a fake one in a test.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then usage; exit 0; fi
if [[ $# -lt 4 || "$4" != "--" ]]; then
  echo "bench_chunks.sh: expected OUT_DIR CHUNK TOTAL -- <minicache bench args> (see --help)" >&2; exit 2
fi
out="$1"; chunk="$2"; total="$3"; shift 4
if ! [[ "$chunk" =~ ^[1-9][0-9]*$ && "$total" =~ ^[1-9][0-9]*$ ]]; then
  echo "bench_chunks.sh: CHUNK and TOTAL must be positive integers, got '$chunk' and '$total'" >&2; exit 2
fi
for arg in "$@"; do
  case "$arg" in
    --limit|--limit=*|--out|--out=*)
      echo "bench_chunks.sh: do not pass $arg: the loop sets --limit and --out itself" >&2; exit 2 ;;
    --concurrency|--concurrency=*|--pad-context|--pad-context=*)
      echo "bench_chunks.sh: do not pass $arg: throughput and padded requests go through the same engine" \
           "after the stream, so every chunk would add requests to the stream's store; measure them in one" \
           "call after the loop (same args, --limit TOTAL --out OUT_DIR)" >&2; exit 2 ;;
  esac
done
minicache="${MINICACHE:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/minicache}"
mkdir -p "$out"

done_limit=0
if [[ -f "$out/chunks.done" ]]; then done_limit="$(cat "$out/chunks.done")"; fi
limits="$(seq "$chunk" "$chunk" "$total")"
if (( total % chunk )); then limits="$limits $total"; fi
stamp() { echo "$(date -u +%FT%TZ) $(uptime)"; }

for limit in $limits; do
  if (( limit <= done_limit )); then continue; fi
  if [[ -e "$out/STOP" ]]; then
    echo "stopped before limit $limit (STOP file): $(stamp)" >> "$out/load.log"
    echo "bench_chunks.sh: $out/STOP exists; stopped before limit $limit (delete it and rerun to resume)" >&2
    exit 0
  fi
  echo "limit $limit before: $(stamp)" >> "$out/load.log"
  status=0
  "$minicache" bench "$@" --limit "$limit" --out "$out" > /dev/null 2>> "$out/bench.stderr" || status=$?
  echo "limit $limit after:  $(stamp) exit $status" >> "$out/load.log"
  if (( status )); then
    echo "bench_chunks.sh: the call with --limit $limit failed (exit $status); see $out/bench.stderr" >&2
    exit "$status"
  fi
  echo "$limit" > "$out/chunks.done"
done
echo "bench_chunks.sh: $total requests done in $out" >&2
