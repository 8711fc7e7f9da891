#!/usr/bin/env bash
# CI test of the GPU kit (scripts/gpu_kit.sh; ctest gpu_kit.self_contained):
#   tests/scripts/gpu_kit_test.sh BUILD_DIR
# 1. builds the kit from BUILD_DIR's binaries (no rebuild) and checks its size;
# 2. moves it elsewhere (as the device tool carries it) and checks, with ldd in
#    an empty environment, that every library its binaries need resolves inside
#    the kit, except glibc's own and none linking Halide or LLVM;
# 3. runs run_gpu_checks.sh with `env -i` (LD_LIBRARY_PATH empty): without a GPU
#    the GPU tests skip, the fallback checks pass, and the summary says so.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "${1:?usage: gpu_kit_test.sh BUILD_DIR}" && pwd)"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/sluice_gpu_kit_XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

BUILD="$BUILD" KIT_IMAGES=256 "$ROOT/scripts/gpu_kit.sh" "$TMP/built" --no-build
mv "$TMP/built" "$TMP/carried"
KIT="$TMP/carried"

fail() { echo "gpu_kit_test: FAIL: $*" >&2; exit 1; }
for b in "$KIT"/bin/*; do
  deps="$(env -i LD_LIBRARY_PATH= /usr/bin/ldd "$b")"
  if grep -q 'not found' <<<"$deps"; then fail "$b: unresolved libraries: $deps"; fi
  while read -r name path; do
    case "$name" in
      linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
      *) path="$(realpath "$path")"
         [[ "$path" == "$KIT/lib/"* ]] || fail "$b: $name resolves to $path, outside the kit" ;;
    esac
  done < <(awk '/=> \// {print $1, $3}' <<<"$deps")
  if grep -qi -E 'halide|llvm' <<<"$deps"; then fail "$b links Halide or LLVM"; fi
done
echo "gpu_kit_test: every binary resolves its libraries inside the kit"

set +e
env -i PATH=/usr/bin:/bin HOME="$TMP" LD_LIBRARY_PATH= BENCH_THREADS=1 BENCH_ROUNDS=1 \
  BENCH_BATCHES=1 BENCH_WARMUP=1 "$KIT/run_gpu_checks.sh" "$TMP/logs" | tee "$TMP/out.txt"
rc=${PIPESTATUS[0]}
set -e
((rc == 0)) || fail "run_gpu_checks.sh exited $rc"
tail -n 8 "$TMP/out.txt" | grep -q '^| GPU test suite *| PASS' || fail "no passing GPU test suite row"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  # No GPU here: the device tests skipped and the fallback checks ran.
  grep -q 'SKIPPED' "$TMP/logs/gpu_tests.log" || fail "the GPU tests did not skip without a GPU"
  grep -q '^\[       OK \] GpuStageFallbackTest.NoDeviceWarnsAndMatchesCpuPlan' \
    "$TMP/logs/gpu_tests.log" || fail "the fallback test did not pass"
  grep -q '^\[       OK \] CudaKernelTest.BuildsCudaSymbols' "$TMP/logs/gpu_tests.log" ||
    fail "the kit's CUDA test kernels did not load"
  grep -q 'fell back to the CPU with the warning' "$TMP/out.txt" || fail "no CPU fallback in sluice run"
  grep -q 'refused with a clear error' "$TMP/out.txt" || fail "forced cuda was not refused"
fi
echo "gpu_kit_test: PASS"
