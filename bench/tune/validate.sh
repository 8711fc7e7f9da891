#!/usr/bin/env bash
# Autotuning validation (issue 6, bench/RESULTS.md "Autotuning"):
#   (a) the knobs `sluice tune` picks reach at least the throughput of the best
#       setting of a small hand grid (threads {1,2} x prefetch {1,2,4}, in_flight
#       = threads: the loader's workers hold one sample each, so a larger
#       in_flight changes nothing) measured in the same run;
#   (b) with --cpu-budget 1 the loader uses about one core: process CPU time /
#       wall time (/usr/bin/time: (user + sys) / elapsed) during `sluice run` of
#       the plan tuned that way.
# Each setting is run REPS times (`sluice run --epochs E`); the repetitions are
# interleaved (rep 1 of every setting, then rep 2, ...) so that a change in
# machine load hits every setting alike; medians are quoted.
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
  local out
  out=$( { /usr/bin/time -f "TIME %e %U %S" "$sluice" run "$1" --var "DATA=$data" \
             --epochs "$epochs" "${@:2}" >"$work/run.out"; } 2>&1 )
  local ips wall user sys
  ips=$(awk '/^images\/s:/ {print $2; exit}' "$work/run.out")
  read -r wall user sys < <(echo "$out" | grep '^TIME' | cut -d' ' -f2-)
  echo "$ips $(python3 -c "print(f'{($user+$sys)/$wall:.2f}')")"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# measure_all LABEL_i "PLAN ARGS..." pairs in the arrays labels / cmds: REPS
# interleaved rounds; prints "label median_ips images/s median_cores cores (runs)".
measure_all() {
  local -A ipss coress
  local r i ips cores
  for ((r = 0; r < reps; r++)); do
    for i in "${!labels[@]}"; do
      # shellcheck disable=SC2086
      read -r ips cores < <(run_once ${cmds[$i]})
      ipss[$i]+="$ips "; coress[$i]+="$cores "
    done
  done
  for i in "${!labels[@]}"; do
    printf '%-44s %8.1f images/s  %5.2f cores  (runs: %s)\n' "${labels[$i]}" \
      "$(printf '%s\n' ${ipss[$i]} | median)" "$(printf '%s\n' ${coress[$i]} | median)" \
      "${ipss[$i]% }"
  done
}

echo "== (a) tuned vs hand grid: $images images, $epochs epochs per run, median of $reps runs"
rm -rf "$work/tuned.plan"; cp -r "$plan" "$work/tuned.plan"
"$sluice" tune "$work/tuned.plan" --profile "$hw" --var "DATA=$data" --seconds "$tune_s" \
  | tee "$work/tune.txt"
labels=() cmds=()
for t in 1 2; do
  for p in 1 2 4; do
    labels+=("grid threads=$t in_flight=$t prefetch=$p")
    cmds+=("$plan --threads $t --in-flight $t --prefetch $p")
  done
done
labels+=("tuned ($(grep '^best:' "$work/tune.txt" | cut -d' ' -f2-4))")
cmds+=("$work/tuned.plan")
measure_all | tee "$work/grid.txt"
echo "best grid setting: $(grep '^grid' "$work/grid.txt" | sort -k5 -n | tail -1)"

echo
echo "== (b) --cpu-budget 1: cores used by sluice run of the plan tuned that way"
rm -rf "$work/budget1.plan"; cp -r "$plan" "$work/budget1.plan"
"$sluice" tune "$work/budget1.plan" --profile "$hw" --var "DATA=$data" --cpu-budget 1 \
  --seconds "$((tune_s / 2))" | tee "$work/tune1.txt"
labels=("tuned --cpu-budget 1 ($(grep '^best:' "$work/tune1.txt" | cut -d' ' -f2-4))")
cmds=("$work/budget1.plan")
measure_all
