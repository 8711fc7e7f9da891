#!/usr/bin/env bash
# Error test: compiling SPEC must fail, and what the compiler prints on stderr
# must equal, line for line, the "# EXPECT: " lines written in SPEC.
# Usage: run_error.sh SLUICE SPEC
set -uo pipefail
sluice=$1 spec=$2
cd "$(dirname "$spec")"
name=$(basename "$spec")
expected=$(sed -n 's/^# EXPECT: \{0,1\}//p' "$name")
if [ -z "$expected" ]; then
  echo "FAIL: $name has no '# EXPECT:' lines"; exit 1
fi
actual=$("$sluice" compile "$name" --emit=ir 2>&1 >/dev/null)
status=$?
if [ $status -eq 0 ]; then
  echo "FAIL: $name compiled, but it should have failed with:"; echo "$expected"; exit 1
fi
if [ "$actual" != "$expected" ]; then
  echo "FAIL: $name: diagnostics differ"
  diff <(echo "$expected") <(echo "$actual") | sed 's/^</expected:/; s/^>/actual:  /'
  exit 1
fi
echo "ok: $name"
