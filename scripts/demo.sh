#!/usr/bin/env bash
# The main job on the embedded default: compile the example ImageNet training
# spec and show what the compiler made of it.
#
# What runs today: the spec front end, validation against the op registry, the
# IR and type/shape inference. Running the compiled pipeline on data (the
# runtime) and writing the plan artifact (fused kernels) are not built yet;
# this script grows with them.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
sluice="$build/sluice"

echo "== sluice compile examples/imagenet_train.yaml --emit=ir"
"$sluice" compile examples/imagenet_train.yaml --emit=ir
echo
echo "== sluice compile examples/imagenet_eval.yaml --emit=ir"
"$sluice" compile examples/imagenet_eval.yaml --emit=ir
