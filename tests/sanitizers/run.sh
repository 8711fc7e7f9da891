#!/bin/sh
# Runs the runtime tests (decode, sources and tar/, sampling, exec, loader, and
# remote/ with its loopback servers) under a sanitizer. Invoked by ctest (label `sanitizers`):
#   tests/sanitizers/run.sh SANITIZERS PATH/TO/sluice BUILD_DIR
# SANITIZERS: address, thread, undefined, or a comma-separated list of them.
# (ctest runs address,undefined and thread: two builds instead of three.)
# 1. configures BUILD_DIR with -DSLUICE_SANITIZE=$1 and builds only
#    sluice_runtime_tests there (no compiler, no Halide; build type Sanitize,
#    -O1 -g1: fast enough for CI);
# 2. compiles the loader tests' plans with the normal build's `sluice` (Halide
#    under the sanitizers would be slow; the kernels are generated code either way):
#    loader_test.yaml (fused) and reference_chain_test.yaml (reference chain);
# 3. runs the tests with SLUICE_TEST_PLAN / SLUICE_TEST_REFERENCE_PLAN pointing
#    at them.
set -eu
san="$1"
sluice="$2"
build="$3"
src="$(cd "$(dirname "$0")/../.." && pwd)"
jobs="${SLUICE_SANITIZER_JOBS:-2}"

cmake -S "$src" -B "$build" -DSLUICE_SANITIZE="$san" -DCMAKE_BUILD_TYPE=Sanitize >/dev/null
cmake --build "$build" --target sluice_runtime_tests -j "$jobs"

plan_dir="$(mktemp -d "${TMPDIR:-/tmp}/sluice_sanitize_XXXXXX")"
trap 'rm -rf "$plan_dir"' EXIT
"$sluice" compile "$src/tests/runtime/loader/loader_test.yaml" -o "$plan_dir/loader_test.plan"

"$sluice" compile "$src/tests/runtime/loader/reference_chain_test.yaml" \
  -o "$plan_dir/reference_chain_test.plan" >/dev/null

export SLUICE_TEST_PLAN="$plan_dir/loader_test.plan"
export SLUICE_TEST_REFERENCE_PLAN="$plan_dir/reference_chain_test.plan"
# Options per sanitizer in $san (a comma-separated list, as -fsanitize= takes).
for one in $(echo "$san" | tr ',' ' '); do
  case "$one" in
    address)
      # detect_leaks: the loader must free every pool buffer and scratch.
      export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:halt_on_error=1"
      ;;
    thread)
      export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$src/tests/sanitizers/tsan.supp"
      ;;
    undefined)
      # The build makes every check fatal (-fno-sanitize-recover=all); the
      # stack names the offending line.
      export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
      ;;
    *)
      echo "run.sh: unknown sanitizer '$one' (address, thread, undefined, or a comma-separated list)" >&2
      exit 2
      ;;
  esac
done
exec "$build/sluice_runtime_tests" --gtest_brief=1
