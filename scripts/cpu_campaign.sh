#!/usr/bin/env bash
# The CPU as a campaign machine: the cells of benchmarks/cpu/plan.tsv, one
# process pinned to one core at low priority, each cell in its own workdir
# (checkpointed every config.checkpoint_every chunks, so a killed cell resumes
# where it stopped, and a finished one is skipped by fedfrac.main itself).
#
#   scripts/cpu_campaign.sh CORE CORES ROOT DATA_DIR
#
# runs the plan's cells i with i % CORES == CORE, in order; cell i's workdir is
# ROOT/<arg>/<method>, its log ROOT/<arg>/<method>.log, and each start and end
# (with its wall seconds) is printed. DATA_DIR holds mnist.pkl.gz (make
# gpu-data puts one in .gpu-data/mnist). Start one per core:
#   nohup scripts/cpu_campaign.sh 0 2 ROOT DATA > ROOT/core0.log &
#   nohup scripts/cpu_campaign.sh 1 2 ROOT DATA > ROOT/core1.log &
# Pause with `kill -STOP -PGID` and continue with `kill -CONT -PGID` while the
# test suite needs both cores. fedfrac-reproduce fofedavg_mnist --collect=ROOT
# turns the finished workdirs into the committed results. PYTHON (default
# .venv/bin/python) is the interpreter: to keep a campaign's code fixed while the
# checkout changes, run this script from a worktree of its own (git worktree add)
# with PYTHON=<checkout>/.venv/bin/python; the worktree's packages come first.
set -uo pipefail
core=$1 cores=$2 root=$3 data=$4
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
i=0
grep -v '^#' benchmarks/cpu/plan.tsv | while IFS=$'\t' read -r config arg method _ _ _ flags; do
  if (( i++ % cores != core )); then continue; fi
  wd="$root/${arg//,/_}/$method"
  mkdir -p "$wd"
  echo "$(date -u +%FT%TZ) start $arg/$method (core $core)"
  start=$(date +%s)
  nice -n 19 taskset -c "$core" "$py" -m fedfrac.main \
      --config="$config:$arg" --config.only="$method" \
      --config.data.source=files --config.data.dir="$data" \
      --workdir="$wd" ${flags:+$flags} > "$wd.log" 2>&1
  rc=$?
  echo "$(date -u +%FT%TZ) end $arg/$method rc=$rc wall_s=$(( $(date +%s) - start ))"
done
