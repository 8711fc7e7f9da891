#!/usr/bin/env bash
# ImageNet scale (issue 15 item 4): time to first batch and RSS at 1.28M samples,
# for an image_folder and for the same samples as tar shards, through the
# ImageNet train spec. Built cheaply from BASE real JPEGs:
#   folder: CLASSES class folders, each holding BASE hard links to the JPEGs
#           (CLASSES * BASE directory entries, no extra data);
#   shards: one shard packed from the JPEGs by `sluice pack`, hard-linked as
#           shard-000000.tar ... (CLASSES names); tar_shards scans them once
#           and caches its index (that first open is timed separately).
# Runs are interleaved over ROUNDS with a warm page cache; RESULT lines carry
# first_batch_s (process start to first batch, Plan::Load included) and
# first_batch_rss_mb.
#
#   bench/shards/scale.sh [--no-build]
#
# Environment: BUILD [build-bench], THREADS [nproc], BASE [1280], CLASSES [1000],
#   ROUNDS [3], LOG [$BUILD/scale/results.log]
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build-bench}"
THREADS="${THREADS:-$(nproc)}"
BASE="${BASE:-1280}"
CLASSES="${CLASSES:-1000}"
ROUNDS="${ROUNDS:-3}"
WORK="$BUILD/scale"
LOG="${LOG:-$WORK/results.log}"

if [[ "${1:-}" != "--no-build" ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j"$THREADS" --target sluice sluice_make_dataset sluice_e2e_loader
fi
mkdir -p "$WORK"

STAMP="base=$BASE classes=$CLASSES"
if [[ "$(cat "$WORK/.params" 2>/dev/null)" != "$STAMP" ]]; then
  rm -rf "$WORK/base" "$WORK/one" "$WORK/folder" "$WORK/shards"
  "$BUILD/sluice_make_dataset" "$WORK/base" --images "$BASE" --classes 1 --seed 7 >&2
  "$BUILD/sluice" pack "$WORK/base" -o "$WORK/one" --shard-size 100GB >&2
  echo "linking $((BASE * CLASSES)) folder entries and $CLASSES shards" >&2
  /usr/bin/python3 - "$WORK" "$CLASSES" <<'PY'
import os, sys
work, classes = sys.argv[1], int(sys.argv[2])
base_dir = os.path.join(work, "base", "c0000")
images = sorted(os.listdir(base_dir))
for c in range(classes):
    d = os.path.join(work, "folder", "train", f"n{c:08d}")
    os.makedirs(d)
    for name in images:
        os.link(os.path.join(base_dir, name), os.path.join(d, name))
os.makedirs(os.path.join(work, "shards"))
for c in range(classes):
    os.link(os.path.join(work, "one", "shard-000000.tar"),
            os.path.join(work, "shards", f"shard-{c:06d}.tar"))
PY
  echo "$STAMP" >"$WORK/.params"
fi
"$BUILD/sluice" compile examples/imagenet_train.yaml -o "$WORK/folder.plan" >&2
"$BUILD/sluice" compile examples/imagenet_train_shards.yaml -o "$WORK/shards.plan" >&2
cat "$WORK/base"/*/* "$WORK/one"/*.tar >/dev/null  # every link shares these pages

run() {  # name plan data
  "$BUILD/sluice_e2e_loader" "$2" "$3" --threads "$THREADS" --batches 1 --warmup 1 \
    --name "$1" | grep '^RESULT' | tee -a "$LOG" >&2
}
{
  echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "# samples=$((BASE * CLASSES)) (base=$BASE x classes=$CLASSES) threads=$THREADS rounds=$ROUNDS"
} >"$LOG"
# The first tar_shards open scans the shards and caches the index.
rm -f "$WORK/shards"/*.sluice* "$WORK/shards"/.sluice* 2>/dev/null || true
/usr/bin/time -f "INDEX_BUILD wall_s=%e max_rss_kb=%M" -a -o "$LOG" \
  "$BUILD/sluice_e2e_loader" "$WORK/shards.plan" "$WORK/shards" --threads "$THREADS" \
  --batches 1 --warmup 1 --name shards_index_build | grep '^RESULT' | tee -a "$LOG" >&2
for ((round = 1; round <= ROUNDS; ++round)); do
  echo "round $round/$ROUNDS" >&2
  echo "LOAD $(cut -d' ' -f1-3 /proc/loadavg)" >>"$LOG"
  run folder "$WORK/folder.plan" "$WORK/folder"
  run shards "$WORK/shards.plan" "$WORK/shards"
done
grep "^INDEX_BUILD" "$LOG" >&2
/usr/bin/python3 bench/shards/summarize.py --first-batch "$LOG"
