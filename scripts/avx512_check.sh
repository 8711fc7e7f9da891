#!/bin/bash
# Runs the fused kernels' AVX-512 variant on an emulated AVX-512 CPU, for
# machines without one (this project's CI and dev machines are AVX2 only):
#
#   scripts/avx512_check.sh [BUILD_DIR]      (default: build; `make build` first)
#
# 1. sluice_tests builds the kernel tests' chains (tests/compiler/codegen/
#    kernel_fixture.h) for the AVX-512 target ALONE (no dispatcher, no
#    fallback: every instruction that runs is that variant's), and the
#    examples/imagenet_train.yaml plan with its default multitarget kernels.so.
# 2. scripts/avx512_vm.sh boots a Debian kernel under Bochs emulating a
#    Tiger Lake CPU (AVX-512 F/CD/BW/DQ/VL) and runs there:
#    - avx512_selftest.c: the instruction forms Bochs 2.7 gets wrong (patched by
#      avx512_vm.sh) give their documented results;
#    - sluice_kernel_check: the FusedKernelTest suite against the reference
#      implementations, on the AVX-512-only library;
#    - sluice_train_loop on that plan and a generated 256-image dataset: the
#      plan loader's CPU check and Halide's dispatcher pick the AVX-512 variant;
#      its printed means are compared with the same run on this machine.
# Not part of ctest/CI: it installs Debian packages (bochs, a kernel image) and
# takes tens of minutes (Bochs interprets every instruction).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$src/build}" && pwd)"
target=x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41
work="$(mktemp -d "${TMPDIR:-/tmp}/sluice_avx512_XXXXXX")"
trap 'rm -rf "$work"' EXIT

cmake --build "$build" --target sluice sluice_tests sluice_kernel_check sluice_train_loop \
  sluice_make_dataset -j "$(nproc)"

root="$work/root"  # the guest's files, at the same paths
mkdir -p "$root/opt/sluice" "$root/data"
echo "== building the test chains for $target only"
SLUICE_TEST_CPU_TARGET="$target" SLUICE_TEST_KERNELS_DIR="$root/kernels" \
  "$build/sluice_tests" --gtest_filter=FusedKernelTest.LibraryBuilds --gtest_brief=1
evex="$(objdump -d "$root/kernels/kernels.so" | grep -cE 'zmm|%k[1-7]|vpmov[dq][bw]|vpermt2' || true)"
echo "   kernels.so: $evex instructions that need AVX-512"
[ "$evex" -gt 0 ] || { echo "avx512_check: the library has no AVX-512 instructions" >&2; exit 1; }
"$src/scripts/avx512_vm.sh" --setup  # packages, kernel, patched Bochs (first use)

echo "== compiling examples/imagenet_train.yaml (default targets) and a dataset"
"$build/sluice" compile "$src/examples/imagenet_train.yaml" -o "$root/opt/sluice/train.plan"
"$build/sluice_make_dataset" "$root/data/train" --images 256 --classes 4 --seed 7 >/dev/null
host_means="$("$build/sluice_train_loop" "$root/opt/sluice/train.plan" "$root/data" 2 |
  grep 'mean activation')"

for exe in sluice_kernel_check sluice_train_loop; do
  strip -o "$root/opt/sluice/$exe" "$build/$exe"
done
gcc -O1 -mavx512f -mavx512bw -mavx512vl -mavx512dq "$src/scripts/avx512_selftest.c" \
  -o "$root/opt/sluice/avx512_selftest"

echo "== booting the emulated AVX-512 CPU (Bochs); this takes a while"
log="$work/guest.log"
set +e
"$src/scripts/avx512_vm.sh" "$root" '
  grep -o "avx512[a-z]*" /proc/cpuinfo | sort -u | tr "\n" " "; echo
  /opt/sluice/avx512_selftest || exit 1
  SLUICE_TEST_KERNELS_DIR=/kernels /opt/sluice/sluice_kernel_check --gtest_brief=1
  kernel_tests=$?
  /opt/sluice/sluice_train_loop /opt/sluice/train.plan /data 2 && exit $kernel_tests' 2048 |
  tee "$log"
guest_status=${PIPESTATUS[0]}
set -e

guest_means="$(grep 'mean activation' "$log" | tr -d '\r')"
echo "== this machine:     $(echo "$host_means" | tr '\n' ' ')"
echo "== emulated AVX-512: $(echo "$guest_means" | tr '\n' ' ')"
if [ "$guest_status" != 0 ]; then
  echo "avx512_check: FAILED in the guest (exit status $guest_status; see above)" >&2
  exit 1
fi
if [ "$guest_means" != "$host_means" ]; then
  echo "avx512_check: FAILED: the train loop's means differ from this machine's" >&2
  exit 1
fi
echo "avx512_check: OK"
