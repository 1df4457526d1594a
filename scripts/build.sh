#!/usr/bin/env bash
# Configures (once) and builds pattn into build/ (override with BUILD_DIR).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# ccache keys on paths relative to the checkout, so that a fresh clone in
# another folder (as CI makes one) reuses what an earlier clone compiled.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
build="${BUILD_DIR:-$root/build}"

if [ ! -f "$build/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    "${launcher[@]}"
fi
# Two cores: let Ninja pick its default (nproc + 2) unless told otherwise.
ninja -C "$build" ${PATTN_JOBS:+-j "$PATTN_JOBS"}
