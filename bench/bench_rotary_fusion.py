"""Times pattn.rotary + write_cache fused (one kernel after the checks)
against the same two ops unfused, under CUDA graph replay (device time, no
host overhead): the modules of python/tests/gpu/test_gpu_rotary.py's fused
cases (3 tokens, 4 kv heads, D64; f16, i8 + QK-norm, i4 caches).

    PATTN_ARTIFACT_DIR=.gpu-artifacts PATTN_COMPILE=.gpu-artifacts/compiler/bin/pattn-compile \\
      python3 bench/bench_rotary_fusion.py
"""

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "python"), str(HERE.parent / "python/tests/gpu")]

import torch  # noqa: E402

import pattn  # noqa: E402
import test_gpu_rotary as cases  # noqa: E402


def graph_us(call, replays=200) -> float:
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        call()  # warm
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(10):
            call()
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    graph.replay()
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / replays / 10


def main() -> int:
    print("| case | fused µs | unfused µs | launches fused / unfused |")
    print("|---|---:|---:|---|")
    for name, encoding, scale, norm in cases.FUSED:
        module = pattn.load(pattn.compile(
            cases._fused_module(encoding, scale, norm), chips=[cases.CHIP]))
        tensors = cases._fused_inputs(encoding, scale, norm, seed=5)
        times = {}
        for function in ("fused", "unfused"):
            fn = getattr(module, function)
            args = [tensors[a.name] for a in fn.args]
            times[function] = graph_us(lambda: fn(*args))
        print(f"| {name} | {times['fused']:.2f} | {times['unfused']:.2f} | "
              "2 / 4 |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
