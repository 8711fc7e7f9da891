#!/usr/bin/env bash
# `sluice verify PLAN`: OK (exit 0) for a freshly compiled plan; exit 1 naming
# the problem for a damaged kernels.so, a broken plan.json, another format
# version or no plan; exit 2 without a plan argument. Verify never loads
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
