#!/usr/bin/env bash
# Copies into LIB_DIR every shared library the given binaries load (as ldd
# resolves them here), except glibc's own (present on any Linux) and the CUDA
# driver (the target machine's, dlopened at run time); then strips them. For
# folders that run on another machine without our Debian packages
# (scripts/gpu_kit.sh, bench/remote/device_kit.sh), with LD_LIBRARY_PATH or an
# $ORIGIN rpath pointing at LIB_DIR.
#
#   scripts/bundle_libs.sh LIB_DIR BINARY...
set -euo pipefail
lib_dir="${1:?usage: scripts/bundle_libs.sh LIB_DIR BINARY...}"
shift
mkdir -p "$lib_dir"
for b in "$@"; do
  ldd "$b" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    case "$name" in
      ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.*) continue ;;
      libcuda.so.*) continue ;;
    esac
    [[ -e "$lib_dir/$name" ]] || cp -L "$path" "$lib_dir/$name"
  done
done
strip --strip-unneeded "$lib_dir"/* 2>/dev/null || true
