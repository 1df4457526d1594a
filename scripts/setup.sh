#!/usr/bin/env bash
# README command 1: install the toolchain, build pattn, and run the main job
# on the bundled example: parse, verify and print examples/decode_int4.mlir.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"

echo "pattn: verifying and printing examples/decode_int4.mlir"
"$build/bin/pattn-opt" "$root/examples/decode_int4.mlir"
