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

With --prefill it takes bench_prefill.py's rows (prompts, chunks over a
prefix, the mixed batch) and kernels (--backend prefill, prefill-wgmma, ...)
and profiles eager calls, as bench_prefill.py times them:

  cd bench && python3 profile_kernels.py --prefill --shapes B4-32/8-D128-P4K \\
      --caches i4,nvfp4 --backend prefill

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
    parser.add_argument("--shapes", default=None,
                        help="default B4-32/8-D128-L32K (--prefill: "
                        "B4-32/8-D128-P4K)")
    parser.add_argument("--caches", default="f16,i8,i4,nvfp4")
    parser.add_argument("--backend", default=None,
                        help="a bench_decode.py backend column (auto, the "
                        "default, portable, auto@64s6, ...), or with "
                        "--prefill a bench_prefill.py kernel (prefill, the "
                        "default, prefill-wgmma, ...)")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--layout", choices=("nhd", "hnd"), default="nhd")
    parser.add_argument("--replays", type=int, default=40)
    parser.add_argument("--prefill", action="store_true",
                        help="bench_prefill.py's rows and kernels, eager "
                        "calls (default shape B4-32/8-D128-P4K)")
    args = parser.parse_args(argv)
    shapes, backends = {s.name: s for s in bench_decode.SHAPES}, None
    shape, backend = "B4-32/8-D128-L32K", "auto"
    if args.prefill:
        import bench_prefill
        shapes = {s.name: s for s in (*bench_prefill.SHAPES,
                                      bench_prefill.MIXED)}
        backends = bench_prefill.BACKENDS
        shape, backend = bench_prefill.SHAPES[0].name, "prefill"
    args.shapes = args.shapes or shape
    args.backend = args.backend or backend
    unknown = [n for n in args.shapes.split(",") if n not in shapes]
    problem = (f"unknown shapes {unknown}" if unknown
               else "--replays must be at least 4" if args.replays < 4
               else "--prefill takes a bench_prefill kernel ("
               + ", ".join(backends) + ")"
               if backends and args.backend not in backends else None)
    if problem:
        print(f"profile_kernels: {problem}", file=sys.stderr)
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
            calls = case.decoders() if args.prefill else case.graphs()
            t = kernel_times(torch, calls, args.replays)
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
