#!/bin/bash
# ctest wheel.venv_smoke (label `wheel`, slow: it compiles the project in
# Release into build-pip/): `pip wheel .` with the backend already installed
# (--no-build-isolation: works offline after scripts/install_deps.sh), then the
# wheel installed into a fresh virtual environment and a smoke test run there
# from outside the checkout: import, version, compile, load, iterate, DLPack.
# The environment sees Debian's site-packages (--system-site-packages) for
# numpy only; the sluice it imports must be the wheel's.
#   wheel_test.sh MAKE_DATASET [PYTHON]
set -euo pipefail
make_dataset=$1 python=${2:-/usr/bin/python3}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_CXX_COMPILER_LAUNCHER=$(command -v ccache || true)"
# The test checks the packaging, not the optimizer: an unoptimized build
# (quicker to compile than pyproject's Release) keeps CI shorter. Set
# SKBUILD_CMAKE_BUILD_TYPE=Release to test the wheel users get.
export SKBUILD_CMAKE_BUILD_TYPE="${SKBUILD_CMAKE_BUILD_TYPE:-Debug}"
"$python" -m pip wheel "$src" --no-build-isolation --no-deps -w "$tmp/dist" >"$tmp/wheel.log" 2>&1 ||
  { tail -50 "$tmp/wheel.log"; fail "pip wheel"; }
version=$(head -n1 "$src/VERSION")
wheel=$(ls "$tmp"/dist/sluice-"$version"-*.whl) || fail "no sluice-$version wheel in $(ls "$tmp/dist")"

"$python" -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --no-index --no-deps "$wheel" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "pip install the wheel"; }

"$make_dataset" "$tmp/data" --images 24 --classes 3 --seed 3 >/dev/null
cd "$tmp"  # not the checkout: nothing may come from python/ or build/python
env -u PYTHONPATH SPEC="$src/tests/runtime/loader/loader_test.yaml" DATA="$tmp/data" VERSION="$version" \
  "$tmp/venv/bin/python" - <<'PY' || fail "smoke test"
import os, numpy as np, sluice
assert "/venv/lib/" in sluice.__file__, sluice.__file__  # the wheel's, not the checkout's
assert sluice.__version__ == os.environ["VERSION"], sluice.__version__
plan = sluice.compile(os.environ["SPEC"], out="smoke.plan")
plan = sluice.load("smoke.plan", vars={"DATA": os.environ["DATA"]})
batches = 0
for batch in plan.loader(threads=2):
    image = np.from_dlpack(batch["image"])          # zero-copy through DLPack
    assert image.shape == (4, 3, 32, 32), image.shape
    assert image.dtype == np.float32, image.dtype
    assert np.isfinite(image).all()
    labels = np.asarray(batch["label"])
    assert labels.shape == (4,) and ((labels >= 0) & (labels < 3)).all(), labels
    batches += 1
assert batches == 6, batches
print("wheel smoke test: sluice", sluice.__version__, "from", sluice.__file__, "-", batches, "batches")
PY
echo "wheel.venv_smoke: OK ($(basename "$wheel"))"
