#!/usr/bin/env bash
# README command 1: install the toolchain, build pattn, and run the main job
# on the bundled example: fold the per-channel scales of
# examples/decode_int4.mlir and choose each op's backend for an H200.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"

echo "pattn: folding and selecting backends in examples/decode_int4.mlir (chip sm_90a)"
"$build/bin/pattn-opt" "$root/examples/decode_int4.mlir" \
  --pattn-fold-and-select="chip=sm_90a" --mlir-print-op-on-diagnostic=false
