#!/usr/bin/env bash
# `sluice pack --max-side` throughput: the same folder packed by one or more
# `sluice` binaries (e.g. before and after a change), interleaved round by
# round so that machine noise hits all alike; prints each binary's images/s
# (median over the rounds, and the range) and whether the shards are byte for
# byte the same. A benchmark, not a test.
#
#   bench/pack/run.sh SLUICE_BIN [SLUICE_BIN ...]
#
# Environment: DATA [build/shards/folder/train, as bench/shards/run.sh makes
#   it], MAX_SIDE [256], THREADS [nproc], ROUNDS [5], OUT [/tmp/sluice-pack-bench]
set -euo pipefail

DATA="${DATA:-build/shards/folder/train}"
MAX_SIDE="${MAX_SIDE:-256}"
THREADS="${THREADS:-$(nproc)}"
ROUNDS="${ROUNDS:-5}"
OUT="${OUT:-/tmp/sluice-pack-bench}"
[[ $# -ge 1 ]] || { echo "usage: bench/pack/run.sh SLUICE_BIN [SLUICE_BIN ...]" >&2; exit 2; }
[[ -d "$DATA" ]] || { echo "bench/pack: no folder $DATA (run bench/shards/run.sh, or set DATA)" >&2; exit 1; }
images=$(find -L "$DATA" -type f | wc -l)
echo "# $(date -u +%FT%TZ) $(nproc) CPUs; $images images in $DATA; --max-side $MAX_SIDE --threads $THREADS; $ROUNDS rounds"
declare -A rates sums
for ((round = 1; round <= ROUNDS; ++round)); do
  for ((b = 1; b <= $#; ++b)); do
    bin="${!b}"
    rm -rf "$OUT/$b"
    start=$(date +%s.%N)
    "$bin" pack "$DATA" -o "$OUT/$b" --max-side "$MAX_SIDE" --threads "$THREADS" >/dev/null 2>&1
    end=$(date +%s.%N)
    rate=$(/usr/bin/python3 -c "print(f'{$images / ($end - $start):.1f}')")
    rates[$b]+="$rate "
    sums[$b]=$(cat "$OUT/$b"/shard-*.tar | sha256sum | cut -c1-16)
    echo "RESULT bin=$bin round=$round images_per_s=$rate shards_sha256=${sums[$b]}"
  done
done
for ((b = 1; b <= $#; ++b)); do
  /usr/bin/python3 - "${!b}" "${sums[$b]}" ${rates[$b]} <<'PY'
import statistics, sys
name, digest, *rates = sys.argv[1:]
r = [float(x) for x in rates]
print(f"{name}: {statistics.median(r):.1f} images/s median ({min(r):.1f}-{max(r):.1f}); shards {digest}")
PY
done
