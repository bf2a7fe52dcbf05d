#!/bin/bash
export OPENBLAS_NUM_THREADS=1
for tree in /tmp/h18/old /work/main; do
  echo "== $tree $(uptime)"
  nice -n 19 /work/main/.venv/bin/python $tree/scripts/route_latency.py --store sqlite --sizes 1000,10000 --requests 300 --old 10
done
echo "== end $(uptime)"
