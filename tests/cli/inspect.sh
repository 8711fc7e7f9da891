#!/bin/bash
# `sluice inspect`: --data on a generated image folder with a corrupt and a
# truncated file (JSON parsed and checked; text; progress only on a terminal;
# SLUICE_LOG), and PLAN (text and JSON: variables, fusion groups, placement
# alternatives, the kernels.so check).
#   inspect.sh SLUICE MAKE_DATASET SPEC PROFILE
set -euo pipefail
sluice=$1 make_dataset=$2 spec=$3 profile=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$make_dataset" "$tmp/data" --images 30 --classes 3 --seed 9 >/dev/null
class=$(ls "$tmp/data" | head -n1)
echo "this is not an image" >"$tmp/data/$class/zz_corrupt.jpg"
good=$(ls "$tmp/data/$class"/*.JPEG | head -n1)
head -c 1500 "$good" >"$tmp/data/$class/zz_truncated.jpg"  # header intact, data cut

# --json, not a terminal: a JSON object on stdout, nothing on stderr.
"$sluice" inspect --data "$tmp/data" --json --profile "$profile" >"$tmp/scan.json" 2>"$tmp/err" ||
  { cat "$tmp/err"; fail "inspect --data --json"; }
test ! -s "$tmp/err" || { cat "$tmp/err"; fail "stderr not quiet when it is not a terminal"; }
python3 - "$tmp/scan.json" <<'PY' || fail "scan JSON"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["samples"] == 32, s["samples"]
assert s["formats"] == {"jpeg": 31, "other": 1}, s["formats"]
assert sum(c["count"] for c in s["classes"]) == 32
assert len(s["classes"]) == 3 and all("name" in c for c in s["classes"]), s["classes"]
assert [b["name"].rsplit("/", 1)[-1] for b in s["bad"]] == ["zz_corrupt.jpg"], s["bad"]
assert s["width"]["stats"]["n"] == 31                      # headers: the truncated one too
assert sum(r["count"] for r in s["width"]["histogram"]) == 31
assert sum(r["count"] for r in s["file_bytes"]["histogram"]) == 32
assert s["width"]["stats"]["min"] > 0 and s["height"]["stats"]["max"] >= s["height"]["stats"]["min"]
assert s["decode_cost"]["core_seconds"] > 0 and s["decode_cost"]["ms_per_image"] > 0, s["decode_cost"]
PY
# --decode: the truncated file is found too.
"$sluice" inspect --data "$tmp/data" --json --decode >"$tmp/scan2.json" 2>/dev/null || fail "--decode"
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); b=[x['name'].rsplit('/',1)[-1] for x in s['bad']]; \
assert b==['zz_corrupt.jpg','zz_truncated.jpg'], b; assert s['decode_cost'] is None" "$tmp/scan2.json" ||
  fail "--decode JSON"
# Text.
"$sluice" inspect --data "$tmp/data" >"$tmp/scan.txt" 2>/dev/null || fail "inspect --data"
grep -q '^samples: 32 ' "$tmp/scan.txt" || { cat "$tmp/scan.txt"; fail "text samples"; }
grep -q '^bad samples: 1 ' "$tmp/scan.txt" || { cat "$tmp/scan.txt"; fail "text bad samples"; }
grep -q 'zz_corrupt.jpg: decode: neither JPEG nor PNG' "$tmp/scan.txt" || fail "text lists the bad file"
grep -q '^classes: 3 ' "$tmp/scan.txt" || { cat "$tmp/scan.txt"; fail "text classes"; }
# A terminal (script(1) gives it a pty): the progress bar.
script -qec "\"$sluice\" inspect --data \"$tmp/data\" --threads 1" /dev/null >"$tmp/tty.out" ||
  fail "inspect on a pty"
grep -q 'inspect \[#*\] 32/32 samples' "$tmp/tty.out" || { cat "$tmp/tty.out"; fail "progress on a tty"; }
# SLUICE_LOG: debug shows the debug line, the default does not; a bad value is reported.
SLUICE_LOG=debug "$sluice" inspect --data "$tmp/data" >/dev/null 2>"$tmp/err" || fail "SLUICE_LOG=debug"
grep -q '^sluice: debug: inspect: scanned 32 samples' "$tmp/err" || { cat "$tmp/err"; fail "debug line"; }
SLUICE_LOG=loud "$sluice" inspect --data "$tmp/data" >/dev/null 2>"$tmp/err" || fail "SLUICE_LOG=loud"
grep -q '^sluice: warning: SLUICE_LOG=loud is not debug, info or warn' "$tmp/err" ||
  { cat "$tmp/err"; fail "bad SLUICE_LOG reported"; }
grep -q 'debug:' "$tmp/err" && fail "debug line at the default level"

# A plan.
"$sluice" compile "$spec" -o "$tmp/p.plan" --profile "$profile" 2>"$tmp/err" || fail "compile"
# compile's progress (elapsed time past 1 s) is for terminals only: stderr holds just its summary.
test "$(wc -l <"$tmp/err")" -eq 1 && grep -q '^wrote ' "$tmp/err" || { cat -v "$tmp/err"; fail "compile stderr"; }
"$sluice" inspect "$tmp/p.plan" >"$tmp/plan.txt" 2>"$tmp/err" || { cat "$tmp/err"; fail "inspect PLAN"; }
for want in '^variables to bind: DATA (source.params.path)' '^fusion groups: 1' \
            'random_resized_crop -> random_flip -> normalize -> layout' '^placement: cpu' \
            'alternatives considered' '^    \* all on cpu' ': matches$' '^tuned: no'; do
  grep -q "$want" "$tmp/plan.txt" || { cat "$tmp/plan.txt"; fail "plan text lacks $want"; }
done
"$sluice" inspect "$tmp/p.plan" --json >"$tmp/plan.json" || fail "inspect PLAN --json"
python3 - "$tmp/plan.json" <<'PY' || fail "plan JSON"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["variables"] == [{"name": "DATA", "in": "source.params.path"}], p["variables"]
assert p["kernels_check"]["ok"] is True
d = p["document"]
assert len(d["fusion_groups"]) == 1 and d["placement"]["alternatives"][0]["chosen"] is True
assert d["graph"]["nodes"] and d["kernels"]["cpu_targets"]
PY
echo garbage >>"$tmp/p.plan/kernels.so"
"$sluice" inspect "$tmp/p.plan" --json | python3 -c "import json,sys; assert json.load(sys.stdin)['kernels_check']['ok'] is False" ||
  fail "a damaged kernels.so is reported"

# Usage errors exit 2.
set +e
"$sluice" inspect >/dev/null 2>&1; test $? -eq 2 || fail "no argument should exit 2"
"$sluice" inspect "$tmp/p.plan" --decode >/dev/null 2>&1; test $? -eq 2 || fail "--decode on a plan should exit 2"
"$sluice" inspect --data "$tmp/data" --bogus >/dev/null 2>&1; test $? -eq 2 || fail "unknown option should exit 2"
"$sluice" inspect "$tmp/nope.plan" >/dev/null 2>&1; test $? -eq 1 || fail "missing plan should exit 1"
set -e
echo "cli.inspect: OK"
