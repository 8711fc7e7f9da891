#!/usr/bin/env bash
# `sluice verify PLAN`: OK (exit 0) for a freshly compiled plan; exit 1 naming
# the problem for a damaged kernels.so, a broken plan.json, another format
# version, a memory section the loader refuses (out of bounds, overlapping) or
# no plan; exit 2 without a plan argument. Verify never loads
# kernels.so: a plan whose kernels.so is not a shared library at all, but
# whose hash in plan.json matches, verifies OK (and `sluice run` refuses it).
# Usage: verify_plan.sh SLUICE SPEC
set -euo pipefail
sluice=$1 spec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" "$tmp/err" 2>/dev/null; exit 1; }
# expect STATUS TEXT SLUICE-ARGS...: exit status STATUS and TEXT in the output.
expect() {
  local want=$1 text=$2; shift 2
  set +e
  "$sluice" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  set -e
  [ "$got" -eq "$want" ] || fail "sluice $* exited $got, expected $want"
  grep -qF -- "$text" "$tmp/out" "$tmp/err" || fail "sluice $*: no '$text' in its output"
}

"$sluice" compile "$spec" -o "$tmp/good.plan" >/dev/null
expect 0 "OK: plan \`$tmp/good.plan\`" verify "$tmp/good.plan"
expect 0 "kernels.so matches plan.json (fnv1a64:" verify "$tmp/good.plan"
expect 0 "load only plans you built or trust" verify "$tmp/good.plan"

cp -r "$tmp/good.plan" "$tmp/damaged.plan"
printf 'x' >>"$tmp/damaged.plan/kernels.so"
expect 1 "kernels.so does not match plan.json" verify "$tmp/damaged.plan"

cp -r "$tmp/good.plan" "$tmp/nokernels.plan"
rm "$tmp/nokernels.plan/kernels.so"
expect 1 "has no kernels.so" verify "$tmp/nokernels.plan"

cp -r "$tmp/good.plan" "$tmp/json.plan"
printf '{"format_version": 2,' >"$tmp/json.plan/plan.json"
expect 1 "plan.json is not valid JSON" verify "$tmp/json.plan"

cp -r "$tmp/good.plan" "$tmp/version.plan"
sed -i 's/"format_version": 2/"format_version": 999/' "$tmp/version.plan/plan.json"
expect 1 "has plan format version 999" verify "$tmp/version.plan"

# A memory section the loader refuses (a field outside the batch buffer, two
# fields on top of each other, a negative offset, another batch size, the
# staged layout out of bounds): verify names it, as the loader would.
memory_edit() {  # memory_edit NAME PYTHON-STATEMENT-ON-m
  cp -r "$tmp/good.plan" "$tmp/$1.plan"
  python3 - "$tmp/$1.plan/plan.json" "$2" <<'PY'
import json, sys
path = sys.argv[1]
doc = json.load(open(path))
m = doc["memory"]
exec(sys.argv[2])
json.dump(doc, open(path, "w"), indent=2)
PY
}
memory_edit small 'm["batch_bytes"] = 16'
expect 1 'plan.json "memory" places batch field `image` outside the 16-byte batch buffer' \
  verify "$tmp/small.plan"
memory_edit overlap 'm["fields"][1]["offset"] = 8'
expect 1 'plan.json "memory" overlaps two batch fields' verify "$tmp/overlap.plan"
memory_edit negative 'm["fields"][1]["offset"] = -8'
expect 1 'gives batch field `label` a negative offset' verify "$tmp/negative.plan"
memory_edit size 'm["batch_size"] = 512'
expect 1 'plan.json "memory" does not match the batch' verify "$tmp/size.plan"
memory_edit staged 'm["fields"][1]["staged_offset"] = m["staged_batch_bytes"]'
expect 1 '(GPU-staged layout) places batch field `label` outside' verify "$tmp/staged.plan"
memory_edit nomemory 'del doc["memory"]'
expect 1 'plan.json "memory" is missing' verify "$tmp/nomemory.plan"
# The loader refuses the same plan with the same words.
expect 1 'overlaps two batch fields' run "$tmp/overlap.plan" --var DATA=/nonexistent --batches 1

expect 1 "is not a directory" verify "$tmp/none.plan"
expect 2 "verify needs a plan" verify

# Not a shared library, but the hash in plan.json says it is the right file:
# verify checks and reports without dlopening it; run's dlopen then fails.
cp -r "$tmp/good.plan" "$tmp/fake.plan"
printf 'not an ELF file\n' >"$tmp/fake.plan/kernels.so"
hash=$(python3 -c '
import sys
h = 14695981039346656037
for b in open(sys.argv[1], "rb").read():
    h = ((h ^ b) * 1099511628211) % (1 << 64)
print("fnv1a64:%016x" % h)' "$tmp/fake.plan/kernels.so")
python3 - "$tmp/fake.plan/plan.json" "$hash" <<'PY'
import json, sys
path, new_hash = sys.argv[1], sys.argv[2]
doc = json.load(open(path))
doc["kernels"]["hash"] = new_hash
json.dump(doc, open(path, "w"), indent=2)
PY
expect 0 "kernels.so matches plan.json ($hash)" verify "$tmp/fake.plan"
expect 1 "kernels.so" run "$tmp/fake.plan" --var DATA=/nonexistent --batches 1
echo ok
