#!/usr/bin/env bash
# `sluice compile SPEC -o DIR.plan` writes plan.json, kernels.so and report.txt;
# plan.json names the spec and its fusion groups; a second -o onto a file fails.
# Concurrent compiles into one -o all succeed and leave a plan that verifies; a
# compile whose code generation fails (a linker that fails) leaves the previous
# plan as it was; a directory with other files keeps them; nothing is left
# behind (staging directories, kernels.build).
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

# Three compiles into one existing plan at once.
pids=()
for i in 1 2 3; do
  "$sluice" compile "$spec" -o "$tmp/x.plan" >"$tmp/concurrent$i" 2>&1 & pids+=($!)
done
for i in 1 2 3; do
  wait "${pids[$((i - 1))]}" || { echo "concurrent compile $i failed:"; cat "$tmp/concurrent$i"; exit 1; }
done
"$sluice" verify "$tmp/x.plan" >"$tmp/verify" || { cat "$tmp/verify"; exit 1; }
test "$(ls -A "$tmp/x.plan" | tr '\n' ' ')" = "kernels.so plan.json report.txt " ||
  { echo "x.plan holds more than a plan:"; ls -A "$tmp/x.plan"; exit 1; }
test "$(ls -A "$tmp" | grep -c plan)" = 1 || { echo "staging left behind:"; ls -A "$tmp"; exit 1; }

# A failing linker: the compile fails, the previous plan is untouched.
mkdir "$tmp/bin"
printf '#!/bin/sh\necho fake linker failure >&2\nexit 1\n' >"$tmp/bin/c++"
chmod +x "$tmp/bin/c++"
md5sum "$tmp/x.plan"/* >"$tmp/before"
if PATH="$tmp/bin:$PATH" "$sluice" compile "$spec" -o "$tmp/x.plan" 2>"$tmp/err"; then
  echo "a compile with a failing linker should fail"; exit 1
fi
grep -q "fake linker failure" "$tmp/err" || { cat "$tmp/err"; exit 1; }
md5sum "$tmp/x.plan"/* | cmp -s - "$tmp/before" || { echo "the failed compile changed x.plan"; exit 1; }
test "$(ls -A "$tmp/x.plan" | tr '\n' ' ')" = "kernels.so plan.json report.txt " ||
  { echo "the failed compile left files in x.plan:"; ls -A "$tmp/x.plan"; exit 1; }
test "$(ls -A "$tmp" | grep -c plan)" = 1 || { echo "staging left behind:"; ls -A "$tmp"; exit 1; }
"$sluice" verify "$tmp/x.plan" >"$tmp/verify" || { cat "$tmp/verify"; exit 1; }

# -o onto a directory with other files: the plan is written into it, the files stay.
mkdir "$tmp/mine" && echo notes >"$tmp/mine/notes.txt"
"$sluice" compile "$spec" -o "$tmp/mine" 2>/dev/null
test "$(cat "$tmp/mine/notes.txt")" = notes || { echo "notes.txt lost"; exit 1; }
"$sluice" verify "$tmp/mine" >"$tmp/verify" || { cat "$tmp/verify"; exit 1; }
echo ok
