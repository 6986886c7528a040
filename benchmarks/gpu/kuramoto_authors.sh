#!/usr/bin/env bash
# The Kuramoto-FedAvg authors' code beside fedfrac in one GPU window (docs/scaling.md,
# "The Kuramoto-FedAvg authors' code beside fedfrac"):
#   bash benchmarks/gpu/kuramoto_authors.sh --out "$OUT" [fedfrac-reproduce kuramoto_authors run flags]
# Installs the wheels carried in .whl/ (make gpu-wheels) into /tmp/site, then runs
# `python -m fedfrac_lab.reproduce kuramoto_authors run` with the authors' src/ carried in
# .authors/kuramoto (make authors-kuramoto; KURAMOTO_AUTHORS to change) and
# Fashion-MNIST's IDX files in .gpu-data/fashion-mnist (make gpu-data; KURAMOTO_DATA).
# Flags given here come after the defaults and replace them (--budget 540 unless given).
cd "$(dirname "$0")/../.." || exit 2
PY=${PYTHON:-python3}
out=""
prev=""
for a in "$@"; do [ "$prev" = "--out" ] && out=$a; case $a in --out=*) out=${a#--out=};; esac; prev=$a; done
[ -n "$out" ] || { echo "error: --out DIR is required" >&2; exit 2; }
mkdir -p "$out"
. benchmarks/gpu/install_wheels.sh
install_wheels "$PY" "$out/kuramoto_authors.log"
authors=${KURAMOTO_AUTHORS:-.authors/kuramoto}
[ -f "$authors/src/main.py" ] || { echo "error: no $authors/src/main.py: run 'make authors-kuramoto' on the development machine and carry .authors" | tee -a "$out/kuramoto_authors.log" >&2; exit 2; }
exec "$PY" -m fedfrac_lab.reproduce kuramoto_authors run --authors="$authors" \
    --data="${KURAMOTO_DATA:-.gpu-data/fashion-mnist}" --budget=540 "$@"
