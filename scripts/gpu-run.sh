#!/usr/bin/env bash
# On the GPU machine, after scripts/gpu-prepare.sh: the GPU suite on both
# backends (results tables), compute-sanitizer memcheck and racecheck on a
# representative set, and the decode benchmark on both backends with
# FlashInfer and SDPA in the same session (when the peers were prepared).
# Everything lands in $OUT (default ./gpu-results); PATTN_COMMIT names the
# commit in the tables when the copy has no .git. PATTN_GPU_PARTS picks the
# parts (default "suite sanitize bench"; "onnx" compares with ONNX Runtime;
# "profile" adds ncu source-level reports of the XQA decode; "mla" runs the
# MLA benchmark with FlashInfer; "mla-profile" the same ncu reports of the
# tensor-core MLA decode; "prefill" the prefill family's tests and benchmark
# with FlashInfer's prefill; "transformers" the integration's GPU tests and
# benchmark; "batching" its generate_batch() test and throughput; "append"
# the 32K-token append alone; "prefill-profile" ncu of the prefill family),
# so that
# each call fits a time limit.
#   bash scripts/gpu-run.sh
#   PATTN_GPU_PARTS="bench profile" bash scripts/gpu-run.sh
#   PATTN_GPU_PARTS="suite sanitize mla" bash scripts/gpu-run.sh   # issue 10's final run
#   PATTN_GPU_PARTS="mla-profile" bash scripts/gpu-run.sh          # where the MLA decode's time goes
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${OUT:-$root/gpu-results}"
mkdir -p "$out"
export PATTN_ARTIFACT_DIR="$root/.gpu-artifacts" PYTHONUNBUFFERED=1
# The copy of the compiler that filled the cache (gpu-prepare.sh): it cannot
# run here, but its files key the cache's entries.
export PATTN_COMPILE="$PATTN_ARTIFACT_DIR/compiler/bin/pattn-compile"
parts=" ${PATTN_GPU_PARTS:-suite sanitize bench} "
part() { [[ "$parts" == *" $1 "* ]]; }

part suite && for backend in auto portable; do
  PATTN_TEST_BACKEND=$backend PATTN_GPU_RESULTS="$out/suite-$backend.md" \
    python3 -m pytest python/tests/gpu -q -rfs --tb=line -p no:cacheprovider \
    2>&1 | grep -E "^FAILED|^SKIPPED|passed|failed" | tail -8
done

# Every encoding, HND and NHD, split and unsplit, windows, sinks, D256; the
# prefill family on prompts with holes, a mixed batch, sinks and a window,
# and 64-token pages; the MLA decode of every record preset with bf16
# queries (the tensor-core kernel on auto), the MLA builds for several
# chips (two kernel modules), and every rotary case.
cases="(decode_matches and (ort-int4 or nvfp4-spec or gpt-oss or gemma or window1 or win23 or d256 or engine)) or (decode_matches and (holes or mixed or bs64)) or (prompt_tiles and (holes or mixed)) or (mla_decode_matches and bf16) or mla_fleet or rotary"
# PATTN_SANITIZE_CASES picks another set (a pytest -k expression).
cases="${PATTN_SANITIZE_CASES:-$cases}"
# The whole report lands in $OUT/sanitize-<tool>.log (a hazard names both
# accesses there); the summary lines are printed.
part sanitize && for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool python3 -m pytest python/tests/gpu -q \
    -p no:cacheprovider -k "$cases" > "$out/sanitize-$tool.log" 2>&1
  grep -E "SUMMARY|passed|failed" "$out/sanitize-$tool.log" | tail -2
done

if part profile; then
  # One XQA decode per cache at B4 32/8 D128 L32K (the first eager call):
  # the whole ncu set, then per-SASS-instruction executions and stall
  # samples as CSV, to read where the issue slots go.
  for cache in f16 i8 i4 nvfp4; do
    ncu --set full --import-source no -k regex:pattn_xqa_decode -c 1 \
      -f -o "$out/ncu-$cache" python3 bench/bench_decode.py --iters 50 --warmup 1 \
      --no-sdpa --backends auto --shapes B4-32/8-D128-L32K --caches $cache \
      > "$out/ncu-$cache.log" 2>&1
    ncu -i "$out/ncu-$cache.ncu-rep" --page details --csv > "$out/ncu-$cache-details.csv" 2>&1
    ncu -i "$out/ncu-$cache.ncu-rep" --page source --print-source sass --csv \
      > "$out/ncu-$cache-sass.csv" 2>&1
    rm -f "$out/ncu-$cache.ncu-rep"
    echo "profiled $cache: $(wc -l < "$out/ncu-$cache-sass.csv") SASS rows"
  done
fi

# pattn against ONNX Runtime (CPU) on GroupQueryAttention graphs, both
# backends (bench/onnx_vs_ort.py; ONNX Runtime from .whl-ort/).
# Carry .ort-artifacts and .whl-ort for it (gpu-prepare.sh).
# Without .whl-ort, the machine's own onnxruntime (the table names its
# version).
if part onnx && { ls "$root"/.whl-ort/*.whl >/dev/null 2>&1 ||
                  python3 -c "import onnxruntime, onnx" 2>/dev/null; }; then
  ort_site="$(mktemp -d)"
  if ls "$root"/.whl-ort/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$ort_site" \
      "$root"/.whl-ort/*.whl
  fi
  for backend in auto portable; do
    PATTN_ARTIFACT_DIR="$root/.ort-artifacts" \
      PATTN_COMPILE="$root/.ort-artifacts/compiler/bin/pattn-compile" \
      PYTHONPATH="$root/python:$ort_site" python3 bench/onnx_vs_ort.py --backend $backend \
      --out "$out/onnx-vs-ort-$backend.md" > "$out/onnx-vs-ort-$backend.log" 2>&1
    echo "onnx vs ort ($backend): exit $?, $(grep -c '^|' "$out/onnx-vs-ort-$backend.md" 2>/dev/null) table rows"
  done
fi

# The MLA decode benchmark (bench/bench_mla.py): both backends, the
# mma.sync kernel, and FlashInfer's bf16 MLA on the same shapes, in one
# process. FlashInfer's MLA modules come from a carried .fi-aot, else are
# built here (about 30 s, kept in .fi-aot for the next call on this copy).
if part mla; then
  mla_env=() mla_args=(--no-flashinfer)
  if ls "$root"/.whl/*.whl >/dev/null 2>&1; then
    mla_site="$(mktemp -d)"
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$mla_site" \
      "$root"/.whl/*.whl
    mla_env=(PYTHONPATH="$mla_site" FLASHINFER_CUDA_ARCH_LIST="${FLASHINFER_CUDA_ARCH_LIST:-9.0}")
    [ -f "$root/.fi-aot/built.json" ] || env "${mla_env[@]}" python3 bench/bench_mla.py \
      --build-flashinfer "$root/.fi-aot" --jobs 16 > "$out/flashinfer-mla-build.log" 2>&1
    if [ -f "$root/.fi-aot/built.json" ]; then
      mkdir -p "$mla_site/flashinfer/data/aot" && cp -r "$root/.fi-aot/." "$mla_site/flashinfer/data/aot/"
      mla_env+=(FLASHINFER_DISABLE_JIT=1) mla_args=()
    fi
  fi
  env "${mla_env[@]}" python3 bench/bench_mla.py "${mla_args[@]}" \
    --write-results "$out/mla.md" > "$out/mla.log" 2>&1
  echo "MLA benchmark exit status $?; table in $out/mla.md"
fi

# ncu of the tensor-core MLA decode on the benchmark's B32 L8K shapes, every
# preset (the first eager call of each): the whole set per decode kernel,
# then its metrics (sections and raw) and per-SASS-instruction executions and
# stall samples as CSV, and the decode and merge kernels' durations side by
# side; `python3 bench/ncu_summary.py $OUT/ncu-mla-*-details.csv` (or the
# names without the suffix) makes tables of them.
if part mla-profile; then
  for shape in B32-L8K-H16 B32-L8K-H128; do
    for preset in fp8_ds_mla nvfp4_ds_mla nvfp4_ds_mla_fp8_rope; do
      name="ncu-mla-$shape-$preset"
      run=(python3 bench/bench_mla.py --presets $preset --shapes $shape --backends auto
           --no-flashinfer --no-graph --iters 1 --warmup 1)
      ncu --set full --import-source no -k regex:pattn_xqa_mla -c 1 -f -o "$out/$name" \
        "${run[@]}" > "$out/$name.log" 2>&1
      ncu -i "$out/$name.ncu-rep" --page details --csv > "$out/$name-details.csv" 2>&1
      ncu -i "$out/$name.ncu-rep" --page raw --csv > "$out/$name-raw.csv" 2>&1
      ncu -i "$out/$name.ncu-rep" --page source --print-source sass --csv \
        > "$out/$name-sass.csv" 2>&1
      rm -f "$out/$name.ncu-rep"
      ncu --section SpeedOfLight -k regex:"pattn_(xqa_mla|merge)" -c 2 --csv \
        "${run[@]}" > "$out/$name-kernels.csv" 2>/dev/null
      echo "profiled $shape $preset: $(wc -l < "$out/$name-sass.csv") SASS rows"
    done
  done
fi

# The prefill family (issue 30): its GPU tests (every prompt case and the
# engine-page cases against the float64 reference), bench/bench_prefill.py
# (XQA query tiles, the prefill family, portable, SDPA), FlashInfer's paged
# prefill (fa2/fa3) in the same call, and a 32K-token prompt's append
# (bench/bench_append.py). FlashInfer's modules build just in time in a first, background
# run (its times discarded) while the tests run; the second run times them.
if part prefill; then
  fi_site="$(mktemp -d)"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$fi_site" \
    "$root"/.whl/*.whl
  fi_env=(PYTHONPATH="$fi_site" FLASHINFER_CUDA_ARCH_LIST=9.0 MAX_JOBS=16)
  env "${fi_env[@]}" python3 "$PATTN_ARTIFACT_DIR/flashinfer_prefill.py" /dev/null \
    > "$out/flashinfer-prefill-build.log" 2>&1 &
  fi_build=$!
  PATTN_TEST_BACKEND=auto python3 -m pytest python/tests/gpu/test_gpu_attention.py -q -rfs \
    --tb=short -p no:cacheprovider -k "prefill_kernel or prompt or engine" > "$out/prefill-tests.log" 2>&1
  grep -E "^FAILED|passed|failed" "$out/prefill-tests.log" | tail -6
  wait $fi_build
  env "${fi_env[@]}" python3 "$PATTN_ARTIFACT_DIR/flashinfer_prefill.py" \
    "$out/peers-prefill.json" > "$out/peers-prefill.log" 2>&1
  echo "flashinfer prefill exit status $?"
  python3 bench/bench_prefill.py --write-results "$out/prefill.md" 2> "$out/prefill-bench.log"
  echo "prefill benchmark exit status $?"
fi
# ncu of the prefill family (the first eager call) on issue 30's rows: the
# whole set, then the details and per-SASS-instruction CSVs, as "profile"
# does for the decode (bench/ncu_summary.py reads them).
if part prefill-profile; then
  for row in "B4-32/8-D128-P4K f16" "B4-32/8-D128-P4K i4" "B8-32/8-D128-C512-L16K f16"; do
    set -- $row
    name="ncu-prefill-${1%%-*}-${1##*-}-$2"
    ncu --set full --import-source no -k regex:pattn_prefill -c 1 -f -o "$out/$name" \
      python3 bench/bench_prefill.py --shapes "$1" --caches "$2" --backends prefill \
      --no-sdpa --no-mixed --iters 1 --warmup 0 > "$out/$name.log" 2>&1
    ncu -i "$out/$name.ncu-rep" --page details --csv > "$out/$name-details.csv" 2>&1
    ncu -i "$out/$name.ncu-rep" --page source --print-source sass --csv \
      > "$out/$name-sass.csv" 2>&1
    rm -f "$out/$name.ncu-rep"
    echo "profiled prefill $1 $2: $(wc -l < "$out/$name-sass.csv") SASS rows"
  done
fi

# A 32K-token prompt's append, bit-exact, allocation-free, against a copy
# (bench/bench_append.py; also a part of its own).
if part prefill || part append; then
  python3 bench/bench_append.py --write-results "$out/append.md" 2> "$out/append.log"
  echo "32K append benchmark exit status $?"
fi

# The transformers integration (issue 31): generate() on pattn caches against
# sdpa on Llama-3/Qwen3/Gemma-2-shaped models (the quantized formats' KL and
# top-1 into transformers.jsonl), then the 1B decode-step benchmark and
# generate_batch() throughput (bench/bench_transformers.py).
if part transformers; then
  PATTN_TRANSFORMERS_RESULTS="$out/transformers.jsonl" python3 -m pytest \
    python/tests/gpu/test_gpu_transformers.py -q -rfs --tb=short -p no:cacheprovider \
    > "$out/transformers-tests.log" 2>&1
  grep -E "^FAILED|passed|failed" "$out/transformers-tests.log" | tail -6
  python3 bench/bench_transformers.py --batching --write-results "$out/transformers.md" \
    > "$out/transformers-bench.log" 2>&1
  echo "transformers benchmark exit status $?"
fi

# generate_batch() alone (issue 31's throughput row): its GPU test, then
# 256 requests through paged|sdpa and paged|pattn (f16, i4), each path's
# progress in the log; bounded so that a stuck engine still returns the log.
if part batching; then
  PATTN_TRANSFORMERS_RESULTS="$out/batching.jsonl" timeout "${PATTN_BATCHING_TEST_SECONDS:-240}" python3 -m pytest \
    python/tests/gpu/test_gpu_transformers.py -k generate_batch -q -rfs --tb=short \
    -p no:cacheprovider > "$out/batching-tests.log" 2>&1
  grep -E "^FAILED|passed|failed" "$out/batching-tests.log" | tail -4
  timeout "${PATTN_BATCHING_SECONDS:-420}" python3 bench/bench_transformers.py --batching \
    --no-decode --write-results "$out/batching.md" > "$out/batching-bench.log" 2>&1
  echo "generate_batch() benchmark exit status $?"
fi

part bench || exit 0
peers_args=()
if [ -f "$PATTN_ARTIFACT_DIR/flashinfer_decode.py" ] && ls "$root"/.whl/*.whl >/dev/null 2>&1; then
  site="$(mktemp -d)"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$root"/.whl/*.whl
  export PYTHONPATH="$site" FLASHINFER_CUDA_ARCH_LIST="${FLASHINFER_CUDA_ARCH_LIST:-9.0}"
  aot="$(mktemp -d)"
  python3 "$PATTN_ARTIFACT_DIR/flashinfer_decode.py" --build "$aot" --trim-tc --jobs 16 \
    --paths fi_tc,fi_xqa > "$out/flashinfer-build.log" 2>&1
  mkdir -p "$site/flashinfer/data/aot" && cp -r "$aot/." "$site/flashinfer/data/aot/"
  FLASHINFER_DISABLE_JIT=1 python3 "$PATTN_ARTIFACT_DIR/flashinfer_decode.py" \
    --paths fi_tc,fi_xqa --iters 50 --warmup 10 --out "$out/peers.json" \
    > "$out/peers.log" 2>&1 && peers_args=(--peers "$out/peers.json")
fi
OUT="$out" python3 bench/bench_decode.py --iters 50 --warmup 10 "${peers_args[@]}" \
  --write-results "$out/decode.md" 2> "$out/bench.log"
echo "benchmark exit status $?; tables in $out"
