#!/usr/bin/env bash
# Shards against folders (issue 15 item 6): the same JPEGs read as an
# image_folder, as tar_shards written by `sluice pack`, and as tar_shards
# written by `sluice pack --max-side 512`, all through the ImageNet train spec
# (examples/imagenet_train.yaml and its tar_shards twin), with a warm and with a
# cold page cache. The contenders are interleaved round by round (folder,
# shards, shards-512, warm then cold) so machine noise hits all alike; the
# summary gives medians and same-run ratios. A benchmark, not a test: exit 0
# whether or not the targets are met.
#
#   bench/shards/run.sh [--no-build]
#
# Cold cache: before each cold run, bench/shards/evict.py calls
# posix_fadvise(POSIX_FADV_DONTNEED) on every file of that contender's data
# (the kernel drops their clean pages; no root needed), and fincore(1) confirms
# how much of the data was still resident. A hypervisor below may still cache
# (this VM's virtual disk is served from the host's page cache), so "cold" here
# is not a cold disk.
#
# STORAGE=slowfs adds a third state, "slowfs": each round, each contender reads
# its data through bench/shards/slowfs.py, a read-only passthrough FUSE mount
# of the work directory that adds SLOW_OPEN_MS per open(), SLOW_READ_MS per read
# request and shares one SLOW_MBPS link among all reads (a network file system
# or cold disk). The mount is made fresh for each run (and its backing files
# evicted as above), so the run starts with no cached page, entry or attribute.
# shards_nopf reads the shards with `page_cache_prefetch: false` (no
# posix_fadvise WILLNEED of the announced members). shards_raw reads shards
# packed with --no-restart-markers (the source's JPEG bytes): shards against
# shards_raw is what pack's restart markers give, shards_raw against folder
# what the read path gives. Slow runs add
# shards_ss: the shards with
# `order: shard_shuffle` and a 1024-sample buffer. Needs /dev/fuse, root and
# python3-fusepy.
#
# Environment: BUILD [build-bench], THREADS [nproc], WARMUP [2], BATCHES [8],
#   IMAGES [(WARMUP+BATCHES+1)*256], CLASSES [10], SEED [1], ROUNDS [3],
#   SHARD_SIZE [64MB], LOG [$BUILD/shards/results.log], STORAGE [local|slowfs],
#   SLOW_OPEN_MS [1.5], SLOW_READ_MS [0.5], SLOW_MBPS [200]
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build-bench}"
THREADS="${THREADS:-$(nproc)}"
WARMUP="${WARMUP:-2}"
BATCHES="${BATCHES:-8}"
IMAGES="${IMAGES:-$(((WARMUP + BATCHES + 1) * 256))}"
CLASSES="${CLASSES:-10}"
SEED="${SEED:-1}"
ROUNDS="${ROUNDS:-3}"
SHARD_SIZE="${SHARD_SIZE:-64MB}"
STORAGE="${STORAGE:-local}"
SLOW_OPEN_MS="${SLOW_OPEN_MS:-1.5}"
SLOW_READ_MS="${SLOW_READ_MS:-0.5}"
SLOW_MBPS="${SLOW_MBPS:-200}"
WORK="$BUILD/shards"
MNT="$BUILD/shards_slowfs"
LOG="${LOG:-$WORK/results.log}"

if [[ "${1:-}" != "--no-build" ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j"$THREADS" --target sluice sluice_make_dataset sluice_e2e_loader
fi
mkdir -p "$WORK"

STAMP="images=$IMAGES classes=$CLASSES seed=$SEED shard_size=$SHARD_SIZE restart_markers=1"
if [[ "$(cat "$WORK/.params" 2>/dev/null)" != "$STAMP" ]]; then
  rm -rf "$WORK/folder" "$WORK/shards" "$WORK/shards512" "$WORK/shards_raw"
  "$BUILD/sluice_make_dataset" "$WORK/folder/train" --images "$IMAGES" --classes "$CLASSES" \
    --seed "$SEED" >&2
  "$BUILD/sluice" pack "$WORK/folder/train" -o "$WORK/shards" --shard-size "$SHARD_SIZE" >&2
  "$BUILD/sluice" pack "$WORK/folder/train" -o "$WORK/shards512" --shard-size "$SHARD_SIZE" \
    --max-side 512 >&2
  "$BUILD/sluice" pack "$WORK/folder/train" -o "$WORK/shards_raw" --shard-size "$SHARD_SIZE" \
    --no-restart-markers >&2
  echo "$STAMP" >"$WORK/.params"
fi
"$BUILD/sluice" compile examples/imagenet_train.yaml -o "$WORK/folder.plan" >&2
"$BUILD/sluice" compile examples/imagenet_train_shards.yaml -o "$WORK/shards.plan" >&2
# The same shards read with `order: shard_shuffle` (sequential within a shard,
# mixed through a buffer): the order docs/datasets.md advises for slow storage.
sed 's/^  order: shuffle$/  order: shard_shuffle\n  shuffle_buffer: 1024/' \
  examples/imagenet_train_shards.yaml >"$WORK/shards_ss.yaml"
grep -q 'order: shard_shuffle' "$WORK/shards_ss.yaml"
"$BUILD/sluice" compile "$WORK/shards_ss.yaml" -o "$WORK/shards_ss.plan" >&2
# The same shards without the page-cache prefetch (read on demand): what the
# prefetch of announced members gives, measured in the same run.
sed 's/^\(  path: .*\)$/\1\n  page_cache_prefetch: false/' \
  examples/imagenet_train_shards.yaml >"$WORK/shards_nopf.yaml"
grep -q 'page_cache_prefetch: false' "$WORK/shards_nopf.yaml"
"$BUILD/sluice" compile "$WORK/shards_nopf.yaml" -o "$WORK/shards_nopf.plan" >&2

# name plan data-dir files-dir
CONTENDERS=(
  "folder $WORK/folder.plan $WORK/folder $WORK/folder/train"
  "shards $WORK/shards.plan $WORK/shards $WORK/shards"
  "shards512 $WORK/shards.plan $WORK/shards512 $WORK/shards512"
  "shards_nopf $WORK/shards_nopf.plan $WORK/shards $WORK/shards"
  "shards_raw $WORK/shards.plan $WORK/shards_raw $WORK/shards_raw"
)
run() {  # name plan data cache
  "$BUILD/sluice_e2e_loader" "$2" "$3" --threads "$THREADS" --batches "$BATCHES" \
    --warmup "$WARMUP" --name "$1_$4" | grep '^RESULT' | tee -a "$LOG" >&2
}
slow_mount() {  # fresh slowfs mount of $WORK on $MNT
  mkdir -p "$MNT"
  /usr/bin/python3 bench/shards/slowfs.py "$WORK" "$MNT" --open-ms "$SLOW_OPEN_MS" \
    --read-ms "$SLOW_READ_MS" --mbps "$SLOW_MBPS" >"$BUILD/.slowfs.out" &
  for ((i = 0; i < 100; ++i)); do mountpoint -q "$MNT" && return 0; sleep 0.05; done
  echo "slowfs did not mount on $MNT" >&2
  return 1
}
slow_umount() {  # name: logs the daemon's request counts and CPU time
  umount "$MNT"
  wait
  sed "s/^SLOWFS /SLOWFS $1 /" "$BUILD/.slowfs.out" | tee -a "$LOG" >&2
}
trap 'mountpoint -q "$MNT" 2>/dev/null && umount "$MNT"' EXIT
{
  echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "# threads=$THREADS images=$IMAGES rounds=$ROUNDS batches=$BATCHES warmup=$WARMUP shard_size=$SHARD_SIZE"
  for d in folder/train shards shards512 shards_raw; do echo "# $d: $(du -sh "$WORK/$d" | cut -f1)"; done
  if [[ "$STORAGE" == slowfs ]]; then
    echo "# slowfs: open ${SLOW_OPEN_MS} ms, read ${SLOW_READ_MS} ms per request, ${SLOW_MBPS} MB/s shared; fresh mount per run"
  fi
} >"$LOG"
for ((round = 1; round <= ROUNDS; ++round)); do
  echo "round $round/$ROUNDS (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  echo "LOAD $(cut -d' ' -f1-3 /proc/loadavg)" >>"$LOG"
  for c in "${CONTENDERS[@]}"; do
    read -r name plan data files <<<"$c"
    find "$files" -type f -exec cat {} + >/dev/null  # warm
    run "$name" "$plan" "$data" warm
  done
  for c in "${CONTENDERS[@]}"; do
    read -r name plan data files <<<"$c"
    /usr/bin/python3 bench/shards/evict.py "$files" | tee -a "$LOG" >&2
    run "$name" "$plan" "$data" cold
  done
  [[ "$STORAGE" == slowfs ]] || continue
  for c in "${CONTENDERS[@]}" "shards_ss $WORK/shards_ss.plan $WORK/shards $WORK/shards"; do
    read -r name plan data files <<<"$c"
    /usr/bin/python3 bench/shards/evict.py "$files" | tee -a "$LOG" >&2
    slow_mount
    run "$name" "$plan" "$MNT/${data#"$WORK"/}" slowfs
    slow_umount "$name"
  done
done
/usr/bin/python3 bench/shards/summarize.py "$LOG"
