#!/bin/sh
# Builds and runs the libFuzzer harnesses (bench/fuzz/*_fuzz.cc).
#
#   bench/fuzz/run.sh NAME SECONDS [BUILD_DIR]  replay NAME's regression inputs, then fuzz
#                                               NAME for SECONDS (0 = no time limit) on a
#                                               scratch copy of its seed corpus
#   bench/fuzz/run.sh --replay NAME [BUILD_DIR] run each regression input and seed once
#   bench/fuzz/run.sh --build-only [BUILD_DIR]  configure and build every harness
#
# NAME is a harness, bench/fuzz/NAME_fuzz.cc: spec_parser plan_json jpeg_decode
# png_decode file_list tar_index remote_text jpeg_splice restart_markers.
# BUILD_DIR (default: build-fuzz in the checkout) is a separate clang build with
# -DSLUICE_FUZZ=ON, configured and built here when needed (only the libraries
# the harnesses link; no Halide). The checked-in corpus bench/fuzz/corpus/NAME
# is never written: libFuzzer grows a copy in a scratch directory. Prints the
# execution count and the crashes; a crash's input is kept in
# BUILD_DIR/fuzz-artifacts/NAME/ (add it to bench/fuzz/regressions/NAME/ once
# fixed). Exit status: 0 when no input crashed.
#
# Environment: SLUICE_FUZZ_CXX (default clang++-16, else clang++; needs 16+),
# SLUICE_FUZZ_JOBS (build jobs, default 2), SLUICE_FUZZ_NO_BUILD=1 (use
# BUILD_DIR as it is), SLUICE_FUZZ_ARGS (more libFuzzer flags, e.g.
# "-runs=1000000" to stop after that many executions).
set -eu
src="$(cd "$(dirname "$0")/../.." && pwd)"
# Every bench/fuzz/NAME_fuzz.cc (as the top-level CMakeLists.txt lists them).
harnesses=$(cd "$src/bench/fuzz" && ls -- *_fuzz.cc | sed 's/_fuzz\.cc$//' | tr '\n' ' ')

usage() {
  sed -n '3,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

mode=fuzz
case "${1:-}" in
  --build-only) mode=build; shift ;;
  --replay) mode=replay; shift ;;
  ""|-h|--help) usage ;;
esac
name=""
seconds=0
if [ "$mode" != build ]; then
  [ $# -ge 1 ] || usage
  name="$1"; shift
  case " $harnesses " in
    *" $name "*) ;;
    *) echo "run.sh: unknown harness '$name' (one of: $harnesses)" >&2; exit 2 ;;
  esac
  if [ "$mode" = fuzz ]; then
    [ $# -ge 1 ] || usage
    seconds="$1"; shift
  fi
fi
build="${1:-$src/build-fuzz}"

if [ "${SLUICE_FUZZ_NO_BUILD:-0}" != 1 ]; then
  cxx="${SLUICE_FUZZ_CXX:-}"
  if [ -z "$cxx" ]; then
    if command -v clang++-16 >/dev/null 2>&1; then cxx=clang++-16; else cxx=clang++; fi
  fi
  if [ ! -f "$build/CMakeCache.txt" ]; then
    launcher=""
    if command -v ccache >/dev/null 2>&1; then
      launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
    fi
    # Build type Sanitize: -O1 with line tables (-g1), as OSS-Fuzz builds
    # (CMakeLists.txt); about half RelWithDebInfo's compile time.
    cmake -S "$src" -B "$build" -DSLUICE_FUZZ=ON -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_BUILD_TYPE=Sanitize $launcher >/dev/null
  fi
  target=fuzz_all
  [ -n "$name" ] && target="${name}_fuzz"
  cmake --build "$build" --target "$target" -j "${SLUICE_FUZZ_JOBS:-2}"
fi
[ "$mode" = build ] && exit 0

bin="$build/${name}_fuzz"
[ -x "$bin" ] || { echo "run.sh: $bin not built" >&2; exit 1; }
corpus="$src/bench/fuzz/corpus/$name"
regressions="$src/bench/fuzz/regressions/$name"
artifacts="$build/fuzz-artifacts/$name"
mkdir -p "$artifacts"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Regression inputs (every crash ever fixed) and the seeds, each run once.
inputs=$(find "$regressions" "$corpus" -type f ! -name '.*' 2>/dev/null | sort)
if [ -n "$inputs" ]; then
  n=$(echo "$inputs" | wc -l)
  # shellcheck disable=SC2086
  if ! "$bin" -timeout=25 -artifact_prefix="$artifacts/" $inputs >"$artifacts/replay.log" 2>&1; then
    cat "$artifacts/replay.log"
    echo "run.sh: $name: a regression input or seed crashed (log above)" >&2
    exit 1
  fi
  echo "run.sh: $name: $n regression inputs and seeds replayed, no crash"
fi
[ "$mode" = replay ] && exit 0

scratch="$(mktemp -d "${TMPDIR:-/tmp}/sluice_fuzz_${name}_XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/corpus"
cp "$corpus"/* "$scratch/corpus/"
[ -d "$regressions" ] && find "$regressions" -type f ! -name '.*' -exec cp {} "$scratch/corpus/" \;
before=$(find "$artifacts" -type f ! -name '*.log' | wc -l)
start=$(date +%s)
status=0
# shellcheck disable=SC2086
"$bin" -max_total_time="$seconds" -timeout=25 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" ${SLUICE_FUZZ_ARGS:-} "$scratch/corpus" \
  >"$artifacts/fuzz.log" 2>&1 || status=$?
end=$(date +%s)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$artifacts/fuzz.log" | tail -1)
if [ -z "$execs" ]; then
  # A crash ends libFuzzer before its final stats: take the last progress line.
  execs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$artifacts/fuzz.log" | tail -1)
fi
after=$(find "$artifacts" -type f ! -name '*.log' | wc -l)
crashes=$((after - before))
echo "run.sh: $name: ${execs:-0} executions in $((end - start)) s, $crashes crash(es)," \
  "corpus $(ls "$scratch/corpus" | wc -l) inputs (scratch), log $artifacts/fuzz.log"
if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
  grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$artifacts/fuzz.log" | head -20 || true
  find "$artifacts" -type f ! -name '*.log' -newer "$artifacts/replay.log" 2>/dev/null || true
  exit 1
fi
