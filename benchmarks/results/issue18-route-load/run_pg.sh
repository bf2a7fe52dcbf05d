#!/bin/bash
export OPENBLAS_NUM_THREADS=1
for tree in old new; do
  dir=/tmp/h18/old; [ $tree = new ] && dir=/work/main
  echo "== $dir $(uptime)"
  nice -n 19 /work/main/.venv/bin/python $dir/scripts/route_latency.py --store postgresql://postgres@127.0.0.1:48955/routelat_$tree --sizes 1000,10000 --requests 300 --old 10
done
echo "== end $(uptime)"
