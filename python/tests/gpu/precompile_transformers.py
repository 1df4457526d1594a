"""Compiles the kernels of test_gpu_transformers.py and
bench/bench_transformers.py into an artifact cache.

Runs where pattn-compile runs (it needs torch and transformers on the CPU:
the models are built on torch's meta device, which allocates nothing); the
GPU machine finds the artifacts through the same $PATTN_ARTIFACT_DIR.

    PATTN_ARTIFACT_DIR=.gpu-artifacts python3 python/tests/gpu/precompile_transformers.py --chip sm_90a
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import types

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chip", default="sm_90a")
    args = parser.parse_args()
    if not os.environ.get("PATTN_ARTIFACT_DIR"):
        parser.error("set PATTN_ARTIFACT_DIR to the cache directory")
    sys.path[:0] = [str(REPO / "python"), str(REPO / "bench")]
    # test_gpu_transformers imports gpu_required, which skips without a
    # GPU; its configs need transformers only.
    sys.modules["gpu_required"] = types.SimpleNamespace(
        torch=__import__("torch"))
    sys.path.insert(0, str(HERE))
    import test_gpu_tensor_parallel as tp_tests
    import test_gpu_transformers as tests
    import bench_transformers as bench
    from pattn.integrations import transformers as ptx

    count = 0
    formats = ("f16",) + tests.QUANTIZED
    for config in list(tests.configs().values()) + [bench.model_config()]:
        paths = ptx.precompile(config, formats, args.chip,
                               progress=lambda line: print(line, flush=True))
        count += len(paths)
    # test_gpu_tensor_parallel.py: the whole model on one GPU, half the
    # heads on each of two.
    for tp_size in (1, 2):
        count += len(ptx.precompile(
            tp_tests.tp_config(), ("f16", "i4"), args.chip, tp_size=tp_size,
            progress=lambda line: print(line, flush=True)))
    # bench_transformers.py --batching: generate_batch() on the engine's
    # 256-token blocks.
    count += len(ptx.precompile(
        bench.model_config(), bench.BATCHING_FORMATS, args.chip,
        block_size=bench.BATCHING_BLOCK,
        progress=lambda line: print(line, flush=True)))
    # test_gpu_transformers.py's generate_batch() test.
    count += len(ptx.precompile(
        tests.configs()["llama3"], tests.BATCHING_FORMATS, args.chip,
        block_size=tests.BATCHING_BLOCK,
        progress=lambda line: print(line, flush=True)))
    print(f"{count} artifacts for {args.chip} in "
          f"{os.environ['PATTN_ARTIFACT_DIR']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
