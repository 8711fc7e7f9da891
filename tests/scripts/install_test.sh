#!/bin/bash
# ctest install.find_package: `cmake --install` into a temporary prefix, then
# examples/cpp configured and built as a separate project against it
# (find_package(Sluice), Sluice::runtime), a plan compiled with the installed
# `sluice` and the example run on a generated dataset. Also checks that the
# prefix holds only include/sluice headers, and that the version in VERSION is
# the one the CLI and the package config report.
#   install_test.sh BUILD_DIR MAKE_DATASET
set -euo pipefail
build=$(cd "$1" && pwd) make_dataset=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
test -f "$prefix/include/sluice/sluice.h" || fail "no include/sluice/sluice.h"
test -f "$prefix/include/sluice/types.h" || fail "no include/sluice/types.h"
test ! -e "$prefix/include/sluice/compiler.h" || fail "compiler.h installed without its library"
test -f "$prefix/lib/cmake/Sluice/SluiceConfig.cmake" || fail "no SluiceConfig.cmake"
test -f "$prefix/lib/cmake/Sluice/SluiceConfigVersion.cmake" || fail "no SluiceConfigVersion.cmake"
ls "$prefix"/lib/libsluice.so* >/dev/null || fail "no libsluice.so"
test -x "$prefix/bin/sluice" || fail "no bin/sluice"
others=$(cd "$prefix/include" && ls | grep -v '^sluice$' || true)
test -z "$others" || fail "headers outside include/sluice: $others"

version=$(head -n1 "$src/VERSION")
test "$("$prefix/bin/sluice" --version)" = "sluice $version" || fail "sluice --version is not $version"

# The consumer: its own project, nothing from the build tree.
cmake -S "$src/examples/cpp" -B "$tmp/example" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "configure"; }
grep -q "$build" "$tmp/example/CMakeCache.txt" && fail "the example's cache refers to the build tree"
cmake --build "$tmp/example" -j2 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "build"; }

"$make_dataset" "$tmp/data" --images 24 --classes 3 --seed 3 >/dev/null
"$prefix/bin/sluice" compile "$src/tests/runtime/loader/loader_test.yaml" -o "$tmp/plan" 2>"$tmp/compile.log" ||
  { cat "$tmp/compile.log"; fail "compile with the installed sluice"; }
"$tmp/example/train_loop" "$tmp/plan" "$tmp/data" 2 >"$tmp/run.out" 2>&1 || { cat "$tmp/run.out"; fail "run"; }
grep -q '^plan .*: 24 samples' "$tmp/run.out" || { cat "$tmp/run.out"; fail "the example's output"; }
ldd "$tmp/example/train_loop" >"$tmp/ldd.out"  # a file, not a pipe: grep -q would SIGPIPE ldd under pipefail
grep -q "$prefix/lib/libsluice.so" "$tmp/ldd.out" || { cat "$tmp/ldd.out"; fail "not linked to the installed libsluice.so"; }
echo "install.find_package: OK ($(cat "$tmp/run.out" | wc -l) lines from the example)"
