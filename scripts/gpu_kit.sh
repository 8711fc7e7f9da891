#!/usr/bin/env bash
# Builds the GPU verification kit: one self-contained folder that verifies the
# GPU path on a bare CUDA machine (no compiler, Halide, LLVM or Debian packages
# there) with one command. docs/gpu.md says how to carry it to the device
# machine and run it.
#
#   scripts/gpu_kit.sh OUT_DIR [--no-build]
#
# OUT_DIR (replaced) then holds:
#   run_gpu_checks.sh LOG_DIR   the one command to run there (scripts/gpu_kit/run_gpu_checks.sh)
#   bin/   sluice (runtime-only: `sluice run`), sluice_gpu_tests, sluice_e2e_loader,
#          sluice_gpu_staging_bench (bench/micro/gpu_staging_bench.cc) — stripped,
#          none links Halide or LLVM; DT_RPATH $ORIGIN/../lib
#   lib/   the shared libraries they need besides glibc (libjpeg-turbo, oneTBB, yaml-cpp,
#          libstdc++, ...); the CUDA driver is the machine's own (dlopened libcuda.so.1)
#   plans/ compiled here: loader_test.plan (CPU), gpu_test.plan (its chain split for the
#          GPU; SplitForGpu; the same CPU targets, so the fallback's batches are identical), imagenet_train_gpu.plan (examples/imagenet_train.yaml, split
#          the same way) — kernels.so with CPU targets and CUDA (PTX for sm_80+)
#   kernels/cuda_test/  the CUDA kernel test's library (tests/compiler/codegen/
#          cuda_kernel_test.cc), compiled here by sluice_tests: CudaKernelTest checks
#          the CUDA kernels against the CPU kernel and the reference there
#   data/train/  a small generated image_folder (KIT_IMAGES JPEGs, default 256)
#   MANIFEST     what is inside and how it was built
# Environment: BUILD (build directory, default build), KIT_IMAGES.
# The folder must stay under 64 MiB (the device tool carries at most that);
# the script fails if it does not.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:?usage: scripts/gpu_kit.sh OUT_DIR [--no-build]}"
BUILD="${BUILD:-$ROOT/build}"
KIT_IMAGES="${KIT_IMAGES:-256}"
LIMIT_BYTES=$((64 * 1024 * 1024))

if [[ "${2:-}" != "--no-build" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target sluice sluice_make_dataset sluice_e2e_loader \
    sluice_gpu_tests sluice_runtime_cli sluice_make_gpu_plan sluice_gpu_staging_bench sluice_tests
fi
for b in sluice sluice_make_dataset sluice_e2e_loader sluice_gpu_tests sluice_runtime_cli \
  sluice_make_gpu_plan sluice_gpu_staging_bench sluice_tests; do
  [[ -x "$BUILD/$b" ]] || { echo "gpu_kit: $BUILD/$b is missing (build it first)" >&2; exit 1; }
done

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/plans" "$OUT/data"
OUT="$(cd "$OUT" && pwd)"

# Binaries: stripped copies; the runtime-only CLI is the kit's `sluice`.
cp "$BUILD/sluice_runtime_cli" "$OUT/bin/sluice"
cp "$BUILD/sluice_gpu_tests" "$BUILD/sluice_e2e_loader" "$BUILD/sluice_gpu_staging_bench" "$OUT/bin/"
strip --strip-debug "$OUT"/bin/*
for b in "$OUT"/bin/*; do
  if ldd "$b" | grep -qi -E 'halide|llvm'; then
    echo "gpu_kit: $b links Halide or LLVM" >&2
    exit 1
  fi
done

# Shared libraries: everything ldd resolves except glibc's own and the CUDA driver.
"$ROOT/scripts/bundle_libs.sh" "$OUT/lib" "$OUT"/bin/*

# Plans, compiled here (the device machine has no compiler).
"$BUILD/sluice" compile "$ROOT/tests/runtime/loader/loader_test.yaml" \
  -o "$OUT/plans/loader_test.plan" >/dev/null
"$BUILD/sluice_make_gpu_plan" "$ROOT/tests/runtime/loader/loader_test.yaml" \
  "$OUT/plans/gpu_test.plan"
"$BUILD/sluice_make_gpu_plan" "$ROOT/examples/imagenet_train.yaml" \
  "$OUT/plans/imagenet_train_gpu.plan"

# The CUDA kernel test's library (the kit's sluice_gpu_tests only loads it).
SLUICE_TEST_CUDA_KERNELS_DIR="$OUT/kernels/cuda_test" "$BUILD/sluice_tests" \
  --gtest_filter='CudaKernelTest.BuildsCudaSymbols' >"$OUT/cuda_test_build.log" 2>&1 ||
  { cat "$OUT/cuda_test_build.log" >&2; echo "gpu_kit: the CUDA test kernels did not build" >&2; exit 1; }
[[ -f "$OUT/kernels/cuda_test/kernels.so" ]] ||
  { echo "gpu_kit: no CUDA test kernels (this Halide has no NVPTX?)" >&2; exit 1; }
rm -f "$OUT/cuda_test_build.log"
strip --strip-unneeded "$OUT/kernels/cuda_test/kernels.so" 2>/dev/null || true

# A small generated dataset for the benchmark (the tests make their own).
"$BUILD/sluice_make_dataset" "$OUT/data/train" --images "$KIT_IMAGES" --classes 10 --seed 1 >/dev/null

cp "$ROOT/scripts/gpu_kit/run_gpu_checks.sh" "$OUT/run_gpu_checks.sh"
chmod +x "$OUT/run_gpu_checks.sh"
{
  echo "Sluice GPU verification kit"
  echo "built: $(date -u +%FT%TZ) from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')" \
    "on $(uname -srm)"
  echo "run:   ./run_gpu_checks.sh LOG_DIR   (docs/gpu.md)"
  echo "plans: $(cd "$OUT/plans" && echo *)"
  echo "cuda:  $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kernels"]["cuda_target"])' \
    "$OUT/plans/imagenet_train_gpu.plan/plan.json")"
  echo "data:  $KIT_IMAGES JPEGs in data/train"
  echo "libs:  $(cd "$OUT/lib" && echo *)"
} >"$OUT/MANIFEST"

bytes=$(du -sb "$OUT" | cut -f1)
echo "gpu_kit: $OUT: $((bytes / 1024 / 1024)) MiB ($bytes bytes)"
if ((bytes > LIMIT_BYTES)); then
  echo "gpu_kit: the kit is over 64 MiB; lower KIT_IMAGES" >&2
  exit 1
fi
