#!/usr/bin/env bash
# Precompiles what bench/device/verify.sh runs, where pattn-compile is (the
# GPU machine has no LLVM/MLIR): for a compiler build BUILD, into artifact
# directory DIR (the compiler and runtime library copied beside the
# artifacts), for sm_90a.
#
#   bash bench/device/precompile.sh build .gpu-new bench suite   # this checkout
#   bash bench/device/precompile.sh ../base/build .gpu-main bench  # the baseline
#   tar czf .gpu-pack/new.tgz .gpu-new; tar czf .gpu-pack/main.tgz .gpu-main
#
# (the suites' artifacts are ~70 MB, over the device's 64 MiB carry limit
# unpacked; packed they are ~20 MB; name the pack folder in .git/info/exclude).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
dir="$2"
shift 2
mkdir -p "$dir/compiler/bin" "$dir/compiler/lib"
cp "$build/bin/pattn-compile" "$dir/compiler/bin/"
cp "$build/lib/libpattn_runtime.so" "$dir/compiler/lib/"
dir="$(cd "$dir" && pwd)"
export PATTN_ARTIFACT_DIR="$dir" PATTN_COMPILE="$dir/compiler/bin/pattn-compile"
export PYTHONPATH="$root/python"
cd "$root"
for what in "$@"; do
  case "$what" in
  bench)
    python3 bench/bench_prefill.py --precompile sm_90a --caches f16,i8,i4,nvfp4 \
      --backends prefill,prefill-mma-sync,portable --no-mixed
    python3 bench/bench_decode.py --precompile sm_90a --caches f16 --backends auto \
      --shapes B4-32/8-D128-L32K,B1-32/8-D128-L8K,B4-32/8-D128-L8K-Q8,B4-32/8-D128-L32K-bf16,B4-32/8-D128-L512
    python3 bench/bench_decode.py --precompile sm_90a --caches i8 --backends auto \
      --shapes B4-32/8-D128-L32K,B8-64/8-D128-L16K,B1-32/8-D128-L8K,B4-32/8-D128-L8K-Q8 ;;
  suite)
    for backend in auto portable; do
      PATTN_TEST_BACKEND=$backend python3 python/tests/gpu/precompile.py --chip sm_90a --jobs 2
    done ;;
  *) echo "precompile.sh: unknown part '$what' (bench, suite)" >&2; exit 2 ;;
  esac
done
find "$dir" -name '*.lock' -delete
