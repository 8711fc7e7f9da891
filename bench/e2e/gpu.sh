#!/usr/bin/env bash
# GPU-path throughput (issue 7): images/s of examples/imagenet_train.yaml with its
# normalize/layout/cast tail on the GPU versus the same plan on the CPU only, for
# 1, 2, 4, ... CPU threads. Prints a Markdown table for bench/RESULTS.md, naming
# the GPU (nvidia-smi) and the CPU.
#
#   bench/e2e/gpu.sh [--no-build]
#
# Steps: build (sluice, sluice_make_dataset, sluice_e2e_loader); generate the
# dataset (shared with bench/e2e/run.sh); `sluice profile --data` this machine;
# `sluice compile --profile --cpu-budget CPU_BUDGET` so the cost model places the
# pointwise tail on the GPU (checked in plan.json: placement.device must be
# cuda:N, else the script says why and stops); then, per thread count and round,
# sluice_e2e_loader on that plan with --device cuda (GPU path: crop on the CPU,
# uint8 over the bus, one batch-wide kernel) and --device cpu (the whole-chain
# CPU kernels). Rounds interleave the two so machine noise hits both alike; the
# table holds medians. Benchmarks are not tests: the exit status is 0 whether the
# GPU path is faster or not (non-zero when something failed to build or run).
#
# Without a CUDA device (no nvidia-smi, or it lists no GPU) it prints
# "no CUDA device: skipping the GPU rows" and exits 0 before building anything;
# the CPU-only comparison is bench/e2e/run.sh.
#
# Environment (defaults in brackets):
#   BUILD       build directory [build-bench]
#   THREADS     space-separated CPU thread counts [1 2 4 ... up to nproc, and nproc]
#   CPU_BUDGET  --cpu-budget for the compile [1]
#   WARMUP      untimed batches per run [4]      BATCHES  timed batches per run [16]
#   IMAGES      dataset size [(WARMUP+BATCHES+1)*256]
#   CLASSES     class folders [10]               SEED     dataset seed [1]
#   ROUNDS      interleaved rounds [3]           PROFILE_SECONDS  sluice profile -s [20]
#   LOG         raw RESULT lines [$BUILD/e2e/gpu_results.log]
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"

# ---- is there a CUDA device? --------------------------------------------------------
GPU_NAME=""
if command -v nvidia-smi >/dev/null 2>&1; then
  GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1 || true)"
fi
if [[ -z "$GPU_NAME" ]]; then
  echo "no CUDA device: skipping the GPU rows (nvidia-smi absent or lists no GPU;" \
    "the CPU-only comparison is bench/e2e/run.sh)"
  exit 0
fi
GPU_DRIVER="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1 || true)"
GPU_MEM="$(nvidia-smi --query-gpu=memory.total --format=csv,noheader 2>/dev/null | head -n1 || true)"

BUILD="${BUILD:-build-bench}"
NPROC="$(nproc)"
if [[ -z "${THREADS:-}" ]]; then
  THREADS=""
  for ((t = 1; t < NPROC; t *= 2)); do THREADS+="$t "; done
  THREADS+="$NPROC"
fi
CPU_BUDGET="${CPU_BUDGET:-1}"
WARMUP="${WARMUP:-4}"
BATCHES="${BATCHES:-16}"
IMAGES="${IMAGES:-$(((WARMUP + BATCHES + 1) * 256))}"
CLASSES="${CLASSES:-10}"
SEED="${SEED:-1}"
ROUNDS="${ROUNDS:-3}"
PROFILE_SECONDS="${PROFILE_SECONDS:-20}"
WORK="$BUILD/e2e"
DATA="$WORK/data"
HW="$WORK/hw.yaml"
PLAN="$WORK/imagenet_train_gpu.plan"
LOG="${LOG:-$WORK/gpu_results.log}"

if [[ "${1:-}" != "--no-build" ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j"$NPROC" --target sluice sluice_make_dataset sluice_e2e_loader
fi
mkdir -p "$WORK"

# Dataset: regenerated only when its parameters change (same stamp as run.sh).
STAMP="images=$IMAGES classes=$CLASSES seed=$SEED"
if [[ "$(cat "$DATA/.params" 2>/dev/null)" != "$STAMP" ]]; then
  rm -rf "$DATA"
  echo "generating $IMAGES JPEGs in $CLASSES classes under $DATA/train" >&2
  "$BUILD/sluice_make_dataset" "$DATA/train" --images "$IMAGES" --classes "$CLASSES" \
    --seed "$SEED" >&2
  echo "$STAMP" >"$DATA/.params"
fi
find "$DATA/train" -type f -exec cat {} + >/dev/null  # warm the page cache

echo "profiling this machine (about ${PROFILE_SECONDS}s)" >&2
"$BUILD/sluice" profile -o "$HW" --data "$DATA/train" --seconds "$PROFILE_SECONDS" >&2
if ! grep -q '^gpu:' "$HW"; then
  echo "error: the profile has no gpu section although nvidia-smi lists $GPU_NAME;" \
    "the CUDA driver is not usable by Sluice (see $HW and sluice profile's stderr)" >&2
  exit 1
fi
"$BUILD/sluice" compile examples/imagenet_train.yaml -o "$PLAN" --profile "$HW" \
  --cpu-budget "$CPU_BUDGET" >&2
PLACED="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["placement"]["device"])' \
  "$PLAN/plan.json")"
if [[ "$PLACED" != cuda* ]]; then
  echo "error: the cost model kept the plan on '$PLACED' at --cpu-budget $CPU_BUDGET;" \
    "see $PLAN/report.txt (placement) — try CPU_BUDGET=1" >&2
  exit 1
fi

{
  echo "# $(date -u +%FT%TZ) $(uname -srm); $NPROC CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "# GPU: $GPU_NAME ($GPU_MEM, driver $GPU_DRIVER); plan placed on $PLACED at --cpu-budget $CPU_BUDGET"
  echo "# threads=[$THREADS] images=$IMAGES rounds=$ROUNDS batches=$BATCHES warmup=$WARMUP batch=256"
} >"$LOG"

run_one() {  # DEVICE THREADS -> appends "RESULT path=DEVICE threads=T images_per_s=X ..."
  local out
  out="$("$BUILD/sluice_e2e_loader" "$PLAN" "$DATA" --threads "$2" --batches "$BATCHES" \
    --warmup "$WARMUP" --device "$1")"
  local line
  line="$(grep '^RESULT' <<<"$out")"
  echo "$line path=$1" | tee -a "$LOG" >&2
}

for ((round = 1; round <= ROUNDS; ++round)); do
  echo "round $round/$ROUNDS (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  for t in $THREADS; do
    run_one cuda "$t"
    run_one cpu "$t"
  done
done

median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
rate() {  # PATH THREADS -> median images/s
  grep "^RESULT" "$LOG" | grep " path=$1\$" | grep " threads=$2 " |
    sed 's/.*images_per_s=\([0-9.]*\).*/\1/' | median
}

echo
grep '^#' "$LOG" | sed 's/^# //'
echo
echo "| CPU threads | CPU path images/s | GPU path images/s | GPU / CPU |"
echo "|---:|---:|---:|---:|"
for t in $THREADS; do
  c="$(rate cpu "$t")"
  g="$(rate cuda "$t")"
  awk -v t="$t" -v c="$c" -v g="$g" \
    'BEGIN {printf "| %d | %.0f | %.0f | %.2fx |\n", t, c, g, (c > 0 ? g / c : 0)}'
done
echo
echo "(medians of $ROUNDS interleaved rounds; $BATCHES timed batches of 256 after $WARMUP warm-up;"
echo " command: bench/e2e/gpu.sh; raw lines in $LOG)"
