#!/usr/bin/env bash
# Installs Sluice's build and test dependencies from Debian's packages.
# Idempotent: packages already installed are skipped, and apt-get runs only
# when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libhalide14-0-dev        # Halide (with LLVM inside): kernel code generation
  libyaml-cpp-dev          # spec parsing with line/column marks
  nlohmann-json3-dev       # plan.json and JSON Schema output
  libturbojpeg0-dev libjpeg62-turbo-dev  # JPEG decode
  libtbb-dev               # runtime task arena
  googletest libgtest-dev libgmock-dev   # unit tests
  libbenchmark-dev         # micro benchmarks
  llvm-14-tools            # FileCheck for compiler golden tests
  python3-dev pybind11-dev # the Python package's extension module (python/)
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
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
