#!/usr/bin/env python3
"""Prefill benchmark of pattn (issue 30): prompts and prompt chunks over
pattn's own paged caches, against PyTorch SDPA (causal, contiguous f16
cache) in the same process.

A row is a pattn.paged_attention with more than 8 query tokens per
sequence: the last `query_tokens` positions of each sequence attend
causally to everything before them (a whole prompt when query_tokens ==
seq_len, a chunk over a cached prefix otherwise). The cache is written by
pattn's write kernels (bench_decode.PattnCase); each kernel is timed
(prefill: the prefill family, 64 query rows a block, pattn's default,
on wgmma where the chip has it and the caches are quantized;
prefill-mma-sync: the same on mma.sync; prefill-wgmma: on wgmma for every
cache;
xqa-tiles: the XQA decode kernel in query tiles, the earlier default;
portable: the fp32 kernel), every call with CUDA
events (medians), and

    TFLOPS = 4 * B * H * D * attended pairs / time,

with pairs = n * (L - n) + n * (n + 1) / 2 per sequence (n query tokens,
L keys), the count FlashInfer's and the issue's tables use.

    python3 bench/bench_prefill.py                    # every shape x cache
    python3 bench/bench_prefill.py --caches f16,i4 --write-results out.md
    python3 bench/bench_prefill.py --precompile sm_90a   # no GPU needed
    python3 bench/bench_prefill.py --shapes B4-32/8-D128-P4K --caches f16 \
        --backends prefill --no-sdpa --no-mixed --iters 1 --warmup 0   # one kernel, for ncu
"""

from __future__ import annotations

import argparse
import sys

import bench_decode as decode
from bench_decode import Shape
from timing import time_calls

#: Issue 30's rows: B4 x 4K-token prompts and a 512-token chunk over a
#: 16K-token prefix (B8); 32 query heads over 8 KV heads, head_dim 128.
SHAPES = [
    Shape("B4-32/8-D128-P4K", 4, 32, 8, 128, 4096, query_tokens=4096),
    Shape("B8-32/8-D128-C512-L16K", 8, 32, 8, 128, 16384 + 512,
          query_tokens=512),
]
#: The mixed-batch bar: 64 decode tokens and one 2K-token chunk (each
#: sequence 8K long) in one call, against the two parts called separately.
MIXED = Shape("B65-mixed-64x1+C2K-L8K", 65, 32, 8, 128, 8192,
              query_tokens=2048, query_counts=(1,) * 64 + (2048,))
MIXED_PARTS = (Shape("B64-32/8-D128-L8K", 64, 32, 8, 128, 8192),
               Shape("B1-C2K-L8K", 1, 32, 8, 128, 8192, query_tokens=2048))
CACHES = ("f16", "i8", "f8e4m3", "i4", "nvfp4")
BACKENDS = ("xqa-tiles", "prefill-mma-sync", "prefill-wgmma", "prefill",
            "portable")


def attended_pairs(shape: Shape) -> float:
    """(query, key) pairs of one sequence under the causal mask."""
    n, length = shape.query_tokens, shape.seq_len
    return n * (length - n) + n * (n + 1) / 2


def tflops(shape: Shape, us: float) -> float:
    work = 4 * shape.batch * shape.heads * shape.head_dim * \
        attended_pairs(shape)
    return work / (us * 1e-6) / 1e12


def sdpa_call(torch, shape: Shape):
    """SDPA over a contiguous f16 cache of the same shape: causal for a
    whole prompt, an explicit mask for a chunk over a prefix."""
    B, H, Hkv, D = shape.batch, shape.heads, shape.kv_heads, shape.head_dim
    n, length = shape.query_tokens, shape.seq_len
    generator = torch.Generator(device="cuda").manual_seed(7)

    def tensor(*dims):
        return (torch.rand(dims, device="cuda", generator=generator) * 0.9
                + 0.1).to(torch.float16)

    q, k, v = tensor(B, H, n, D), tensor(B, Hkv, length, D), \
        tensor(B, Hkv, length, D)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if n == length:
        return lambda: sdpa(q, k, v, is_causal=True, enable_gqa=True)
    mask = torch.ones(n, length, dtype=torch.bool, device="cuda").tril(
        diagonal=length - n)
    return lambda: sdpa(q, k, v, attn_mask=mask, enable_gqa=True)


MIXED_BACKENDS = ("xqa-tiles", "prefill-mma-sync", "prefill")


def time_case(torch, pattn, chip, shape, cache, backend, args) -> float:
    """Median µs of one pattn call of ``shape`` on ``cache``."""
    case = decode.PattnCase(torch, pattn, chip, shape, cache, 16, "nhd",
                            backend)
    median = time_calls(torch, case.decoders(), args.warmup,
                        args.iters).median_us
    del case
    torch.cuda.empty_cache()
    return median


def mixed_table(torch, pattn, chip, caches, args) -> list:
    """The mixed batch in one call against its parts called one after the
    other (the decode part is plain 1-token decode either way)."""
    lines = [f"Mixed batch: {MIXED.name} (64 sequences with one query token "
             "and one 2048-token chunk, each sequence 8192 keys) in one call "
             f"vs {MIXED_PARTS[0].name} + {MIXED_PARTS[1].name} separately",
             "", "| cache | kernel | mixed µs | decode part µs | chunk part µs "
             "| parts µs | mixed ÷ parts |", "|---|---|---:|---:|---:|---:|---:|"]
    for cache in caches:
        for backend in MIXED_BACKENDS:
            mixed, *parts = [time_case(torch, pattn, chip, shape, cache,
                                       backend, args)
                             for shape in (MIXED, *MIXED_PARTS)]
            lines.append(f"| {cache} | {backend} | {mixed:.1f} | "
                         f"{parts[0]:.1f} | {parts[1]:.1f} | {sum(parts):.1f}"
                         f" | {mixed / sum(parts):.2f}x |")
            print(lines[-1], file=sys.stderr, flush=True)
    return lines


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="all",
                        help="comma-separated names from: " +
                        ", ".join(s.name for s in SHAPES))
    parser.add_argument("--caches", default=",".join(CACHES))
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--precompile", metavar="CHIP",
                        help="only compile the modules into "
                        "$PATTN_ARTIFACT_DIR (no GPU needed)")
    parser.add_argument("--write-results", metavar="PATH")
    parser.add_argument("--no-mixed", action="store_true",
                        help="leave out the mixed-batch table")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="the kernels to time (the others' columns "
                        "print as nan), or with --precompile to compile; "
                        "with --no-sdpa, one kernel alone, for ncu")
    parser.add_argument("--no-sdpa", action="store_true")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    shapes = [s for s in SHAPES
              if args.shapes == "all" or s.name in args.shapes.split(",")]
    caches = [c for c in args.caches.split(",") if c in CACHES]
    backends = [b for b in args.backends.split(",") if b in BACKENDS]
    if not shapes or not caches or not backends:
        print("bench_prefill: nothing selected", file=sys.stderr)
        return 2
    if args.precompile:
        status = decode.precompile(args.precompile, 16, "nhd", backends,
                                   shapes, caches)
        if status or args.no_mixed:
            return status
        return decode.precompile(args.precompile, 16, "nhd",
                                 list(MIXED_BACKENDS),
                                 [MIXED, *MIXED_PARTS], caches)
    import torch
    import pattn
    chip = decode.device_chip(torch, "bench_prefill")
    if chip is None:
        return 2
    lines = [
        decode.run_header(torch, chip, "pattn prefill benchmark") +
        ", 16-token nhd pages, "
        f"medians of {args.iters} eager calls; TFLOPS = 4 B H D pairs / "
        "time", "",
        "| shape | cache | XQA tiles µs | TFLOPS | prefill mma.sync µs | "
        "TFLOPS | prefill wgmma µs | TFLOPS | prefill µs | TFLOPS | "
        "portable µs | TFLOPS | SDPA f16 µs | SDPA TFLOPS | prefill ÷ SDPA "
        "time |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        "---:|---:|"]
    for shape in shapes:
        sdpa = float("nan") if args.no_sdpa else time_calls(
            torch, [sdpa_call(torch, shape)], args.warmup,
            args.iters).median_us
        for cache in caches:
            times = dict.fromkeys(BACKENDS, float("nan"))
            for backend in backends:
                times[backend] = time_case(torch, pattn, chip, shape, cache,
                                           backend, args)
            tiles, portable = times["xqa-tiles"], times["portable"]
            prefill, mma = times["prefill"], times["prefill-mma-sync"]
            wgmma = times["prefill-wgmma"]
            lines.append(
                f"| {shape.name} | {cache} | {tiles:.1f} | "
                f"{tflops(shape, tiles):.1f} | {mma:.1f} | "
                f"{tflops(shape, mma):.1f} | {wgmma:.1f} | "
                f"{tflops(shape, wgmma):.1f} | {prefill:.1f} | "
                f"{tflops(shape, prefill):.1f} | {portable:.1f} | "
                f"{tflops(shape, portable):.1f} | {sdpa:.1f} | "
                f"{tflops(shape, sdpa):.1f} | {prefill / sdpa:.2f}x |")
            print(lines[-1], file=sys.stderr, flush=True)
    if not args.no_mixed:
        lines += [""] + mixed_table(torch, pattn, chip, caches, args)
    table = "\n".join(lines) + "\n"
    print(table)
    if args.write_results:
        with open(args.write_results, "w") as f:
            f.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
