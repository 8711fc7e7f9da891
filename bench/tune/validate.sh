#!/usr/bin/env bash
# Autotuning validation (issue 6, bench/RESULTS.md "Autotuning"):
#   (a) the knobs `sluice tune` picks reach at least the throughput of the best
#       setting of a small hand grid (threads {1,2} x prefetch {1,2,4} x
#       in_flight {threads, 2*threads}) measured in the same run;
#   (b) with --cpu-budget 1 the loader uses about one core: process CPU time /
#       wall time during `sluice run` of the plan tuned that way.
# Each setting is run REPS times (`sluice run --epochs E`); medians are quoted.
#
#   bench/tune/validate.sh [BUILD_DIR] [WORK_DIR]
# Env: IMAGES (2000), EPOCHS (2), REPS (3), TUNE_SECONDS (40).
set -euo pipefail
build=${1:-build}
work=${2:-$build/tune-validate}
images=${IMAGES:-2000}
epochs=${EPOCHS:-2}
reps=${REPS:-3}
tune_s=${TUNE_SECONDS:-40}
cd "$(dirname "$0")/../.."
sluice="$build/sluice"
mkdir -p "$work"
data="$work/data"
if [ ! -f "$data/.complete-$images" ]; then
  rm -rf "$data"
  "$build/sluice_make_dataset" "$data/train" --images "$images" --classes 10 --seed 0
  touch "$data/.complete-$images"
fi
plan="$work/imagenet_train.plan"
if [ ! -f "$plan/plan.json" ]; then
  "$sluice" compile examples/imagenet_train.yaml -o "$plan"
fi
hw="$work/hw.yaml"
[ -f "$hw" ] || "$sluice" profile -o "$hw" --data "$data/train" --seconds 15

# images/s and cores used by one `sluice run` with extra args; prints "IPS CORES".
run_once() {
  local out t0 t1 c0 c1
  out=$( { /usr/bin/time -f "TIME %e %U %S" "$sluice" run "$1" --var "DATA=$data" \
             --epochs "$epochs" "${@:2}" >"$work/run.out"; } 2>&1 )
  local ips wall user sys
  ips=$(awk '/^images\/s:/ {print $2; exit}' "$work/run.out")
  read -r wall user sys < <(echo "$out" | grep '^TIME' | cut -d' ' -f2-)
  echo "$ips $(python3 -c "print(f'{($user+$sys)/$wall:.2f}')")"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
measure() {  # label, run args...; prints "label median_ips median_cores"
  local label=$1; shift
  local ipss=() coress=()
  for ((r = 0; r < reps; r++)); do
    read -r ips cores < <(run_once "$@")
    ipss+=("$ips"); coress+=("$cores")
  done
  printf '%-40s %8.1f images/s  %5.2f cores  (runs: %s)\n' "$label" \
    "$(printf '%s\n' "${ipss[@]}" | median)" "$(printf '%s\n' "${coress[@]}" | median)" \
    "${ipss[*]}"
}

echo "== (a) tuned vs hand grid: $images images, $epochs epochs per run, median of $reps runs"
rm -rf "$work/tuned.plan"; cp -r "$plan" "$work/tuned.plan"
"$sluice" tune "$work/tuned.plan" --profile "$hw" --var "DATA=$data" --seconds "$tune_s" \
  | tee "$work/tune.txt"
results="$work/grid.txt"
: >"$results"
for t in 1 2; do
  for p in 1 2 4; do
    for k in $t $((2 * t)); do
      measure "grid threads=$t prefetch=$p in_flight=$k" "$plan" --threads $t --prefetch $p \
        --in-flight $k | tee -a "$results"
    done
  done
done
measure "tuned ($(grep '^best:' "$work/tune.txt" | cut -d' ' -f2-4))" "$work/tuned.plan" \
  | tee "$work/tuned.txt"
echo "best grid setting: $(awk '{print $5, $0}' "$results" | sort -n | tail -1 | cut -d' ' -f2-)"

echo
echo "== (b) --cpu-budget 1: cores used by sluice run of the plan tuned that way"
rm -rf "$work/budget1.plan"; cp -r "$plan" "$work/budget1.plan"
"$sluice" tune "$work/budget1.plan" --profile "$hw" --var "DATA=$data" --cpu-budget 1 \
  --seconds "$((tune_s / 2))" | tee "$work/tune1.txt"
measure "tuned --cpu-budget 1" "$work/budget1.plan"
