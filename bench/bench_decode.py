#!/usr/bin/env python3
"""Decode-attention benchmark of pattn against PyTorch SDPA (PERF.md).

For each PERF.md shape and cache format this script builds a paged cache
with pattn's own write kernel (random, never-zero K/V; a random block
table of 16-token pages), checks pattn's decode against the float64
reference on a slice (sequence 0, KV head 0), then times

* pattn's decode on each backend (XQA via auto, portable), launched
  plainly and replayed from a CUDA graph, and
* PyTorch's scaled_dot_product_attention on a contiguous fp16 cache of the
  same shape (GQA through enable_gqa, or repeat_interleave on old torch),

with CUDA events around every call, after a warm-up, as medians over many
calls, rotating between enough cache copies that each call reads from DRAM
rather than the 60 MB L2. Results are effective bandwidth (bytes that must
be read / time) and its share of a device-to-device copy measured here.

    python3 bench/bench_decode.py                       # the whole grid
    python3 bench/bench_decode.py --shapes B1-32/8-D128-L8K --caches i4
    python3 bench/bench_decode.py --backends auto --peers peers.json

The Markdown table is printed last; full results go to $OUT/bench.json when
OUT is set, and the table to --write-results PATH when given.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import math
import os
import pathlib
import re
import sys
from typing import Callable, Optional

REPO = pathlib.Path(__file__).resolve().parents[1]
if importlib.util.find_spec("pattn") is None:
    sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "python" / "tests" / "gpu"))  # ir.py

import numpy as np  # noqa: E402

from timing import Timing, time_calls  # noqa: E402,F401  (bench/timing.py)

import ir  # noqa: E402

L2_BYTES = 60 * 2 ** 20  # H200; rotation keeps 2x this between reuses
MB = 1e6


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    seq_len: int
    #: Query tokens per sequence (> 1: speculative decode, causal among
    #: them; SDPA is not timed on those rows).
    query_tokens: int = 1
    #: Each sequence's own query count (a mixed batch of prompt chunks and
    #: decode tokens); query_tokens is then the largest.
    query_counts: tuple = ()
    #: The activations' type (f16 or bf16); the 16-bit cache row stores
    #: the same type (SPEC §6: XQA multiplies the activation's type).
    dtype: str = "f16"


#: Backends timed per row (--backends): auto lowers every benchmark shape
#: to the XQA (tensor-core) kernel; portable is the fp32 CUDA-core kernel.
BACKENDS = ("auto", "portable")

#: PERF.md's decode shapes (one query token per sequence), then short
#: contexts where ONNX Runtime's XQA margin over its portable path is
#: smallest (1.44x at 512 tokens).
SHAPES = [
    Shape("B4-32/8-D128-L32K", 4, 32, 8, 128, 32768),
    Shape("B4-24/4-D256-L32K", 4, 24, 4, 256, 32768),
    Shape("B8-64/8-D128-L16K", 8, 64, 8, 128, 16384),
    Shape("B64-32/8-D128-L4K", 64, 32, 8, 128, 4096),
    Shape("B1-32/8-D128-L8K", 1, 32, 8, 128, 8192),
    Shape("B4-32/8-D128-L2K", 4, 32, 8, 128, 2048),
    Shape("B4-32/8-D128-L512", 4, 32, 8, 128, 512),
    # Speculative decode with 7 drafts (the seeds' measurement): g x 8 = 32
    # query rows per KV head, XQA's largest.
    Shape("B4-32/8-D128-L8K-Q8", 4, 32, 8, 128, 8192, query_tokens=8),
    # The same speculative rows with one sequence of 9 tokens: an op whose
    # max_query_len exceeds 8 gives its sequences of more than 16 / g query
    # tokens to the prefill family (decoded once per tile into shared
    # memory), so this row times that family on speculative decode.
    Shape("B4-32/8-D128-L8K-Q8+9", 4, 32, 8, 128, 8192, query_tokens=9,
          query_counts=(8, 8, 8, 9)),
    Shape("B4-32/8-D128-L8K-Q4", 4, 32, 8, 128, 8192, query_tokens=4),
    Shape("B4-32/8-D128-L512-Q8", 4, 32, 8, 128, 512, query_tokens=8),
    # Issue 29's further rows: bf16 activations (and a bf16 cache on the
    # 16-bit row), and head_dim 64. HND and 64-token pages are whole runs:
    # --layout hnd, --block-size 64.
    Shape("B4-32/8-D128-L32K-bf16", 4, 32, 8, 128, 32768, dtype="bf16"),
    Shape("B4-32/8-D64-L32K", 4, 32, 8, 64, 32768),
]

#: Cache formats: (encoding, scale granularity) of K and of V. The int4
#: cache has per-channel tables passed at run time, so the fold runs on the
#: device (normalizer, query fold, guarded decode) and the module's text does
#: not depend on the data: it can be compiled on a machine without a GPU
#: (--precompile) for a GPU machine without the compiler.
CACHES = {
    "f16": ("f16", "none"),
    "i8": ("i8", "tensor"),
    "f8e4m3": ("f8e4m3", "tensor"),
    "i4": ("i4", "channel"),
    "nvfp4": ("nvfp4", "tensor"),
}

#: PERF.md bar 1 (L >= 8K): share of the copy ceiling to reach.
BAR = {"f16": 0.90, "i8": 0.90, "f8e4m3": 0.90, "i4": 0.85, "nvfp4": 0.85}


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def copy_ceiling(torch, warmup: int) -> float:
    """Device-to-device copy bandwidth in TB/s, counting read + write."""
    nbytes = 2 ** 30
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return time_calls(torch, [lambda: dst.copy_(src)], warmup,
                      30).tbps(2 * nbytes)


def copies_for(nbytes: float) -> int:
    """How many copies to rotate so a copy is re-read only after 2x L2."""
    return min(64, max(2, math.ceil(2 * L2_BYTES / max(nbytes, 1))))


# ---------------------------------------------------------------------------
# One (shape, cache) run
# ---------------------------------------------------------------------------


def row_bytes(encoding: str, head_dim: int) -> int:
    return ir.row_bytes(encoding, head_dim)


def cache_format(shape: Shape, cache: str) -> tuple[str, str]:
    """(encoding, scale granularity) of `cache` on `shape`'s rows: the
    16-bit row stores the activations' type."""
    encoding, scale = CACHES[cache]
    return (shape.dtype if encoding == "f16" else encoding), scale


def torch_dtype(torch, shape: Shape):
    return torch.bfloat16 if shape.dtype == "bf16" else torch.float16


def bytes_read(shape: Shape, cache: str, block_size: int) -> float:
    """Bytes decode must read: every visited K/V row and its scales, the
    block table and lengths, the query (SPEC/PERF accounting)."""
    encoding, scale = cache_format(shape, cache)
    rows = shape.batch * shape.seq_len * shape.kv_heads
    total = 2 * rows * row_bytes(encoding, shape.head_dim)
    if encoding == "nvfp4":
        total += 2 * rows * shape.head_dim // 16  # e4m3 group scales
    if scale == "channel":
        total += 2 * shape.kv_heads * shape.head_dim * 4
    elif scale == "tensor":
        total += 2 * 4
    blocks = shape.batch * (-(-shape.seq_len // block_size))
    total += blocks * 4 + shape.batch * 4
    queries = sum(shape.query_counts) if shape.query_counts else \
        shape.batch * shape.query_tokens
    total += queries * shape.heads * shape.head_dim * 2
    if shape.query_tokens > 1:
        total += (shape.batch + 1) * 4  # query_start
    return float(total)


def sdpa_bytes(shape: Shape) -> float:
    return float(2 * shape.batch * shape.kv_heads * shape.seq_len *
                 shape.head_dim * 2 + shape.batch * shape.heads *
                 shape.head_dim * 2)


def device_chip(torch, program: str) -> Optional[str]:
    """The pattn chip of the CUDA device (sm_90a for the H200), or None
    after saying that ``program`` found no CUDA device."""
    if not torch.cuda.is_available():
        print(f"{program}: no CUDA device", file=sys.stderr)
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}{'a' if major in (9, 10, 12) else ''}"


def run_header(torch, chip: str, title: str) -> str:
    """``title — <UTC time>, <device> (<chip>), commit <PATTN_COMMIT>``:
    the first line of a results table."""
    import datetime
    now = datetime.datetime.now(datetime.timezone.utc)
    return (f"{title} — {now:%Y-%m-%d %H:%M} UTC, "
            f"{torch.cuda.get_device_name()} ({chip}), commit "
            f"{os.environ.get('PATTN_COMMIT', 'unknown')}")


def signed_uniform(torch, shape, generator, magnitude=1.0):
    """Random values with |x| in [0.1, 1) * magnitude: never zero."""
    u = torch.rand(shape, device="cuda", generator=generator) * 2 - 1
    return torch.sign(u) * (0.1 + 0.9 * u.abs()) * magnitude


def bench_config(shape: Shape, cache: str, block_size: int,
                 layout: str) -> ir.Config:
    """The test-IR configuration of one benchmark row."""
    encoding, scale = cache_format(shape, cache)
    return ir.Config(
        k_encoding=encoding, k_scale=scale, v_encoding=encoding,
        v_scale=scale, head_dim=shape.head_dim, block_size=block_size,
        kv_heads=shape.kv_heads, g=shape.heads // shape.kv_heads,
        query_tokens=shape.query_tokens, query_counts=shape.query_counts,
        seq_lens=(shape.seq_len,) * shape.batch,
        layout=layout, dtype=shape.dtype, static_tables=False)


def compile_options(backend: str) -> dict:
    """pattn.compile's options for a benchmark column: a backend,
    "prefill" (auto, with the prefill family for prompts: the default),
    "prefill-mma-sync" (the prefill family on mma.sync, not wgmma),
    "prefill-wgmma" (on wgmma wherever it serves, 16-bit caches too),
    "xqa-tiles" (auto, prompts on the decode kernel in query tiles),
    "auto@<keys>" (auto, XQA plans asked for <keys>-key tiles; 0: the
    planner's), or "auto@<keys>s<stages>" (and for a ring of <stages>);
    "c<heads>" after them (e.g. "auto@0c8") for clusters of that many KV
    heads' blocks, "m<splits>" (e.g. "auto@0m8") for that many splits as
    one cluster that merges them (no merge launch), "u" (e.g. "auto@0u")
    for a lone split that merges its own rows, a trailing "w" (e.g. "auto@0w") for a copy warp, a
    trailing "a" (e.g. "auto@0a") for plans that score a tile ahead."""
    if backend == "prefill":
        return {"backend": "auto", "prompt_kernel": "prefill"}
    if backend in ("prefill-mma-sync", "prefill-wgmma"):
        return {"backend": "auto", "prompt_kernel": backend}
    if backend == "xqa-tiles":
        return {"backend": "auto", "prompt_kernel": "xqa"}
    if backend.startswith("auto@"):
        spec = re.fullmatch(
            r"(\d+)(?:s(\d+))?(?:c(\d+))?(?:m(\d+))?(u?)(w?)(a?)",
                            backend.split("@", 1)[1])
        if not spec:
            raise ValueError(f"unknown benchmark column {backend!r}")
        (keys, stages, cluster, merging, merges_unsplit, copy_warp,
         scores_ahead) = spec.groups()
        options = {"backend": "auto", "xqa_keys_per_tile": int(keys)}
        if stages:
            options["xqa_stages"] = int(stages)
        if cluster:
            options["xqa_cluster_heads"] = int(cluster)
        if merging:
            options["xqa_cluster_splits"] = int(merging)
        if merges_unsplit:
            options["xqa_merge_unsplit"] = True
        if copy_warp:
            options["xqa_copy_warp"] = True
        if scores_ahead:
            options["xqa_scores_ahead"] = True
        return options
    return {"backend": backend}


def precompile(chip: str, block_size: int, layout: str,
               backends: list[str], shapes: list[Shape],
               caches: list[str]) -> int:
    """Compiles the benchmark modules of `shapes` x `caches` into
    $PATTN_ARTIFACT_DIR."""
    import pattn
    if not os.environ.get("PATTN_ARTIFACT_DIR"):
        print("bench_decode: --precompile needs PATTN_ARTIFACT_DIR",
              file=sys.stderr)
        return 2
    for shape in shapes:
        for cache in caches:
            text = ir.emit_paged(bench_config(shape, cache, block_size,
                                              layout)).text
            for backend in backends:
                pattn.compile(text, chips=[chip], **compile_options(backend))
    print(f"{len(shapes) * len(caches) * len(backends)} benchmark modules "
          f"for {chip}")
    return 0


class PattnCase:
    """A compiled decode for one shape and cache, its filled cache copies
    and its inputs, on the GPU."""

    def __init__(self, torch, pattn, chip: str, shape: Shape, cache: str,
                 block_size: int, layout: str, backend: str,
                 keep_rows: bool = False, page_order: str = "random"):
        """``keep_rows``: keep the written rows and their slots
        (``new_rows``, ``slots``) for a caller that writes them again.
        ``page_order``: "random" (a permutation, as a serving engine's
        block tables look after warm-up) or "linear" (sequence b's pages in
        order, one sequence after another)."""
        self.torch, self.shape, self.cache = torch, shape, cache
        encoding, scale = cache_format(shape, cache)
        dtype = torch_dtype(torch, shape)
        B, L, H, D = shape.batch, shape.seq_len, shape.kv_heads, shape.head_dim
        self.config = bench_config(shape, cache, block_size, layout)
        generator = torch.Generator(device="cuda").manual_seed(2026)

        # K and V of every position; channels differ in size by up to 4x.
        magnitude = torch.exp2(torch.rand((H, D), device="cuda",
                                          generator=generator) * 2 - 1)
        new_rows = {
            "k_new": signed_uniform(torch, (B * L, H, D), generator,
                                    magnitude).to(dtype),
            "v_new": signed_uniform(torch, (B * L, H, D), generator,
                                    magnitude.flip(1)).to(dtype)}
        # Scales a serving stack would calibrate: amax / max code.
        self.operands = {p: self._scale(encoding, scale, new_rows[f"{p}_new"])
                         for p in "kv"}
        self.module_ir = ir.emit_paged(self.config)
        self.module = pattn.load(pattn.compile(
            self.module_ir.text, chips=[chip], **compile_options(backend)))

        # A random block table over B * ceil(L / bs) pages; -1 past the end.
        per_seq = -(-L // block_size)
        num_blocks = B * per_seq
        pages = torch.randperm(num_blocks, device="cuda", generator=generator)
        if page_order == "linear":
            pages = torch.arange(num_blocks, device="cuda")
        table = torch.full((B, self.config.max_blocks), -1, dtype=torch.int32,
                           device="cuda")
        table[:, :per_seq] = pages.view(B, per_seq).to(torch.int32)
        positions = torch.arange(L, device="cuda")
        slots = (table[:, positions // block_size].long() * block_size
                 + positions % block_size).reshape(-1)

        counts = shape.query_counts or (shape.query_tokens,) * B
        rows = sum(counts)
        self.inputs = {
            "block_table": table,
            "seq_lens": torch.full((B,), L, dtype=torch.int32, device="cuda"),
            "query": signed_uniform(torch, (rows, shape.heads, D),
                                    generator).to(dtype),
            "out": torch.empty((rows, shape.heads, D), dtype=dtype,
                               device="cuda"),
        }
        if shape.query_tokens > 1:
            starts = [0]
            for count in counts:
                starts.append(starts[-1] + count)
            self.inputs["query_start"] = torch.tensor(
                starts, dtype=torch.int32, device="cuda")
        for prefix in "kv":
            if self.operands[prefix] is not None:
                self.inputs[f"{prefix}_scale"] = self.operands[prefix]

        # The cache, filled by pattn's own write kernels ...
        element = {"i8": torch.uint8, "f8E4M3FN": torch.float8_e4m3fn,
                   "f32": torch.float32}
        storage = {}
        for prefix in "kv":
            for arg in ir.cache_args(self.config, prefix, encoding, scale):
                storage[arg.name] = torch.empty(
                    (num_blocks,) + tuple(arg.shape[1:]),
                    dtype=element[arg.element], device="cuda")
        self.copies = [storage]
        self.call("write_k", slots=slots, k_new=new_rows["k_new"])
        self.call("write_v", slots=slots, v_new=new_rows["v_new"])
        torch.cuda.synchronize()
        if keep_rows:
            self.new_rows, self.slots = new_rows, slots
        del new_rows

        # ... and copies of it to rotate through.
        self.nbytes = bytes_read(shape, cache, block_size)
        self.copies += [{name: t.clone() for name, t in storage.items()}
                        for _ in range(copies_for(self.nbytes) - 1)]

    @staticmethod
    def _scale(encoding, scale, values):
        """amax / max_code in fp32: [1] for tensor, [H, D] for channel."""
        if scale == "none":
            return None
        max_code = {"i8": 127.0, "i4": 7.0, "f8e4m3": 448.0,
                    "nvfp4": 2688.0}[encoding]
        if scale == "tensor":
            return (values.abs().amax().float() / max_code).reshape(1)
        return (values.abs().amax(dim=0).float() / max_code).contiguous()

    def call(self, name: str, copy: int = 0, **extra) -> None:
        """Runs function ``name`` on cache copy ``copy``."""
        tensors = {**self.inputs, **self.copies[copy], **extra}
        args = [tensors[arg.name] for arg in self.module_ir.functions[name]]
        getattr(self.module, name)(*args)

    def decoders(self) -> list[Callable[[], None]]:
        return [lambda c=c: self.call("decode", c)
                for c in range(len(self.copies))]

    def graphs(self) -> list[Callable[[], None]]:
        """One captured decode per cache copy, replayed in rotation."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for decode in self.decoders():
                decode()
        torch.cuda.current_stream().wait_stream(side)
        graphs = []
        for decode in self.decoders():
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                decode()
            graphs.append(graph)
        return [graph.replay for graph in graphs]

    def check(self) -> dict:
        """pattn vs the float64 reference on sequence 0 and KV head 0:
        the pages of that sequence are read back and dequantized on the
        host. Returns the worst error and its share of the tolerance."""
        from pattn import reference as ref
        torch, shape, config = self.torch, self.shape, self.config
        self.inputs["out"].fill_(float("nan"))
        self.call("decode")
        torch.cuda.synchronize()
        per_seq = -(-shape.seq_len // config.block_size)
        pages = self.inputs["block_table"][0, :per_seq].long()
        encoding, scale = cache_format(shape, self.cache)
        dense = {}
        for prefix in "kv":
            def head0(name):  # [pages, bs, 1, X] of KV head 0, nhd or hnd
                t = self.copies[0][name][pages]
                t = t[:, :, 0:1] if config.layout == "nhd" else t[:, 0:1]
                if t.dtype == torch.float8_e4m3fn:
                    t = t.view(torch.uint8)
                return t.contiguous().cpu().numpy()
            host = ref.PagedCache(
                encoding, scale, config.layout, per_seq, config.block_size, 1,
                shape.head_dim, head0(f"{prefix}_pages"),
                head0(f"{prefix}_groups") if encoding == "nvfp4" else None)
            operand = self.operands[prefix]
            if operand is not None:
                operand = operand.cpu().numpy()
                operand = operand[0:1] if scale == "channel" else operand
            dense[prefix] = host.dequantize(operand)
        g = shape.heads // shape.kv_heads
        n = shape.query_tokens
        query = self.inputs["query"][0:n, 0:g].float().cpu().numpy()
        want = ref.paged_attention_ref(
            query, dense["k"], dense["v"], np.arange(per_seq)[None],
            [shape.seq_len], np.array([0, n]) if n > 1 else None,
            num_heads=g,
            softmax_scale=ref.default_softmax_scale(shape.head_dim))
        got = self.inputs["out"][0:n, 0:g].float().cpu().numpy()
        error = np.abs(got - want)
        # SPEC §8: fp16 atol 8e-4, bf16 6e-3; rtol 5e-3.
        atol = 6e-3 if shape.dtype == "bf16" else 8e-4
        ratio = error / (atol + 5e-3 * np.abs(want))
        finite = bool(np.isfinite(got).all())
        return {"max_abs_err": float(error.max()),
                "err_over_tol": float(ratio.max()) if finite else math.inf,
                "finite": finite, "ok": finite and float(ratio.max()) <= 1}


class SdpaCase:
    """PyTorch SDPA over a contiguous fp16 cache of the same shape."""

    def __init__(self, torch, shape: Shape):
        self.torch, self.shape = torch, shape
        B, H, Hkv, D, L = (shape.batch, shape.heads, shape.kv_heads,
                           shape.head_dim, shape.seq_len)
        generator = torch.Generator(device="cuda").manual_seed(7)

        def tensor(*dims):
            x = torch.rand(dims, device="cuda", generator=generator) * 0.9 + 0.1
            return x.to(torch.float16)

        self.query = tensor(B, H, 1, D)
        self.nbytes = sdpa_bytes(shape)
        self.gqa = self._has_enable_gqa()
        self.copies = []
        for _ in range(copies_for(self.nbytes)):
            k, v = tensor(B, Hkv, L, D), tensor(B, Hkv, L, D)
            if not self.gqa:  # old torch: expand the KV heads up front
                k = k.repeat_interleave(H // Hkv, dim=1)
                v = v.repeat_interleave(H // Hkv, dim=1)
            self.copies.append((k, v))

    def _has_enable_gqa(self) -> bool:
        torch = self.torch
        q = torch.zeros((1, 2, 1, 8), device="cuda", dtype=torch.float16)
        kv = torch.zeros((1, 1, 4, 8), device="cuda", dtype=torch.float16)
        try:
            torch.nn.functional.scaled_dot_product_attention(
                q, kv, kv, enable_gqa=True)
            return True
        except TypeError:
            return False

    def calls(self) -> list[Callable[[], None]]:
        sdpa = self.torch.nn.functional.scaled_dot_product_attention
        kwargs = {"enable_gqa": True} if self.gqa else {}
        return [lambda k=k, v=v: sdpa(self.query, k, v, **kwargs)
                for k, v in self.copies]


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def _us(timing: Optional[dict]) -> str:
    return "—" if not timing else f"{timing['median_us']:.1f}"


def _tb(timing: Optional[dict], key: str = "tbps") -> str:
    return "—" if not timing else f"{timing[key]:.2f}"


def _pct(timing: Optional[dict]) -> str:
    return "—" if not timing else f"{100 * timing['copy_share']:.0f}%"


def _peer(row: dict, kv: str, paths: tuple[str, ...]) -> Optional[dict]:
    """The fastest of FlashInfer's `paths` for cache `kv` in a peers row
    (graph replay where it ran), among outputs that passed their check."""
    best = None
    for path in paths:
        result = (row or {}).get(kv, {}).get(path, {})
        timing = result.get("graph") or result.get("plain")
        if not timing or not result.get("check", {}).get("ok"):
            continue
        if best is None or timing["median_us"] < best["median_us"]:
            best = timing
    return best


def markdown(report: dict) -> str:
    backends = report["backends"]
    peers = {row["shape"]: row for row in report.get("peers", {}).get("rows", [])}
    lines = [
        f"pattn decode benchmark — {report['date']}, {report['gpu']} "
        f"({report['chip']}), commit {report['commit'][:12]}, copy ceiling "
        f"{report['copy_tbps']:.2f} TB/s, {report['block_size']}-token "
        f"{report['layout']} pages ({report.get('page_order', 'random')} "
        f"block tables), medians of {report['iters']} calls; "
        "µs / effective TB/s / share of the copy ceiling, CUDA-graph replay",
        ""]
    if report.get("peers"):
        lines += [f"Peers in the same run: FlashInfer "
                  f"{report['peers'].get('flashinfer')} (best passing path: "
                  "f16 tensor-core or XQA; fp8 tensor-core or XQA) and "
                  "PyTorch SDPA on a contiguous f16 cache.", ""]
    header = ["shape", "cache", "MB read"]
    for backend in backends:
        name = "XQA (auto)" if backend == "auto" else backend
        header += [f"{name} µs", "TB/s", "% copy"]
    header += ["bar"]
    if len(backends) == 2:
        header += ["XQA vs portable"]
    header += ["FlashInfer f16", "FlashInfer fp8", "SDPA f16", "check"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" if i < 2 or h in ("bar", "check")
                                else "---:" for i, h in enumerate(header)) + "|")
    for row in report["rows"]:
        cells = [row["shape"], row["cache"], f"{row['bytes'] / MB:.1f}"]
        timings = {}
        checks = []
        for backend in backends:
            result = row["backends"].get(backend, {})
            best = result.get("graph") or result.get("plain")
            timings[backend] = best
            cells += [_us(best), _tb(best), _pct(best)]
            check = result.get("error") or "—"
            if result.get("check"):
                verdict = "ok" if result["check"]["ok"] else "FAIL"
                check = f"{verdict} {result['check']['err_over_tol']:.2f}"
            checks.append(check)
        first = timings[backends[0]]
        bar = "—"
        if first and row["seq_len"] >= 8192:
            target = BAR[row["cache"]]
            met = "met" if first["copy_share"] >= target else "missed"
            bar = f"{met} ({100 * target:.0f}%)"
        cells.append(bar)
        if len(backends) == 2:
            a, b = timings[backends[0]], timings[backends[1]]
            cells.append(f"{b['median_us'] / a['median_us']:.2f}x"
                         if a and b else "—")
        peer = peers.get(row["shape"])
        for kv, paths in (("f16", ("fi_tc", "fi_xqa")),
                          ("fp8", ("fi_tc", "fi_xqa"))):
            timing = _peer(peer, kv, paths)
            cells.append(f"{timing['median_us']:.1f}" if timing else "—")
        sdpa = row.get("sdpa")
        cells.append(_us(sdpa))
        cells.append(" / ".join(checks))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="all",
                        help="comma-separated names from: " +
                        ", ".join(s.name for s in SHAPES))
    parser.add_argument("--caches", default=",".join(CACHES),
                        help="comma-separated cache formats")
    parser.add_argument("--iters", type=int, default=100,
                        help="timed calls per measurement (>= 50)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--layout", choices=("nhd", "hnd"), default="nhd")
    parser.add_argument("--page-order", choices=("random", "linear"),
                        default="random",
                        help="the block tables: a random permutation of the "
                        "pages (the default), or each sequence's pages in "
                        "order (to separate page scatter from the kernel)")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="pattn backends to time per row (auto, "
                        "portable, xqa); the first one is held to the bar")
    parser.add_argument("--peers", metavar="JSON",
                        help="FlashInfer results of ../shared/peers/"
                        "flashinfer_decode.py --out, shown per shape")
    parser.add_argument("--no-sdpa", action="store_true",
                        help="skip the PyTorch SDPA peer")
    parser.add_argument("--time-failed", action="store_true",
                        help="time configurations whose check failed too")
    parser.add_argument("--precompile", metavar="CHIP",
                        help="only compile the modules for CHIP into "
                             "$PATTN_ARTIFACT_DIR (no GPU needed)")
    parser.add_argument("--write-results", metavar="PATH",
                        help="also write the Markdown table to PATH "
                        "(e.g. bench/results/<date>-h200.md)")
    args = parser.parse_args(argv)
    if args.iters < 50:
        parser.error("--iters must be at least 50 (PERF.md: many runs)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    shapes = SHAPES if args.shapes == "all" else [
        s for s in SHAPES if s.name in args.shapes.split(",")]
    caches = [c for c in args.caches.split(",") if c in CACHES]
    if not shapes or not caches:
        print("bench_decode: nothing selected", file=sys.stderr)
        return 2
    if args.precompile:
        return precompile(args.precompile, args.block_size, args.layout,
                          args.backends.split(","), shapes, caches)
    try:
        import torch
    except ImportError as error:
        print(f"bench_decode: torch is required ({error})", file=sys.stderr)
        return 2
    chip = device_chip(torch, "bench_decode")
    if chip is None:
        return 2
    import pattn

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    copy_tbps = copy_ceiling(torch, args.warmup)
    log(f"device-to-device copy: {copy_tbps:.2f} TB/s")
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(), "chip": chip,
        "commit": ir.source_commit(), "torch": torch.__version__,
        "copy_tbps": copy_tbps, "block_size": args.block_size,
        "page_order": args.page_order,
        "layout": args.layout, "iters": args.iters, "warmup": args.warmup,
        "l2_bytes": L2_BYTES, "backends": args.backends.split(","),
        "rows": []}
    if args.peers:
        report["peers"] = json.loads(pathlib.Path(args.peers).read_text())

    def timed(calls, nbytes) -> dict:
        timing = time_calls(torch, calls, args.warmup, args.iters)
        return {**dataclasses.asdict(timing), "tbps": timing.tbps(nbytes),
                "copy_share": timing.tbps(nbytes) / copy_tbps,
                "copies": len(calls)}

    for shape in shapes:
        sdpa = None
        if not args.no_sdpa and shape.query_tokens == 1:
            peer = SdpaCase(torch, shape)
            sdpa = timed(peer.calls(), peer.nbytes)
            sdpa["enable_gqa"] = peer.gqa
            del peer
            log(f"{shape.name} SDPA: {sdpa['median_us']:.1f} us")
        for cache in caches:
            row = {"shape": shape.name, "cache": cache,
                   "seq_len": shape.seq_len, **dataclasses.asdict(shape),
                   "bytes": bytes_read(shape, cache, args.block_size),
                   "sdpa": sdpa}
            report["rows"].append(row)
            row["backends"] = {}
            for backend in report["backends"]:
                result = row["backends"][backend] = {}
                try:
                    case = PattnCase(torch, pattn, chip, shape, cache,
                                     args.block_size, args.layout, backend,
                                     page_order=args.page_order)
                    result["check"] = case.check()
                    if result["check"]["ok"] or args.time_failed:
                        result["plain"] = timed(case.decoders(), case.nbytes)
                        try:
                            result["graph"] = timed(case.graphs(), case.nbytes)
                        except Exception as error:  # noqa: BLE001
                            result["graph_error"] = \
                                f"{type(error).__name__}: {error}"
                    del case
                except Exception as error:  # noqa: BLE001 - keep going
                    result["error"] = f"{type(error).__name__}: {error}"[:200]
                torch.cuda.empty_cache()
                log(f"{shape.name} {cache} {backend}: " + (
                    result.get("error") or (
                        f"check {result['check']['err_over_tol']:.2f} of "
                        "tolerance, " + (
                            f"{result['graph']['median_us']:.1f} us graph"
                            if "graph" in result else "not timed"))))

    table = markdown(report)
    out_dir = os.environ.get("OUT")
    if out_dir:
        pathlib.Path(out_dir).mkdir(parents=True, exist_ok=True)
        (pathlib.Path(out_dir) / "bench.json").write_text(
            json.dumps(report, indent=2, default=str))
    if args.write_results:
        path = pathlib.Path(args.write_results)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(table)
    print(table)
    failed = any(result.get("error") or not result.get("check", {}).get("ok")
                 for row in report["rows"]
                 for result in row["backends"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
