#!/usr/bin/env bash
# The `sluice` command's own usage: `sluice VERB --help` (and -h) prints that
# verb's usage on stdout and exits 0 for every verb; `sluice help VERB` too; a
# mistyped command exits 2 suggesting the nearest one; an error that carries
# a spec's rendered diagnostics (inspect --data, pack) says "error:" once per
# diagnostic, not "error: FILE:L:C: error: ..."; cpu.cores in a profile and
# --cpu-budget above the loader's 4096 threads are refused up front.
# Usage: usage.sh SLUICE
set -uo pipefail
sluice=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" "$tmp/err" 2>/dev/null; exit 1; }

for verb in compile run profile tune pack inspect schema ops verify passes; do
  for flag in --help -h; do
    "$sluice" "$verb" "$flag" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 0 ] || fail "sluice $verb $flag exited $rc"
    head -1 "$tmp/out" | grep -q "^usage: sluice $verb" || fail "sluice $verb $flag: no usage line"
    [ -s "$tmp/err" ] && fail "sluice $verb $flag wrote to stderr"
  done
done
# After other arguments too, and through `sluice help VERB`.
"$sluice" run some.plan --batches 3 --help >"$tmp/out" 2>"$tmp/err" || fail "run PLAN --help"
grep -q -- "--bad-samples FILE" "$tmp/out" || fail "run --help does not describe run"
"$sluice" help inspect >"$tmp/out" 2>"$tmp/err" || fail "help inspect"
[ "$(grep -c '^  inspect \|^usage: sluice inspect' "$tmp/out")" -eq 2 ] ||
  fail "help inspect should show both inspect forms"
"$sluice" help help >"$tmp/out" 2>&1 || fail "help help"

"$sluice" complie x.yaml >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "a mistyped command should exit 2"
grep -q 'unknown command `complie`; did you mean `compile`?' "$tmp/err" || fail "no did-you-mean"
"$sluice" frobnicate >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "an unknown command should exit 2"
grep -q 'did you mean' "$tmp/err" && fail "a suggestion for a word nothing like a command"

# A spec with a YAML error given to inspect --data and pack: one "error:".
printf 'sluice: 1\nname: x\nsource: {format: image_folder, path: /tmp}\ngraph: [\n' >"$tmp/bad.yaml"
for cmd in "inspect --data $tmp/bad.yaml" "pack $tmp/bad.yaml -o $tmp/out.d"; do
  "$sluice" $cmd >"$tmp/out" 2>"$tmp/err"
  [ $? -eq 1 ] || fail "sluice $cmd should exit 1"
  grep -q "bad.yaml:5:1: error: invalid YAML" "$tmp/err" || fail "sluice $cmd: no diagnostic"
  grep -q "error: .*error:" "$tmp/err" && fail "sluice $cmd: error: said twice"
done
# CPU counts: a profile's cpu.cores and --cpu-budget are held to what the
# loader runs (4096 threads), where they are read, not only later by tune.
root=$(cd "$(dirname "$0")/../.." && pwd)
sed 's/^  cores: [0-9]*/  cores: 100000/' "$root/examples/profiles/debian-2core-vm.yaml" >"$tmp/big.yaml"
"$sluice" compile "$root/examples/imagenet_train.yaml" --profile "$tmp/big.yaml" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] || fail "a profile with cores: 100000 should be refused"
grep -q "big.yaml:[0-9]*:[0-9]*: error: \`cpu.cores\` must be at most 4096, got 100000" "$tmp/err" ||
  fail "no file:line:col error for cores: 100000"
"$sluice" tune some.plan --profile "$tmp/big.yaml" --cpu-budget 100000 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "tune --cpu-budget 100000 should be a usage error"
grep -q -- "--cpu-budget must be an integer in 1..4096" "$tmp/err" || fail "tune --cpu-budget"
"$sluice" compile "$root/examples/imagenet_train.yaml" --cpu-budget 4097 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "compile --cpu-budget 4097 should be a usage error"
echo "cli.usage: OK"
