#!/usr/bin/env bash
# Golden IR test: compile SPEC and check the printed IR with FileCheck against
# the CHECK lines written in SPEC itself. A line "# EMIT: ir-after=PASS" picks
# the dump point; the default is --emit=ir (after every pass).
# Usage: run_golden.sh SLUICE FILECHECK SPEC
set -euo pipefail
sluice=$1 filecheck=$2 spec=$3
emit=$(sed -n 's/^# EMIT: *//p' "$spec" | head -n 1)
emit=${emit:-ir}
cd "$(dirname "$spec")"
"$sluice" compile "$(basename "$spec")" --emit="$emit" | "$filecheck" "$(basename "$spec")"
