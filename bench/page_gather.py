#!/usr/bin/env python3
"""The read ceiling of a paged decode's copy pattern, without the decode.

A decode reads, for each (sequence, KV head) and split, the K and V rows of
its keys from pages scattered by the block table. This benchmark runs only
that copy: blocks of 128 threads laid out as the XQA decode's grid (splits
x KV heads x sequences), each streaming its keys in tiles through a ring
of S stages in shared memory, with a block barrier a tile and a trivial
read of each landed tile; the split's block-table entries are staged in
shared memory first, and every index is a compile-time power of two (one
kernel per configuration), so the loop holds little besides the copies.
It varies what the cache format changes, the bytes of a row per head (64
for D128 int4, 128 for int8, 256 for f16), the page layout (NHD: a key's
row of every head together; HND: a page's 16 rows of one head together),
how the bytes move (16-byte cp.async per thread, or cp.async.bulk per row
or per HND page-run completing on an mbarrier) and the ring (tile keys,
stages, blocks per SM), so a 4-bit decode's ceiling can be told apart from
its kernel's.

    python3 bench/page_gather.py                   # the default grid
    python3 bench/page_gather.py --rows 64,256 --stages 2,4 --layout hnd

Prints a Markdown table: µs, effective TB/s (K + V bytes / time) and the
share of a device-to-device copy timed in the same process. Needs torch
and cupy (the GPU machine has both) and an sm_90 GPU (cp.async.bulk); it
has no CPU mode.
"""

import argparse
import sys

SOURCE = r"""
// ROW, TILE, STAGES, HND, MODE, CLUSTER and CLUSTER_SYNC are defined before
// this text: every index is a compile-time power of two, as in a generated
// decode kernel. CLUSTER > 1 launches the blocks of CLUSTER consecutive KV
// heads (same split and sequence) as one thread-block cluster, so that
// they run at once and read the same pages together; CLUSTER_SYNC adds a
// cluster barrier a tile, which keeps them in step.
// MODE 0: 16-byte cp.async per thread and chunk, cp.async.wait_group and a
// block barrier a tile; MODE 1: cp.async.bulk of whole rows (NHD) or of a
// page's 16 contiguous rows (HND), completing on an mbarrier a stage.
#if CLUSTER > 1
#define CLUSTER_DIMS __cluster_dims__(1, CLUSTER, 1)
#else
#define CLUSTER_DIMS
#endif
extern "C" __global__ void __launch_bounds__(128) CLUSTER_DIMS
gather(const char *__restrict__ key, const char *__restrict__ value,
       const int *__restrict__ table, int pagesPerSeq, int kvHeads,
       int keysPerSplit, unsigned *__restrict__ out) {
  extern __shared__ __align__(128) char ring[];
  constexpr int STAGE = 2 * TILE * ROW;
  int split = blockIdx.x, head = blockIdx.y, seq = blockIdx.z;
  int first = split * keysPerSplit;
  int tiles = keysPerSplit / TILE;
  int *entries = (int *)(ring + STAGES * STAGE);
  unsigned long long *bars =
      (unsigned long long *)(ring + STAGES * STAGE + 4 * (keysPerSplit / 16));
  const int *pages = table + seq * pagesPerSeq + first / 16;
  for (int i = threadIdx.x; i < keysPerSplit / 16; i += blockDim.x)
    entries[i] = pages[i];
  if (MODE == 1 && threadIdx.x < STAGES) {
    unsigned bar = (unsigned)__cvta_generic_to_shared(bars + threadIdx.x);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar));
  }
  __syncthreads();
  auto rowOf = [&](int page, int slot) -> long {
    return HND ? ((long)page * kvHeads + head) * 16 + slot
               : ((long)page * 16 + slot) * kvHeads + head;
  };
  auto issue = [&](int t) {
    char *stage = ring + (t % STAGES) * STAGE;
    if (MODE == 0) {
      if (t < tiles) {
        constexpr int CHUNKS = 2 * TILE * ROW / 16;
#pragma unroll
        for (int c = threadIdx.x; c < CHUNKS; c += 128) {
          int side = c / (CHUNKS / 2), within = c % (CHUNKS / 2);
          int k = t * TILE + within / (ROW / 16);
          int offset = (within % (ROW / 16)) * 16;
          long row = rowOf(entries[k / 16], k % 16);
          const char *src = (side ? value : key) + row * ROW + offset;
          unsigned dst = (unsigned)__cvta_generic_to_shared(stage + c * 16);
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
                       "l"(src));
        }
      }
      asm volatile("cp.async.commit_group;" ::);
      return;
    }
    // Warp 0 copies: lane 0 announces the stage's bytes first.
    if (t >= tiles || threadIdx.x >= 32)
      return;
    unsigned bar = (unsigned)__cvta_generic_to_shared(bars + t % STAGES);
    if (threadIdx.x == 0)
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                   ::"r"(bar), "r"(STAGE) : "memory");
    __syncwarp();
    // A copy per row (NHD) or per page of 16 contiguous rows (HND).
    constexpr int RUN = HND ? 16 : 1, COPIES = 2 * TILE / RUN;
    for (int c = threadIdx.x; c < COPIES; c += 32) {
      int side = c / (COPIES / 2), k = t * TILE + (c % (COPIES / 2)) * RUN;
      long row = rowOf(entries[k / 16], k % 16);
      const char *src = (side ? value : key) + row * ROW;
      unsigned dst = (unsigned)__cvta_generic_to_shared(
          stage + side * TILE * ROW + (k % TILE) * ROW);
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx"
                   "::bytes [%0], [%1], %2, [%3];" ::"r"(dst), "l"(src),
                   "r"(RUN * ROW), "r"(bar) : "memory");
    }
  };
  for (int t = 0; t < STAGES - 1; ++t)
    issue(t);
  unsigned acc = 0;
  for (int t = 0; t < tiles; ++t) {
    issue(t + STAGES - 1);
    if (MODE == 0) {
      // Tile t has landed once at most STAGES - 1 newer groups are pending.
      asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 1));
    } else {
      unsigned bar = (unsigned)__cvta_generic_to_shared(bars + t % STAGES);
      unsigned parity = (t / STAGES) & 1, done = 0;
      while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64"
                     " p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
    __syncthreads();
    if (CLUSTER > 1 && CLUSTER_SYNC)
      asm volatile("barrier.cluster.arrive.relaxed.aligned;\n"
                   "barrier.cluster.wait.aligned;" ::: "memory");
    const unsigned *words = (const unsigned *)(ring + (t % STAGES) * STAGE);
    for (int w = threadIdx.x; w < STAGE / 4; w += 128 * 8)
      acc ^= words[w];
    __syncthreads();
  }
  if (acc == 0x9e3779b9u)
    out[0] = acc;
}
"""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--length", type=int, default=32768)
    p.add_argument("--rows", default="64,128,256",
                   help="bytes of one key's row per head (64: D128 int4)")
    p.add_argument("--tile-keys", default="64,128")
    p.add_argument("--stages", default="2,3,4,6")
    p.add_argument("--blocks-per-sm", default="2,4",
                   help="resident blocks an SM (the splits are chosen so "
                        "that one wave fills them)")
    p.add_argument("--layout", default="nhd,hnd")
    p.add_argument("--copies", default="cp.async,bulk",
                   help="cp.async (16 bytes a thread, a barrier a tile) or "
                        "bulk (cp.async.bulk per row, or per page of rows "
                        "on HND, an mbarrier a stage)")
    p.add_argument("--cluster", default="1",
                   help="KV heads whose blocks form one cluster (1: none; "
                        "a trailing s adds a cluster barrier a tile, e.g. "
                        "1,8,8s)")
    p.add_argument("--iters", type=int, default=50)
    return p.parse_args(argv)


def ints(text):
    return [int(x) for x in text.split(",") if x]


def main(argv):
    args = parse_args(argv)
    try:
        import cupy as cp
        import torch
    except ImportError as error:
        print(f"page_gather: needs torch and cupy ({error})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("page_gather: no GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernels = {}

    def kernel_for(row, tile, stages, hnd, mode, cluster):
        spec = (row, tile, stages, hnd, mode, cluster)
        if spec not in kernels:
            size = int(cluster.rstrip("s"))
            defines = (f"#define ROW {row}\n#define TILE {tile}\n"
                       f"#define STAGES {stages}\n#define HND {hnd}\n"
                       f"#define MODE {mode}\n#define CLUSTER {size}\n"
                       f"#define CLUSTER_SYNC {int(cluster.endswith('s'))}\n")
            kernel = cp.RawKernel(defines + SOURCE, "gather",
                                  options=("-std=c++17", "-arch=sm_90a"),
                                  backend="nvrtc")
            kernel.max_dynamic_shared_size_bytes = 227 * 1024
            kernels[spec] = kernel
        return kernels[spec]

    def timed(fn):
        start, stop = torch.cuda.Event(True), torch.cuda.Event(True)
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.iters):
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e3)
        times.sort()
        return times[len(times) // 2]

    big = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    copy_to = torch.empty_like(big)
    copy_us = timed(lambda: copy_to.copy_(big))
    copy_tbs = 2 * big.numel() / copy_us / 1e6
    del big, copy_to

    pages_per_seq = args.length // 16
    generator = torch.Generator().manual_seed(7)
    total_pages = args.batch * pages_per_seq
    table = torch.randperm(total_pages, generator=generator).to(torch.int32)
    table = table.reshape(args.batch, pages_per_seq).to(device)
    out = torch.zeros(1, dtype=torch.int32, device=device)
    name = torch.cuda.get_device_name(0)
    print(f"page gather: {name}, {sms} SMs, copy {copy_tbs:.2f} TB/s; B{args.batch} "
          f"{args.kv_heads} KV heads L{args.length}, random block tables; "
          f"medians of {args.iters}")
    print()
    print("| row B | layout | copies | cluster | tile keys | stages | blocks/SM "
          "| splits | KiB in flight/SM | µs | TB/s | % copy |")
    print("|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    def run(row, layout, copies, cluster, tile, stages, k, v, cache_bytes):
        stage_bytes = 2 * tile * row
        for blocks in ints(args.blocks_per_sm):
            # One wave: splits x heads x batch = blocks x SMs.
            splits = max(1, blocks * sms // (args.kv_heads * args.batch))
            while args.length % splits or (args.length // splits) % tile:
                splits -= 1
            per_split = args.length // splits
            shared = stages * stage_bytes + 4 * (per_split // 16) + 8 * stages
            if (shared + 1024) * blocks > 227 * 1024:
                continue
            kernel = kernel_for(row, tile, stages, int(layout == "hnd"),
                                int(copies == "bulk"), cluster)
            grid = (splits, args.kv_heads, args.batch)
            params = (cp.uint64(k.data_ptr()), cp.uint64(v.data_ptr()),
                      cp.uint64(table.data_ptr()), cp.int32(pages_per_seq),
                      cp.int32(args.kv_heads), cp.int32(per_split),
                      cp.uint64(out.data_ptr()))
            us = timed(lambda: kernel(grid, (128,), params,
                                      shared_mem=shared))
            tbs = 2 * cache_bytes / us / 1e6
            flight = blocks * (stages - 1) * stage_bytes / 1024
            print(f"| {row} | {layout} | {copies} | {cluster} | {tile} | {stages} "
                  f"| {blocks} | {splits} | {flight:.0f} | {us:.1f} "
                  f"| {tbs:.2f} | {100 * tbs / copy_tbs:.0f}% |", flush=True)

    for row in ints(args.rows):
        cache_bytes = total_pages * 16 * args.kv_heads * row
        k = torch.randint(0, 255, (cache_bytes,), dtype=torch.uint8, device=device)
        v = torch.randint(0, 255, (cache_bytes,), dtype=torch.uint8, device=device)
        for layout in args.layout.split(","):
            for copies in args.copies.split(","):
                for cluster in args.cluster.split(","):
                    for tile in ints(args.tile_keys):
                        for stages in ints(args.stages):
                            run(row, layout, copies, cluster, tile, stages,
                                k, v, cache_bytes)
        del k, v
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
