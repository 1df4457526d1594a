#!/usr/bin/env bash
# README command 1: install the toolchain, build pattn, and run the main job
# on the bundled example: fold the per-channel scales of
# examples/decode_int4.mlir, explain each op's backend choice, and compile it
# for all six chips into build/examples/libdecode_int4.so.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"

echo "pattn: backend choice for examples/decode_int4.mlir on sm_90a"
"$build/bin/pattn-opt" "$root/examples/decode_int4.mlir" \
  --pattn-fold-and-select="chips=sm_90a" --mlir-print-op-on-diagnostic=false \
  -o /dev/null

chips=sm_80,sm_86,sm_89,sm_90a,sm_100a,sm_120a
mkdir -p "$build/examples"
echo "pattn: compiling examples/decode_int4.mlir for $chips"
"$build/bin/pattn-compile" "$root/examples/decode_int4.mlir" --chips=$chips \
  -o "$build/examples/libdecode_int4.so"
# The artifact describes its entry points (pattn.load reads the same).
PYTHONPATH="$root/python" python3 -c '
import sys, pattn
module = pattn.load(sys.argv[1])
for name, function in module.functions.items():
    print(f"  {name}: {len(function.args)} buffers + stream; chips "
          + ", ".join(module.chips))' "$build/examples/libdecode_int4.so"
