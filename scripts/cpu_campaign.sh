#!/usr/bin/env bash
# The CPU as a campaign machine: the cells of benchmarks/cpu/plan.tsv, one
# process pinned to one core at low priority, each cell in its own workdir
# (checkpointed every config.checkpoint_every chunks, so a killed cell resumes
# where it stopped, and a finished one is skipped by fedfrac.main itself).
#
#   scripts/cpu_campaign.sh CORE CORES ROOT DATA_ROOT
#
# runs the plan's cells i with i % CORES == CORE, in order; cell i's workdir is
# ROOT/<arg>/<method>, its log ROOT/<arg>/<method>.log, and each start and end
# (with its wall seconds) is printed. DATA_ROOT holds the data as `make
# gpu-data` lays out .gpu-data: mnist/ (mnist.pkl.gz) and fashion-mnist/ (the
# IDX files). A cell whose config is reproduce:<paper> runs `fedfrac-reproduce
# <paper> --dir=DATA_ROOT/<mnist or fashion-mnist, by its --dataset>
# --json=ROOT/<arg>/<method>.json` with its flags instead; its runs keep no
# checkpoint, so a killed cell runs again from its first round, and a finished
# one (its json written) is skipped. A fedfrac.main cell that ended with rc 0
# leaves ROOT/<arg>/<method>.done (its command) and is not started again by the
# same command; its log line says "(done before)". Start one per core:
#   nohup scripts/cpu_campaign.sh 0 2 ROOT DATA_ROOT > ROOT/core0.log &
#   nohup scripts/cpu_campaign.sh 1 2 ROOT DATA_ROOT > ROOT/core1.log &
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
  mkdir -p "$(dirname "$wd")"
  echo "$(date -u +%FT%TZ) start $arg/$method (core $core)"
  start=$(date +%s)
  case "$config" in
    reproduce:*)   # a fedfrac-reproduce cell: its --json is the cell's result file
      if [[ -s "$wd.json" ]]; then
        echo "$(date -u +%FT%TZ) end $arg/$method rc=0 wall_s=0 (done before)"; continue
      fi
      ds=mnist; [[ "$flags" == *--dataset=fashion_mnist* ]] && ds=fashion-mnist
      nice -n 19 taskset -c "$core" "$py" -m fedfrac_lab.reproduce "${config#reproduce:}" \
          --dir="$data/$ds" --json="$wd.json" ${flags:+$flags} > "$wd.log" 2>&1 ;;
    *)
      cmd="--config=$config:$arg --config.only=$method --config.data.source=files"
      cmd+=" --config.data.dir=$data/mnist --workdir=$wd${flags:+ $flags}"
      if [[ -f "$wd.done" && "$(cat "$wd.done")" == "$cmd" ]]; then
        echo "$(date -u +%FT%TZ) end $arg/$method rc=0 wall_s=0 (done before)"; continue
      fi
      mkdir -p "$wd"
      # shellcheck disable=SC2086   # the plan's flags are words
      nice -n 19 taskset -c "$core" "$py" -m fedfrac.main $cmd > "$wd.log" 2>&1 ;;
  esac
  rc=$?
  # A finished cell is not started again by the same command (a rerun would find
  # its runs and compute nothing, but still count as a run of the cell).
  [[ $rc == 0 && "$config" != reproduce:* ]] && printf '%s\n' "$cmd" > "$wd.done"
  echo "$(date -u +%FT%TZ) end $arg/$method rc=$rc wall_s=$(( $(date +%s) - start ))"
done
