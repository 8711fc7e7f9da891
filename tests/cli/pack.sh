#!/usr/bin/env bash
# `sluice pack` end to end: 60 JPEGs packed twice (1 and 2 threads) into 64 KiB
# shards give byte-identical files; GNU tar lists the WebDataset members and
# sha256sum agrees with the manifest; --max-side rewrites the larger images;
# the shards run through `sluice run` with a tar_shards spec (shard_shuffle
# included): 15 full batches an epoch, no bad sample; usage errors exit 2,
# bad input 1.
# Usage: pack.sh SLUICE MAKE_DATASET SPEC
set -euo pipefail
sluice=$1 make_dataset=$2 spec=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$make_dataset" "$tmp/data" --images 60 --classes 3 --seed 5 >/dev/null

"$sluice" pack "$tmp/data" -o "$tmp/a" --shard-size 64k --threads 1 >"$tmp/out" 2>"$tmp/err" ||
  { cat "$tmp/err"; fail "pack"; }
grep -q '^packed 60 samples into [0-9]* shards' "$tmp/out" || { cat "$tmp/out"; fail "summary"; }
# Not a terminal: no progress bar, nothing on stderr at all.
test ! -s "$tmp/err" || { cat "$tmp/err"; fail "stderr not quiet when it is not a terminal"; }
# On a terminal (script(1) gives the command a pty): the bar, redrawn in place.
script -qec "\"$sluice\" pack \"$tmp/data\" -o \"$tmp/tty\" --threads 1" /dev/null >"$tmp/tty.out" ||
  fail "pack on a pty"
grep -q 'pack \[#*\] 60/60 samples' "$tmp/tty.out" || { cat "$tmp/tty.out"; fail "progress on a tty"; }
"$sluice" pack "$tmp/data" -o "$tmp/b" --shard-size 64KiB --threads 2 >/dev/null 2>&1 || fail "pack b"
(cd "$tmp/a" && sha256sum *) >"$tmp/a.sum"
(cd "$tmp/b" && sha256sum -c --quiet "$tmp/a.sum") || fail "threads changed the output"
ls "$tmp/a"/shard-000001.tar >/dev/null || fail "expected several shards"

# Other tools: GNU tar and sha256sum.
# (tar's output goes to files first: `tar | head` or `tar | grep -q` may kill
# tar with SIGPIPE, which pipefail turns into a failure.)
tar -tf "$tmp/a/shard-000000.tar" >"$tmp/members"
test "$(head -3 "$tmp/members" | tr '\n' ' ')" = '000000000.jpg 000000000.cls 000000000.json ' ||
  fail "members: $(head -3 "$tmp/members")"
python3 - "$tmp/a" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
assert m["samples"] == 60 and len(m["class_names"]) == 3, m
for s in m["shards"]:
    assert hashlib.sha256(open(os.path.join(d, s["name"]), "rb").read()).hexdigest() == s["sha256"]
assert sum(s["samples"] for s in m["shards"]) == 60
PY

# --max-side: make_dataset's images are 300-700 wide.
"$sluice" pack "$tmp/data" -o "$tmp/small" --max-side 256 --quality 80 >"$tmp/out" 2>/dev/null || fail "max-side"
grep -q '; 60 resized to max side 256' "$tmp/out" || { cat "$tmp/out"; fail "resized count"; }
tar -xOf "$tmp/small/shard-000000.tar" 000000000.json >"$tmp/meta.json"
grep -q '"resized"' "$tmp/meta.json" || fail "resized json"

# The shards through the loader: 60 samples, batch 4, every sample once.
sed -e 's/format: image_folder/format: tar_shards/' "$spec" >"$tmp/shards.yaml"
"$sluice" compile "$tmp/shards.yaml" -o "$tmp/shards.plan" >/dev/null 2>&1
"$sluice" run "$tmp/shards.plan" --var DATA="$tmp/a" --epochs 1 >"$tmp/run" 2>&1 ||
  { cat "$tmp/run"; fail "run"; }
grep -q '^batches: *15 x 4 samples' "$tmp/run" || { cat "$tmp/run"; fail "want 15 batches"; }
grep -q '^bad samples: *0 distinct' "$tmp/run" || { cat "$tmp/run"; fail "want no bad sample"; }
sed -e 's/format: image_folder/format: tar_shards/' -e 's/order: shuffle/order: shard_shuffle, shuffle_buffer: 8/' \
  "$spec" >"$tmp/ss.yaml"
"$sluice" compile "$tmp/ss.yaml" -o "$tmp/ss.plan" >/dev/null 2>&1
"$sluice" run "$tmp/ss.plan" --var DATA="$tmp/small" --epochs 2 >"$tmp/run" 2>&1 ||
  { cat "$tmp/run"; fail "run shard_shuffle"; }
grep -q '^batches: *30 x 4 samples' "$tmp/run" || { cat "$tmp/run"; fail "want 30 batches over 2 epochs"; }

# Errors: usage (2) and bad input (1).
set +e
"$sluice" pack "$tmp/data" >/dev/null 2>&1; test $? -eq 2 || fail "missing -o should exit 2"
"$sluice" pack "$tmp/data" -o "$tmp/x" --shard-size lots >/dev/null 2>&1; test $? -eq 2 || fail "bad size should exit 2"
"$sluice" pack "$tmp/data" -o "$tmp/a" >/dev/null 2>"$tmp/err"; test $? -eq 1 || fail "non-empty out should exit 1"
grep -q 'not empty' "$tmp/err" || fail "non-empty message"
echo "pack: ok"
