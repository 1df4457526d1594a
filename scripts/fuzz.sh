#!/usr/bin/env bash
# The sanitizer job: builds pattn with AddressSanitizer, UndefinedBehavior-
# Sanitizer and libFuzzer coverage (clang-22) in build-asan/, runs the lit and
# unit suites under the sanitizers, then fuzzes the pipeline (tools/pattn-fuzz:
# parse, verify, fold, select, plan, convert-pattn-to-gpu) for SECONDS over a
# corpus seeded from test/ and examples/ (kept in build-asan/fuzz-corpus, so
# later runs continue where earlier ones stopped). Fails on any sanitizer
# report, test failure or fuzzer crash; crash inputs land in
# build-asan/fuzz-crashes/ (make each a regression test under test/Fuzz/).
#   bash scripts/fuzz.sh [SECONDS]        # default 300
# PATTN_FUZZ_SEED fixes libFuzzer's seed (CI does, so that its run is one
# that was reproduced before landing); unset, every run explores afresh.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# ccache keys on paths relative to the checkout, so that a fresh clone in
# another folder (as CI makes one) reuses what an earlier clone compiled.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
seconds="${1:-300}"
build="$root/build-asan"
cd "$root"

mkdir -p "$build"
cmake -G Ninja -S . -B "$build" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DLLVM_USE_SANITIZER="Address;Undefined" -DLLVM_USE_SANITIZE_COVERAGE=ON \
  -DPATTN_ENABLE_FUZZER=ON > "$build/configure.log"
ninja -C "$build"

# libMLIR.so is not instrumented, so annotations made by inlined LLVM code
# disagree across the boundary: container-overflow, and the poisoning of
# BumpPtrAllocator slabs (instrumented code poisons a slab's tail, libMLIR
# then allocates from it without unpoisoning: a false use-after-poison the
# first fuzzing hour found, test/Fuzz/uniquer-slab-poison.mlir). MLIR keeps
# process-lifetime registries, so leaks are checked by the fuzzer (per
# input), not at tool exit.
common="detect_container_overflow=0:allow_user_poisoning=0"
export ASAN_OPTIONS="$common:detect_leaks=0:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd "$build" && ctest -j2 --output-on-failure | tail -3)

corpus="$build/fuzz-corpus" crashes="$build/fuzz-crashes"
mkdir -p "$corpus" "$crashes"
# Seeds: every test and example, split at `// -----` like --split-input-file.
python3 - "$corpus" <<'PY'
import hashlib, pathlib, sys
corpus = pathlib.Path(sys.argv[1])
for path in sorted(pathlib.Path(".").glob("test/**/*.mlir")) + \
        sorted(pathlib.Path(".").glob("examples/*.mlir")) + \
        sorted(pathlib.Path(".").glob("unittests/**/*.mlir")):
    for chunk in path.read_text().split("// -----"):
        data = chunk.encode()
        (corpus / hashlib.sha1(data).hexdigest()).write_bytes(data)
PY
export ASAN_OPTIONS="$common:detect_leaks=1"
"$build/bin/pattn-fuzz" "$corpus" -dict="$root/tools/pattn-fuzz/pattn.dict" \
  -seed="${PATTN_FUZZ_SEED:-0}" \
  -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 -max_len=16384 \
  -artifact_prefix="$crashes/" -print_final_stats=1 2>&1 | tail -20
# Crashes, leaks, timeouts (> 60 s) and out-of-memory inputs fail the job;
# slow units (> 10 s, libFuzzer's report) are kept for a look but do not.
if ls "$crashes"/crash-* "$crashes"/leak-* "$crashes"/timeout-* \
    "$crashes"/oom-* >/dev/null 2>&1; then
  echo "fuzz.sh: failing inputs in $crashes" >&2
  exit 1
fi
