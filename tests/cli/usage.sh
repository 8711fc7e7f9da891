#!/usr/bin/env bash
# The `sluice` command's own usage: `sluice VERB --help` (and -h) prints that
# verb's usage on stdout and exits 0 for every verb; `sluice help VERB` too; a
# mistyped command exits 2 suggesting the nearest one; an error that carries
# a spec's rendered diagnostics (inspect --data, pack) says "error:" once per
# diagnostic, not "error: FILE:L:C: error: ...".
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
echo "cli.usage: OK"
