#!/usr/bin/env bash
# Installs Sluice's build and test dependencies: Debian's packages, and Halide
# 21 from PyPI.
# Idempotent: packages already installed are skipped, and apt-get runs only
# when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libhalide14-0-dev        # Halide 14 (with LLVM inside): fallback when the PyPI Halide below is absent
  python3-pip              # installs Halide 21 from PyPI (below)
  libyaml-cpp-dev          # spec parsing with line/column marks
  nlohmann-json3-dev       # plan.json and JSON Schema output
  libturbojpeg0-dev libjpeg62-turbo-dev  # JPEG decode
  libspng-dev              # PNG decode (decode_png, decode_image)
  libssl-dev               # SHA-256 of the shards `sluice pack` writes
  libcurl4-openssl-dev     # remote shards: HTTP(S) and S3 (SigV4) reads (runtime/remote/)
  libtinyxml2-dev          # S3 ListObjectsV2 responses (runtime/remote/)
  chromium                 # the run report's headless-browser test (tests/cli/)
  python3-fusepy           # bench/shards/slowfs.py: the slow-storage FUSE mount (run.sh STORAGE=slowfs)
  libtbb-dev               # runtime task arena
  googletest libgtest-dev libgmock-dev   # unit tests
  libbenchmark-dev         # micro benchmarks
  llvm-14-tools            # FileCheck for compiler golden tests
  clang-16 libclang-rt-16-dev  # libFuzzer harnesses (bench/fuzz, ctest -L fuzz): clang 16+ and its libFuzzer/ASan/UBSan runtimes
  python3-dev pybind11-dev # the Python package's extension module (python/)
  python3-pybind11 python3-venv  # `pip wheel . --no-build-isolation` offline, and its fresh-venv test
  python3-numpy python3-pytest python3-pil  # Python tests (tests/python)
  python3-torch python3-torchvision         # torch hand-off tests, torchvision comparison, examples/python
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
else
  echo "install_deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Halide 21 from PyPI (the `halide` wheel carries the C++ library, with LLVM
# inside, and its headers) into .deps/halide, where CMakeLists.txt looks first.
# Its x86 backend emits vcvtps2ph for the float16 output (Halide 14 cannot):
# docs/kernels.md, round 7. Without it (no registry) the build uses Debian's
# Halide 14 and says so.
halide_version=21.0.0
halide_dir="$(cd "$(dirname "$0")/.." && pwd)/.deps/halide"
if [ -f "$halide_dir/.version" ] && [ "$(cat "$halide_dir/.version")" = "$halide_version" ]; then
  echo "install_deps: Halide $halide_version present in $halide_dir"
else
  rm -rf "$halide_dir"
  if python3 -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: \
      --python-version 3.11 --target "$halide_dir" "halide==$halide_version"; then
    echo "$halide_version" > "$halide_dir/.version"
    echo "install_deps: Halide $halide_version installed in $halide_dir"
  else
    rm -rf "$halide_dir"
    echo "install_deps: warning: could not install Halide $halide_version from PyPI;" \
      "building with Debian's Halide 14 (slower float16 kernels)" >&2
  fi
fi

# Python packages that Debian does not package, from PyPI:
#  - webdataset: tests/python/test_tar_shards.py writes shards with its ShardWriter;
#  - moto[server], boto3: the S3-compatible test server and its uploads (remote tests);
#  - ray[data]: sluice.ray (an optional extra, `pip install .[ray]`) and its tests;
#  - scikit-build-core: the wheel's build backend, present so that
#    `pip wheel . --no-build-isolation` builds offline (tests/scripts/wheel_test.sh).
# Pinned so that pip keeps Debian's numpy 1.x, which Debian's torch is built
# against: pyarrow 18+ requires numpy 2, and numpy 2 breaks torch.from_numpy.
pip_pins=("numpy<2" "pyarrow<18" "pandas<2.3")
pip_install() {
  /usr/bin/python3 -m pip install -q --disable-pip-version-check --break-system-packages "$@" "${pip_pins[@]}"
}
for spec in "webdataset:webdataset" "moto:moto[server]" "boto3:boto3" "ray.data:ray[data]" \
            "scikit_build_core:scikit-build-core"; do
  module="${spec%%:*}"
  pkg="${spec#*:}"
  if /usr/bin/python3 -c "import $module" 2>/dev/null; then
    echo "install_deps: Python package $pkg present"
  elif pip_install "$pkg"; then
    echo "install_deps: Python package $pkg installed"
  else
    echo "install_deps: warning: could not install $pkg from PyPI; its tests will be skipped" >&2
  fi
done
