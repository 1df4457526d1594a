#!/usr/bin/env bash
# pattn builds and passes its tests with Debian's GCC 12 as with clang-22,
# and the generated IR does not depend on the compiler that built pattn:
# builds everything with GCC 12 into build-gcc/ (the main build uses
# clang-22), runs the lit and unit suites there (ctest), and checks that both
# pattn-compiles emit the same MLIR (after the fold, the backend choice and
# convert-pattn-to-gpu) for every bundled input, on both backends, with and
# without the chips' conversion instructions.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# ccache keys on paths relative to the checkout, so that a fresh clone in
# another folder (as CI makes one) reuses what an earlier clone compiled.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
clang_build="${BUILD_DIR:-$root/build}"
gcc_build="${GCC_BUILD_DIR:-$root/build-gcc}"

bash "$root/scripts/build.sh" >/dev/null
if [ ! -f "$gcc_build/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -G Ninja -S "$root" -B "$gcc_build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ "${launcher[@]}" >/dev/null
fi
ninja -C "$gcc_build" >/dev/null

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if ! (cd "$gcc_build" && ctest -j "$(nproc)" --output-on-failure >"$work/ctest.log" 2>&1); then
  cat "$work/ctest.log"
  echo "host-compiler check: ctest fails in the GCC 12 build" >&2
  exit 1
fi
echo "GCC 12 build: $(grep -E 'tests passed' "$work/ctest.log")"
failures=0
checked=0
# Compiles INPUT with both builds and FLAGS; a difference is reported under
# LABEL. Usage: compare INPUT LABEL FLAGS...
compare() {
  local input="$1" label="$2"
  shift 2
  "$clang_build/bin/pattn-compile" "$input" "$@" -o "$work/clang.mlir"
  "$gcc_build/bin/pattn-compile" "$input" "$@" -o "$work/gcc.mlir"
  checked=$((checked + 1))
  if ! cmp -s "$work/clang.mlir" "$work/gcc.mlir"; then
    echo "differs: $(basename "$input") $label"
    diff "$work/clang.mlir" "$work/gcc.mlir" | head -20
    failures=$((failures + 1))
  fi
}
# A fleet build, and an sm_90a-only one (which plans the wgmma MLA kernel).
for chips in sm_80,sm_89,sm_90a,sm_100a sm_90a; do
  for input in "$root"/test/Target/Inputs/all-ops.mlir \
      "$root"/test/Target/Inputs/mla-wgmma.mlir "$root"/examples/*.mlir; do
    for backend in auto portable; do
      for conversions in true false; do
        compare "$input" \
          "chips=$chips backend=$backend hardware-conversions=$conversions" \
          --chips=$chips --backend=$backend \
          --hardware-conversions=$conversions --emit=mlir
      done
    done
  done
  # The prefill family, on the prompts of its tests.
  for input in "$root"/test/Target/prefill-ptxas.mlir \
      "$root"/test/Conversion/PAttnToGPU/convert-pattn-to-gpu-prefill.mlir; do
    compare "$input" "chips=$chips prompt-kernel=prefill" \
      --chips=$chips --prompt-kernel=prefill --emit=mlir
  done
done
echo "host-compiler IR check: $checked outputs compared, $failures differ"
[ "$failures" -eq 0 ]
