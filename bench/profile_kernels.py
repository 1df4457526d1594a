#!/usr/bin/env python3
"""Where a decode's time goes: each kernel's device time under graph replay.

bench_decode.py times a whole call (one graph replay between CUDA events).
This replays the same graphs under torch.profiler (CUPTI) and prints, per
row and cache, the kernels of one call in launch order with their median
durations, the gaps between them, the span from the first kernel's start to
the last one's end, and the period from one replay's start to the next (what
bench_decode's median approaches: span + graph launch).

  cd bench && python3 profile_kernels.py --shapes B4-32/8-D128-L32K,B1-32/8-D128-L8K \\
      --caches f16,i8,i4,nvfp4

Needs a GPU, PyTorch, and pattn (compiled modules or pattn-compile), as
bench_decode.py does; precompiled modules come from `bench_decode.py
--precompile` with the same options.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import bench_decode


def kernel_times(torch, graphs, replays: int) -> dict:
    """Median duration per kernel of one replay (launch order), the gaps
    between consecutive kernels, the span and the period, from `replays`
    back-to-back replays."""
    from torch.profiler import ProfilerActivity, profile
    for i in range(2 * len(graphs)):
        graphs[i % len(graphs)]()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(replays):
            graphs[i % len(graphs)]()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events()
                      if e.device_type.name == "CUDA" and "pattn" in e.name),
                     key=lambda e: e.time_range.start)
    names: list[str] = []
    for event in kernels:
        if event.name in names:
            break
        names.append(event.name)
    n = len(names)
    calls = [kernels[i:i + n] for i in range(0, len(kernels) - n + 1, n)]

    def median(values):
        return statistics.median(list(values))
    return {
        "kernels": [(name, median(c[j].time_range.end - c[j].time_range.start
                                  for c in calls))
                    for j, name in enumerate(names)],
        "gaps": [median(c[j + 1].time_range.start - c[j].time_range.end
                        for c in calls) for j in range(n - 1)],
        "span": median(c[-1].time_range.end - c[0].time_range.start
                       for c in calls),
        "period": median(calls[i + 1][0].time_range.start
                         - calls[i][0].time_range.start
                         for i in range(len(calls) - 1)),
        "replays": len(calls),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="B4-32/8-D128-L32K")
    parser.add_argument("--caches", default="f16,i8,i4,nvfp4")
    parser.add_argument("--backend", default="auto",
                        help="a bench_decode.py backend column (auto, "
                             "portable, auto@64s6, ...)")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--layout", choices=("nhd", "hnd"), default="nhd")
    parser.add_argument("--replays", type=int, default=40)
    args = parser.parse_args(argv)
    shapes = {s.name: s for s in bench_decode.SHAPES}
    unknown = [n for n in args.shapes.split(",") if n not in shapes]
    if unknown or args.replays < 4:
        print(f"profile_kernels: unknown shapes {unknown}" if unknown
              else "profile_kernels: --replays must be at least 4",
              file=sys.stderr)
        return 2
    import pattn
    import torch
    chip = bench_decode.device_chip(torch, "profile_kernels")
    if chip is None:
        return 2
    for name in args.shapes.split(","):
        for cache in args.caches.split(","):
            case = bench_decode.PattnCase(
                torch, pattn, chip, shapes[name], cache, args.block_size,
                args.layout, args.backend)
            t = kernel_times(torch, case.graphs(), args.replays)
            gaps = ", ".join(f"{g:.1f}" for g in t["gaps"])
            print(f"{name} {cache} {args.backend}: span {t['span']:.1f} us, "
                  f"period {t['period']:.1f} us, gaps [{gaps}] us "
                  f"({t['replays']} replays)")
            for kernel, us in t["kernels"]:
                print(f"  {us:7.1f} us  {kernel}")
            del case
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
