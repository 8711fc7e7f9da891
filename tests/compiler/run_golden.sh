#!/usr/bin/env bash
# Golden IR test: compile SPEC and check the printed IR with FileCheck against
# the CHECK lines written in SPEC itself. A line "# EMIT: ir-after=PASS" picks
# the dump point; the default is --emit=ir (after every pass). With
# "# EMIT: spec" the emitted spec must also round-trip: compiling it again
# gives the same text.
# Usage: run_golden.sh SLUICE FILECHECK SPEC
set -euo pipefail
sluice=$1 filecheck=$2 spec=$3
emit=$(sed -n 's/^# EMIT: *//p' "$spec" | head -n 1)
emit=${emit:-ir}
cd "$(dirname "$spec")"
out=$("$sluice" compile "$(basename "$spec")" --emit="$emit")
echo "$out" | "$filecheck" "$(basename "$spec")"
if [ "$emit" = spec ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "$out" >"$tmp/emitted.yaml"
  again=$("$sluice" compile "$tmp/emitted.yaml" --emit=spec) || {
    echo "FAIL: the emitted spec does not compile:"; cat "$tmp/emitted.yaml"; exit 1; }
  if [ "$again" != "$out" ]; then
    echo "FAIL: the emitted spec does not round-trip"
    diff <(echo "$out") <(echo "$again") || true
    exit 1
  fi
fi
