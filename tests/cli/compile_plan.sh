#!/usr/bin/env bash
# `sluice compile SPEC -o DIR.plan` writes plan.json, kernels.so and report.txt;
# plan.json names the spec and its fusion groups; a second -o onto a file fails.
# Usage: compile_plan.sh SLUICE SPEC
set -euo pipefail
sluice=$1 spec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$sluice" compile "$spec" -o "$tmp/x.plan"
for f in plan.json kernels.so report.txt; do
  test -s "$tmp/x.plan/$f" || { echo "missing $f"; exit 1; }
done
grep -q '"format_version": 2' "$tmp/x.plan/plan.json" || { echo "no format_version"; exit 1; }
grep -q '"symbol": "sluice_chain_0"' "$tmp/x.plan/plan.json" || { echo "no fusion group"; exit 1; }
grep -q '^fusion groups: 1' "$tmp/x.plan/report.txt" || { echo "report lacks groups"; exit 1; }
nm -D "$tmp/x.plan/kernels.so" >"$tmp/symbols"  # a file, not a pipe: grep -q would SIGPIPE nm
grep -q ' T sluice_chain_0$' "$tmp/symbols" || { echo "kernel symbol missing"; exit 1; }
touch "$tmp/file"
if "$sluice" compile "$spec" -o "$tmp/file" 2>"$tmp/err"; then
  echo "-o onto a file should fail"; exit 1
fi
grep -q "is not a directory" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo ok
