#!/usr/bin/env bash
# Builds a folder that runs bench/remote/run.sh on another machine that has no
# compiler, Halide, nginx or Debian packages (the device machines a session
# is sometimes lent: 16 cores, so the loader and nginx can be given cores of
# their own). The folder is a BUILD directory for run.sh:
#   sluice_e2e_loader, sluice_make_dataset   stripped copies of this build's
#   nginx/nginx, nginx/ngx_http_echo_module.so   Debian's, as installed here
#   lib/      the shared libraries all of them need besides glibc's own
#   remote/   the three plans (run.sh PLANS_ONLY=1), compiled here
# There, run.sh makes the images with sluice_make_dataset and the shards with
# bench/remote/tar_folder.py (no `sluice pack` without Halide), e.g.:
#   LD_LIBRARY_PATH=$PWD/KIT/lib BUILD=KIT NGINX=$PWD/KIT/nginx/nginx \
#     NGINX_ECHO_MODULE=$PWD/KIT/nginx/ngx_http_echo_module.so PYTHON=python3 \
#     MOTO=0 THREADS=2 LOADER_CPUS=0-1 SERVER_CPUS=2-3 bench/remote/run.sh --no-build
#
#   bench/remote/device_kit.sh OUT_DIR      (BUILD [build]: the build to copy)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:?usage: bench/remote/device_kit.sh OUT_DIR}"
BUILD="${BUILD:-$ROOT/build}"
ECHO_MODULE=/usr/lib/nginx/modules/ngx_http_echo_module.so
for f in "$BUILD/sluice" "$BUILD/sluice_e2e_loader" "$BUILD/sluice_make_dataset" "$(command -v nginx)" "$ECHO_MODULE"; do
  [[ -e "$f" ]] || { echo "device_kit: $f is missing" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT/lib" "$OUT/nginx" "$OUT/remote"
OUT="$(cd "$OUT" && pwd)"
cp "$BUILD/sluice_e2e_loader" "$BUILD/sluice_make_dataset" "$OUT/"
cp "$(command -v nginx)" "$ECHO_MODULE" "$OUT/nginx/"
strip --strip-debug "$OUT/sluice_e2e_loader" "$OUT/sluice_make_dataset"
"$ROOT/scripts/bundle_libs.sh" "$OUT/lib" "$OUT/sluice_e2e_loader" "$OUT/sluice_make_dataset" \
  "$OUT"/nginx/*
if ldd "$OUT/sluice_e2e_loader" | grep -qi -E 'halide|llvm'; then
  echo "device_kit: sluice_e2e_loader links Halide or LLVM" >&2
  exit 1
fi
PLANS_ONLY=1 BUILD="$BUILD" WORK="$OUT/remote" "$ROOT/bench/remote/run.sh" --no-build
echo "device_kit: $OUT: $(du -sh "$OUT" | cut -f1)"
