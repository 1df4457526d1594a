#!/usr/bin/env bash
# The installed package, as a compiler that embeds pattn uses it: installs
# the build into a fresh prefix, configures test/embedding against it with
# clang-22 and with GCC 12, builds it (pattn-embed, and the README's
# example as pattn-readme), and FileChecks their output on the bundled
# example. Run by scripts/test.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
filecheck=/usr/lib/llvm-22/bin/FileCheck

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/lib/cmake/pattn/PAttnConfig.cmake"
for tool in pattn-opt pattn-compile; do
  "$prefix/bin/$tool" --version | grep -q "^pattn "
done

for compiler in clang++-22 g++-12; do
  if ! command -v "$compiler" >/dev/null; then
    echo "test-embedding: $compiler not found" >&2
    exit 1
  fi
  consumer="$work/consumer-$compiler"
  cmake -G Ninja -S "$root/test/embedding" -B "$consumer" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$compiler" \
    -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  ninja -C "$consumer" >/dev/null
  "$consumer/pattn-embed" "$root/examples/decode_int4.mlir" |
    "$filecheck" "$root/test/embedding/pattn-embed.check"
  "$consumer/pattn-readme" "$root/examples/decode_int4.mlir" |
    "$filecheck" "$root/test/embedding/pattn-readme.check"
  echo "test-embedding: the consumer built with $compiler against $prefix passes"
done
