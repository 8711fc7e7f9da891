#!/usr/bin/env bash
# The main job on the embedded default, end to end:
#   1. generate a small ImageNet-like JPEG set (build/demo/data, 512 images,
#      10 classes, deterministic; skipped when it is already there),
#   2. compile examples/imagenet_train.yaml into a plan (fused kernels for
#      SSE4.1 / AVX2 / AVX-512 and CUDA, plan.json, report.txt),
#   3. run the plan on the generated set for one epoch with `sluice run`,
#      printing images/s, batch latency, consumer wait, peak RSS and errors.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
sluice="$build/sluice"
demo="$build/demo"
data="$demo/data"

if [ ! -f "$data/.complete" ]; then
  echo "== generating the demo dataset in $data"
  rm -rf "$data"
  "$build/sluice_make_dataset" "$data/train" --images 512 --classes 10 --seed 0
  touch "$data/.complete"
fi

echo "== sluice compile examples/imagenet_train.yaml --emit=ir"
"$sluice" compile examples/imagenet_train.yaml --emit=ir

echo
echo "== sluice compile examples/imagenet_train.yaml -o $demo/imagenet_train.plan"
rm -rf "$demo/imagenet_train.plan"
"$sluice" compile examples/imagenet_train.yaml -o "$demo/imagenet_train.plan"
cat "$demo/imagenet_train.plan/report.txt"

echo
echo "== sluice run $demo/imagenet_train.plan --var DATA=$data --epochs 1"
"$sluice" run "$demo/imagenet_train.plan" --var "DATA=$data" --epochs 1
