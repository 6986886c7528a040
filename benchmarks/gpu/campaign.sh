#!/usr/bin/env bash
# One GPU window in one command (docs/scaling.md, "A GPU window in one command"):
#   bash benchmarks/gpu/campaign.sh --out "$OUT" [--budget 540] [fedfrac-campaign run flags]
# Installs the wheels carried in .whl/ (make gpu-wheels) into /tmp/site, then runs
# `python -m fedfrac_lab.campaign run`: device check, stage a (accelerator measurements),
# stage b (the next points of benchmarks/gpu/plan.json), all inside the budget.
# PYTHON (default python3) picks the interpreter, CAMPAIGN_WHEELS (default .whl) and
# CAMPAIGN_SITE (default /tmp/site) the wheel folder and where they go; on a machine
# without a GPU the same command is a dry run on the CPU, labelled so.
started_at=$(date +%s.%N)
cd "$(dirname "$0")/../.." || exit 2
PY=${PYTHON:-python3}
out=""
prev=""
for a in "$@"; do [ "$prev" = "--out" ] && out=$a; case $a in --out=*) out=${a#--out=};; esac; prev=$a; done
[ -n "$out" ] || { echo "error: --out DIR is required" >&2; exit 2; }
mkdir -p "$out"
. benchmarks/gpu/install_wheels.sh
install_wheels "$PY" "$out/campaign.log"
if ! "$PY" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('ml_collections', 'dp_accounting')))" 2>>"$out/campaign.log"; then
  echo "error: ml_collections or dp_accounting cannot be imported: run 'make gpu-wheels' on the development machine and carry .whl" | tee -a "$out/campaign.log" >&2
  "$PY" -c "import jax; print('device check:', jax.devices())" 2>&1 | tail -1 | tee -a "$out/campaign.log" >&2
  exit 2
fi
exec "$PY" -m fedfrac_lab.campaign run --started-at "$started_at" "$@"
