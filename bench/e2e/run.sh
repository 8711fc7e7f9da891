#!/usr/bin/env bash
# End-to-end benchmark (issue 4 item 9): one command that builds what it needs,
# generates the dataset, and runs on the same files and the same core count
#   - the decode-only ceiling   (sluice_decode_ceiling: TurboJPEG, full size, files in RAM)
#   - Sluice                    (sluice_e2e_loader on examples/imagenet_train.yaml's plan)
#   - PyTorch DataLoader        (bench/e2e/torch_loader.py on Debian's /usr/bin/python3)
#   - DALI CPU pipeline         (bench/e2e/dali_loader.py, only if DALI_PYTHON imports nvidia.dali)
# interleaving the repetitions (round 1: ceiling, sluice, torch, dali; round 2: ...) so
# machine noise hits all alike, then prints a table of medians and ratios against the
# issue's targets. Benchmarks are not tests: the exit status is 0 whether or not the
# targets are met (non-zero only when something failed to build or run).
#
#   bench/e2e/run.sh [--no-build]
#
# Environment (defaults in brackets):
#   BUILD     build directory [build-bench]        THREADS  cores/workers/threads [nproc]
#   WARMUP    untimed batches per run [THREADS]    BATCHES  timed batches per run [4*THREADS]
#   IMAGES    dataset size [(WARMUP+BATCHES+1)*256, so a run stays within one epoch]
#   CLASSES   class folders [10]                   SEED     dataset seed [1]
#   ROUNDS    interleaved rounds [3]
# WARMUP and BATCHES should be multiples of THREADS: PyTorch's workers each build
# a whole batch, so they finish in groups of THREADS; timing a partial group
# would credit PyTorch with work done before the clock started (or not yet done).
#   PYTHON    interpreter with torch [/usr/bin/python3]
#   DALI_PYTHON  interpreter with nvidia.dali [unset: DALI skipped]
#   SLUICE_DCT   1 = also run Sluice with --dct-scaling (an extra row; the targets
#                are checked on the default, bit-exact configuration) [0]
#   LOG       raw RESULT lines [$BUILD/e2e/results.log]
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build-bench}"
THREADS="${THREADS:-$(nproc)}"
WARMUP="${WARMUP:-$THREADS}"
BATCHES="${BATCHES:-$((4 * THREADS))}"
IMAGES="${IMAGES:-$(((WARMUP + BATCHES + 1) * 256))}"
CLASSES="${CLASSES:-10}"
ROUNDS="${ROUNDS:-3}"
if ((IMAGES < (WARMUP + BATCHES) * 256)); then
  echo "warning: $IMAGES images < (WARMUP + BATCHES) * 256: runs cross an epoch boundary" >&2
fi
SEED="${SEED:-1}"
PYTHON="${PYTHON:-/usr/bin/python3}"
DALI_PYTHON="${DALI_PYTHON:-}"
SLUICE_DCT="${SLUICE_DCT:-0}"
WORK="$BUILD/e2e"
DATA="$WORK/data"
PLAN="$WORK/imagenet_train.plan"
LOG="${LOG:-$WORK/results.log}"

if [[ "${1:-}" != "--no-build" ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j"$THREADS" --target sluice sluice_make_dataset \
    sluice_decode_ceiling sluice_e2e_loader
fi
mkdir -p "$WORK"

# Dataset: regenerated only when its parameters change.
STAMP="images=$IMAGES classes=$CLASSES seed=$SEED"
if [[ "$(cat "$DATA/.params" 2>/dev/null)" != "$STAMP" ]]; then
  rm -rf "$DATA"
  echo "generating $IMAGES JPEGs in $CLASSES classes under $DATA/train" >&2
  "$BUILD/sluice_make_dataset" "$DATA/train" --images "$IMAGES" --classes "$CLASSES" \
    --seed "$SEED" >&2
  echo "$STAMP" >"$DATA/.params"
fi
"$BUILD/sluice" compile examples/imagenet_train.yaml -o "$PLAN" >&2
# Warm the page cache so no contender pays for the first read from disk.
find "$DATA/train" -type f -exec cat {} + >/dev/null

DALI_OK=0
if [[ -n "$DALI_PYTHON" ]] && "$DALI_PYTHON" -c "import nvidia.dali" 2>/dev/null; then
  DALI_OK=1
fi

{
  echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "# threads=$THREADS images=$IMAGES classes=$CLASSES rounds=$ROUNDS batches=$BATCHES warmup=$WARMUP"
} >"$LOG"
for ((round = 1; round <= ROUNDS; ++round)); do
  echo "round $round/$ROUNDS (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  echo "LOAD $(cut -d' ' -f1-3 /proc/loadavg)" >>"$LOG"
  "$BUILD/sluice_decode_ceiling" "$DATA/train" --threads "$THREADS" --reps 1 |
    grep '^RESULT' | tee -a "$LOG" >&2
  "$BUILD/sluice_e2e_loader" "$PLAN" "$DATA" --threads "$THREADS" --batches "$BATCHES" \
    --warmup "$WARMUP" | grep '^RESULT' | tee -a "$LOG" >&2
  if [[ "$SLUICE_DCT" == 1 ]]; then
    "$BUILD/sluice_e2e_loader" "$PLAN" "$DATA" --threads "$THREADS" --batches "$BATCHES" \
      --warmup "$WARMUP" --dct-scaling | grep '^RESULT' | tee -a "$LOG" >&2
  fi
  "$PYTHON" bench/e2e/torch_loader.py "$DATA/train" --workers "$THREADS" \
    --batches "$BATCHES" --warmup "$WARMUP" | grep '^RESULT' | tee -a "$LOG" >&2
  if ((DALI_OK)); then
    "$DALI_PYTHON" bench/e2e/dali_loader.py "$DATA/train" --threads "$THREADS" \
      --batches "$BATCHES" --warmup "$WARMUP" 2>"$WORK/dali.err" | grep '^RESULT' |
      tee -a "$LOG" >&2 || echo "DALI failed (see $WORK/dali.err); no DALI row this round" >&2
  fi
done
echo "LOAD $(cut -d' ' -f1-3 /proc/loadavg)" >>"$LOG"

"$PYTHON" bench/e2e/summarize.py "$LOG"
