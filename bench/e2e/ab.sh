#!/usr/bin/env bash
# A/B end-to-end benchmark of two Sluice builds on the same data (for example
# the tree before and after a refactor): each build compiles
# examples/imagenet_train.yaml with its own `sluice`, then the two builds'
# sluice_e2e_loader runs alternate (A, B, A, B, ...) on the same files and the
# same thread count, so machine noise hits both alike. Prints each run, the
# medians and the ratio B / A. Not a test: exit 0 whether or not B is faster.
#
#   bench/e2e/ab.sh BUILD_A BUILD_B
#
# Each BUILD_* must hold sluice and sluice_e2e_loader (BUILD_A also
# sluice_make_dataset). Environment (defaults in brackets):
#   THREADS [nproc]  WARMUP [THREADS]  BATCHES [4*THREADS]  ROUNDS [7]
#   IMAGES [(WARMUP+BATCHES+1)*256]  WORK [/tmp/sluice-ab]
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
A="${1:?usage: bench/e2e/ab.sh BUILD_A BUILD_B}"
B="${2:?usage: bench/e2e/ab.sh BUILD_A BUILD_B}"
THREADS="${THREADS:-$(nproc)}"
WARMUP="${WARMUP:-$THREADS}"
BATCHES="${BATCHES:-$((4 * THREADS))}"
ROUNDS="${ROUNDS:-7}"
IMAGES="${IMAGES:-$(((WARMUP + BATCHES + 1) * 256))}"
WORK="${WORK:-/tmp/sluice-ab}"
DATA="$WORK/data"
mkdir -p "$WORK"

if [[ "$(cat "$DATA/.params" 2>/dev/null)" != "images=$IMAGES" ]]; then
  rm -rf "$DATA"
  "$A/sluice_make_dataset" "$DATA/train" --images "$IMAGES" --classes 10 --seed 1 >&2
  echo "images=$IMAGES" >"$DATA/.params"
fi
for side in A B; do
  build="${!side}"
  rm -rf "$WORK/$side.plan"
  "$build/sluice" compile examples/imagenet_train.yaml -o "$WORK/$side.plan" >/dev/null
done
find "$DATA/train" -type f -exec cat {} + >/dev/null  # warm the page cache

echo "# $(date -u +%FT%TZ) $(nproc) CPUs; threads=$THREADS images=$IMAGES batches=$BATCHES" \
  "warmup=$WARMUP rounds=$ROUNDS; A=$A B=$B"
for ((round = 1; round <= ROUNDS; ++round)); do
  for side in A B; do
    build="${!side}"
    line=$("$build/sluice_e2e_loader" "$WORK/$side.plan" "$DATA" --threads "$THREADS" \
      --batches "$BATCHES" --warmup "$WARMUP" | grep '^RESULT')
    echo "$side $round $line (load $(cut -d' ' -f1 /proc/loadavg))"
  done
done | tee "$WORK/ab.log"

python3 - "$WORK/ab.log" <<'EOF'
import statistics, sys
rates = {"A": [], "B": []}
for line in open(sys.argv[1]):
    side = line.split()[0]
    for field in line.split():
        if field.startswith("images_per_s="):
            rates[side].append(float(field.split("=")[1]))
ma, mb = statistics.median(rates["A"]), statistics.median(rates["B"])
print(f"median images/s  A {ma:.1f}  B {mb:.1f}  B/A {mb / ma:.3f}")
print(f"range  A {min(rates['A']):.1f}-{max(rates['A']):.1f}  B {min(rates['B']):.1f}-{max(rates['B']):.1f}")
EOF
