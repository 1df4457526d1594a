#!/usr/bin/env bash
# On the GPU machine (the device tool, carry [".gpu-pack", "bench/device"]
# travel with the tree): the GPU suite on both backends over .gpu-new's
# precompiled kernels, then the prefill and decode rows of .gpu-main and
# .gpu-new in the same call (bench/device/precompile.sh made both). Logs and
# tables go into $OUT/results.tgz.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python
R=/tmp/r; mkdir -p $R; trap 'tar czf $OUT/results.tgz -C /tmp r' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for pack in .gpu-pack/*.tgz; do tar xzf "$pack"; done
with() { local t=$1; shift
  PATTN_ARTIFACT_DIR=$PWD/.gpu-$t PATTN_COMPILE=$PWD/.gpu-$t/compiler/bin/pattn-compile "$@"; }
for backend in auto portable; do
  echo "=== suite $backend"; start=$SECONDS
  PATTN_TEST_BACKEND=$backend with new timeout 240 python3 -m pytest python/tests/gpu -q \
    -p no:cacheprovider --ignore=python/tests/gpu/test_gpu_transformers.py > $R/suite-$backend.log 2>&1
  echo "rc $? in $((SECONDS - start)) s"; tail -5 $R/suite-$backend.log
done
[ -d .gpu-main ] || exit 0
for t in main new; do
  echo "=== $t"
  with $t timeout 60 python3 bench/bench_prefill.py --caches f16,i8,i4,nvfp4 \
    --backends prefill,prefill-mma-sync,portable --no-mixed --write-results $R/prefill-$t.md > /dev/null 2>&1
  tail -9 $R/prefill-$t.md
  with $t timeout 40 python3 bench/bench_decode.py --caches f16 --backends auto --no-sdpa \
    --shapes B4-32/8-D128-L32K,B1-32/8-D128-L8K,B4-32/8-D128-L8K-Q8,B4-32/8-D128-L32K-bf16,B4-32/8-D128-L512 \
    --write-results $R/decode-f16-$t.md 2>&1 | grep "^| B"
  with $t timeout 30 python3 bench/bench_decode.py --caches i8 --backends auto --no-sdpa \
    --shapes B4-32/8-D128-L32K,B8-64/8-D128-L16K,B1-32/8-D128-L8K,B4-32/8-D128-L8K-Q8 \
    --write-results $R/decode-i8-$t.md 2>&1 | grep "^| B"
done
