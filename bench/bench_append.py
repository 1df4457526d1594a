#!/usr/bin/env python3
"""A 32K-token prompt's append into pattn's caches (issue 30, item 4):
correct, bounded in memory and at the copy bandwidth.

One sequence of 32768 tokens, 8 KV heads of 128 (Llama-3-8B's cache), K
and V written by the module's ``write_k`` and ``write_v`` (pattn's
write_cache kernels) into 16-token NHD pages in a random order, for each
cache of bench_decode (f16; i8, f8e4m3 and nvfp4 at a tensor scale; i4
with a channel table). Per cache:

- correct: every byte of the pages (and nvfp4's group scales) equals what
  pattn's float64 reference quantizer writes for the same rows and slots;
- bounded: the append allocates nothing on the device (the allocator's
  peak does not move);
- fast: bytes moved (the f16 rows read, the pages and scales written) per
  second, against a device-to-device copy of the same number of bytes
  timed in the same run (which reads and writes each byte: 2 x its size).
  The bar is 70% of the copy.

    python3 bench/bench_append.py --write-results out.md
    python3 bench/bench_append.py --precompile sm_90a   # no GPU needed
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import bench_decode as decode
from bench_decode import Shape
from timing import time_calls

SHAPE = Shape("B1-32/8-D128-P32K", 1, 32, 8, 128, 32768)
CACHES = tuple(decode.CACHES)
BAR = 0.70


def written_bytes(cache: str) -> int:
    """Bytes the append writes into the pages and scale buffers (both
    sides), and reads of f16 rows."""
    encoding, scale = decode.cache_format(SHAPE, cache)
    rows = SHAPE.seq_len * SHAPE.kv_heads
    total = 2 * rows * decode.row_bytes(encoding, SHAPE.head_dim)
    if encoding == "nvfp4":
        total += 2 * rows * SHAPE.head_dim // 16
    return total


def read_bytes() -> int:
    return 2 * SHAPE.seq_len * SHAPE.kv_heads * SHAPE.head_dim * 2


def check_pages(case, cache: str) -> bool:
    """The device pages against the float64 reference quantizer."""
    from pattn import reference as ref
    encoding, scale = decode.cache_format(SHAPE, cache)
    slots = case.slots.cpu().numpy()
    blocks = case.copies[0]["k_pages"].shape[0]
    ok = True
    for side in ("k", "v"):
        expected = ref.PagedCache.allocate(
            encoding, scale, "nhd", blocks, 16, SHAPE.kv_heads,
            SHAPE.head_dim, np.random.default_rng(0))
        operand = case.operands[side]
        rows = case.new_rows[f"{side}_new"].float().cpu().numpy()
        expected.write(rows, slots, None if operand is None
                       else operand.cpu().numpy())
        got = case.copies[0][f"{side}_pages"].cpu().numpy().view(np.uint8)
        ok &= bool(np.array_equal(got, expected.storage))
        groups = case.copies[0].get(f"{side}_groups")
        if groups is not None:
            ok &= bool(np.array_equal(
                groups.view(case.torch.uint8).cpu().numpy(),
                expected.group_scales))
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caches", default=",".join(CACHES))
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--precompile", metavar="CHIP")
    parser.add_argument("--write-results", metavar="PATH")
    args = parser.parse_args(argv)
    caches = [c for c in args.caches.split(",") if c in CACHES]
    if args.precompile:
        return decode.precompile(args.precompile, 16, "nhd", ["auto"],
                                 [SHAPE], caches)
    import torch
    import pattn
    chip = decode.device_chip(torch, "bench_append")
    if chip is None:
        return 2
    lines = [
        decode.run_header(torch, chip, "pattn 32K-token prompt append") +
        f"; {SHAPE.name}, 16-token NHD pages in random order, write_k + write_v, medians of "
        f"{args.iters} calls; copy = a device copy of the same bytes in "
        "the same run", "",
        "| cache | pages bit-exact | device allocations | µs | GB/s moved "
        "(read + written) | copy GB/s | share of copy |",
        "|---|---|---:|---:|---:|---:|---:|"]
    failed = False
    for cache in caches:
        case = decode.PattnCase(torch, pattn, chip, SHAPE, cache, 16, "nhd",
                                "auto", keep_rows=True)
        k_rows, v_rows = case.new_rows["k_new"], case.new_rows["v_new"]

        def append():
            case.call("write_k", slots=case.slots, k_new=k_rows)
            case.call("write_v", slots=case.slots, v_new=v_rows)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        us = time_calls(torch, [append], args.warmup, args.iters).median_us
        grown = torch.cuda.max_memory_allocated() - base
        exact = check_pages(case, cache)
        moved = read_bytes() + written_bytes(cache)
        src = torch.empty(moved // 2, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        copy_us = time_calls(torch, [lambda: dst.copy_(src)], args.warmup,
                             args.iters).median_us
        rate, copy_rate = moved / us / 1e3, 2 * src.numel() / copy_us / 1e3
        share = rate / copy_rate
        failed |= not exact or grown != 0 or share < BAR
        lines.append(f"| {cache} | {'yes' if exact else '**no**'} | "
                     f"{grown} B | {us:.1f} | {rate:.0f} | {copy_rate:.0f} | "
                     f"{share:.0%} |")
        print(lines[-1], file=sys.stderr, flush=True)
        del case, src, dst
        torch.cuda.empty_cache()
    lines += ["", f"Bar: pages bit-exact, no allocation, >= {BAR:.0%} of "
              f"copy. Result: {'FAIL' if failed else 'PASS'}"]
    table = "\n".join(lines) + "\n"
    print(table)
    if args.write_results:
        with open(args.write_results, "w") as out:
            out.write(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
