#!/usr/bin/env bash
# Where the compiler is: fills .gpu-artifacts/ with everything
# scripts/gpu-run.sh needs on the GPU machine, which has no compiler and no
# network: the GPU suite's modules for both backends, the decode
# benchmark's, a copy of the compiler's files (which key the cache), the
# peers' script and FlashInfer's wheels (into .whl/).
#   bash scripts/gpu-prepare.sh [CHIP]      # default sm_90a (the H200)
# The folders are ignored by git; carry them to the GPU machine:
# .gpu-artifacts (and .whl for the peers) for the suite and benchmarks,
# .ort-artifacts (and .whl-ort, or the GPU machine's own onnxruntime) for
# the ONNX Runtime comparison. Everything together can pass a call's 64 MiB:
# python/tests/gpu/precompile.py --only-prompts makes a smaller cache for
# the prefill and engine-page tests.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
chip="${1:-sm_90a}"
export PATTN_COMPILE="${PATTN_COMPILE:-$root/build/bin/pattn-compile}"
export PATTN_ARTIFACT_DIR="$root/.gpu-artifacts"
cd "$root"
# Entries are keyed on the compiler's build, so those of older builds would
# only take room: start afresh.
rm -rf "$PATTN_ARTIFACT_DIR" && mkdir -p "$PATTN_ARTIFACT_DIR"
# The keys hold the SHA-256 of pattn-compile and of the libpattn_runtime.so
# in its ../lib (pattn._compiler): carry both files, so that the GPU machine,
# where pattn-compile cannot run (no LLVM/MLIR), computes the same keys;
# scripts/gpu-run.sh points PATTN_COMPILE at the copy.
compiler_real="$(readlink -f "$PATTN_COMPILE")"
mkdir -p "$PATTN_ARTIFACT_DIR/compiler/bin" "$PATTN_ARTIFACT_DIR/compiler/lib"
cp -p "$compiler_real" "$PATTN_ARTIFACT_DIR/compiler/bin/pattn-compile"
cp -p "$(dirname "$(dirname "$compiler_real")")/lib/libpattn_runtime.so" \
  "$PATTN_ARTIFACT_DIR/compiler/lib/libpattn_runtime.so"
for backend in auto portable; do
  PATTN_TEST_BACKEND=$backend python3 python/tests/gpu/precompile.py --chip "$chip"
done
python3 bench/bench_decode.py --precompile "$chip"
python3 bench/bench_mla.py --precompile "$chip"
# The prefill family's benchmark (with its mixed-batch table), the 32K
# append, and the transformers tests and benchmarks (gpu-run.sh parts
# "prefill" and "transformers").
python3 bench/bench_prefill.py --precompile "$chip"
python3 bench/bench_append.py --precompile "$chip"
python3 python/tests/gpu/precompile_transformers.py --chip "$chip"
# pattn against ONNX Runtime (gpu-run.sh part "onnx"): its modules for both
# backends in their own cache, .ort-artifacts/, and ONNX Runtime's wheels in
# .whl-ort/ (the GPU machine's numpy is kept): together they fit one call's
# carry, next to but not with .gpu-artifacts.
ort_cache="$root/.ort-artifacts"
rm -rf "$ort_cache" && mkdir -p "$ort_cache" && cp -r "$PATTN_ARTIFACT_DIR/compiler" "$ort_cache/"
for backend in auto portable; do
  PATTN_ARTIFACT_DIR="$ort_cache" python3 bench/onnx_vs_ort.py --precompile \
    --backend $backend > /dev/null
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux2014_x86_64 -d "$root/.whl-ort" onnxruntime==1.32.0 onnx==1.23.2 \
  protobuf==7.36.2 flatbuffers==25.12.19 ml_dtypes==0.7.0 packaging==26.4 \
  typing_extensions==4.16.0
peers="$root/../shared/peers/flashinfer_decode.py"
if [ -f "$peers" ]; then
  cp "$peers" "$root/../shared/peers/flashinfer_prefill.py" "$PATTN_ARTIFACT_DIR/"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux2014_x86_64 -d "$root/.whl" \
    flashinfer-python==0.6.13 apache-tvm-ffi==0.1.15.post2
fi
du -sh "$PATTN_ARTIFACT_DIR" "$root/.whl" "$ort_cache" "$root/.whl-ort" 2>/dev/null || true
