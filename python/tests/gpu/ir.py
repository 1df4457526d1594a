"""pattn IR for the GPU tests and the benchmark, built with ``pattn.ir``.

A ``Config`` describes one paged-attention test case (cache formats, shapes,
masks); ``emit_paged(config)`` turns it into a module with three functions,

    @write_k(k_pages, [k_groups], [k_tokens], k_new, slots, [k_scale])
    @write_v(v_pages, [v_groups], [v_tokens], v_new, slots, [v_scale])
    @decode(query, k_pages, [k_groups], [k_tokens], v_pages, [v_groups],
            [v_tokens], block_table, seq_lens, [query_start], [k_scale],
            [v_scale], [sinks], out)

and ``MlaConfig`` / ``emit_mla`` do the same for MLA records
(``@write_records`` and ``@mla``). Every function argument is a memref whose
leading dimension is dynamic where it counts pages, tokens or sequences;
``Module.functions`` lists each function's arguments in order so that callers
can build the matching tensors.

Static channel tables (``Config.static_tables``) become constant globals
(``Function.constant_table``) whose values are passed to ``emit_paged``.
The module text is the artifact cache's key: the builder prints it the
same way for the same config (cache layouts written out, attributes in a
fixed order), so a change here re-keys every GPU artifact.

The deterministic test grid (``paged_grid``) lives here too, so that it can
be inspected without a GPU: ``python3 python/tests/gpu/ir.py`` prints it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
import pathlib
import random
import subprocess
import sys
from typing import Optional

if importlib.util.find_spec("pattn") is None:  # run as a script
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from pattn import ir as pir  # noqa: E402


def source_commit() -> str:
    """The commit the results belong to: $PATTN_COMMIT (a copy of the tree
    without .git, as on the GPU machine), else git, else "unknown"."""
    if os.environ.get("PATTN_COMMIT"):
        return os.environ["PATTN_COMMIT"]
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True,
            check=True, timeout=10,
            cwd=pathlib.Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ---------------------------------------------------------------------------
# Configurations
# ---------------------------------------------------------------------------

ENCODINGS = pir.ENCODINGS

#: Every (encoding, scale granularity) pair a cache may have (SPEC §2).
CACHE_KINDS = (
    (("f16", "none"), ("bf16", "none"))
    + tuple((e, s) for e in ("i8", "f8e4m3", "f8e5m2", "i4")
            for s in ("tensor", "channel", "token"))
    + (("nvfp4", "tensor"), ("nvfp4", "token")))


def row_bytes(encoding: str, head_dim: int) -> int:
    """Bytes of one cached head row."""
    return pir.cache(block_size=16, kv_heads=1, head_dim=head_dim,
                     encoding=encoding).row_bytes


@dataclasses.dataclass(frozen=True)
class Config:
    """One paged-attention test case.

    The IR depends on everything but the sequence lengths, which only set
    the block table's width (``max_blocks``). ``query_tokens`` > 1 means
    speculative decode (up to 8) or a prompt (more): every sequence has that
    many query tokens, passed with ``query_start`` and ``max_query_len``;
    ``query_counts`` gives each sequence its own count instead (a mixed
    batch of prompt chunks and decode tokens; ``query_tokens`` is then their
    maximum).
    """

    k_encoding: str = "f16"
    k_scale: str = "none"
    v_encoding: str = "f16"
    v_scale: str = "none"
    head_dim: int = 128
    block_size: int = 16
    kv_heads: int = 2
    g: int = 4
    query_tokens: int = 1
    seq_lens: tuple[int, ...] = (5, 17)
    layout: str = "nhd"
    dtype: str = "f16"
    softcap: float = 0.0
    window: int = -1
    sinks: bool = False
    static_tables: bool = False
    softmax_scale: Optional[float] = None
    query_counts: tuple[int, ...] = ()
    #: K and V pages as the two halves of each block of one
    #: [blocks, 2, ...] allocation (vLLM's and FlashInfer's layout): the
    #: storage arguments are page-strided views, pages two pages apart.
    engine_pages: bool = False
    name: str = ""  # a label for named cases; part of the id

    def __post_init__(self):
        if self.query_counts and (
                len(self.query_counts) != len(self.seq_lens)
                or max(self.query_counts) != self.query_tokens
                or min(self.query_counts) < 0):
            raise ValueError(f"query_counts {self.query_counts} must give "
                             f"each of seq_lens {self.seq_lens} a count, the "
                             f"largest being query_tokens "
                             f"{self.query_tokens}")

    @property
    def counts(self) -> tuple[int, ...]:
        """Query tokens per sequence."""
        return self.query_counts or (self.query_tokens,) * self.batch

    @property
    def num_heads(self) -> int:
        return self.kv_heads * self.g

    @property
    def batch(self) -> int:
        return len(self.seq_lens)

    @property
    def max_blocks(self) -> int:
        """Block-table width: the longest sequence plus one column of -1."""
        longest = max(self.seq_lens, default=0)
        return -(-longest // self.block_size) + 1

    @property
    def has_channel_tables(self) -> bool:
        return "channel" in (self.k_scale, self.v_scale)

    @property
    def id(self) -> str:
        """A readable pytest id naming every axis that differs from plain."""
        parts = [f"K-{self.k_encoding}-{self.k_scale}",
                 f"V-{self.v_encoding}-{self.v_scale}",
                 f"d{self.head_dim}", f"bs{self.block_size}",
                 f"kv{self.kv_heads}g{self.g}", f"q{self.query_tokens}",
                 self.layout, self.dtype]
        if self.softcap:
            parts.append(f"softcap{self.softcap:g}")
        if self.window > 0:
            parts.append(f"win{self.window}")
        if self.sinks:
            parts.append("sinks")
        if self.has_channel_tables:
            parts.append("static" if self.static_tables else "dynamic")
        if self.softmax_scale is not None:
            parts.append(f"scale{self.softmax_scale:g}")
        parts.append("L" + "-".join(map(str, self.seq_lens)))
        if self.query_counts:
            parts.append("n" + "-".join(map(str, self.query_counts)))
        if self.engine_pages:
            parts.append("engine-pages")
        if self.name:
            parts.insert(0, self.name)
        return ",".join(parts)


@dataclasses.dataclass(frozen=True)
class MlaConfig:
    """One MLA test case over a record preset (latent 512, rope 64)."""

    preset: str = "fp8_ds_mla"
    mode: str = "none"  # none (fp8_ds_mla), tensor, token
    block_size: int = 64
    num_heads: int = 16
    query_tokens: int = 1
    seq_lens: tuple[int, ...] = (70, 1)
    dtype: str = "bf16"
    softmax_scale: float = 0.0721  # written out: MLA's default is ambiguous
    #: Tokens in runs of 40 whose magnitudes are 2^k, k uniform in
    #: [-token_binades, token_binades] (0: one magnitude), so that the value
    #: scales of successive key tiles are binades apart.
    token_binades: int = 0

    latent: int = 512
    rope: int = 64

    @property
    def batch(self) -> int:
        return len(self.seq_lens)

    @property
    def max_blocks(self) -> int:
        return -(-max(self.seq_lens, default=0) // self.block_size) + 1

    @property
    def record_bytes(self) -> int:
        return pir.record(self.preset).bytes

    @property
    def id(self) -> str:
        return (f"{self.preset}-{self.mode},bs{self.block_size},"
                f"h{self.num_heads},q{self.query_tokens},{self.dtype},"
                "L" + "-".join(map(str, self.seq_lens))
                + (f",binades{self.token_binades}" if self.token_binades
                   else ""))


# ---------------------------------------------------------------------------
# Arguments and modules
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Arg:
    """One memref argument: element type as MLIR spells it, shape with None
    for a dynamic dimension, strides of a page-strided buffer (None:
    contiguous)."""

    name: str
    element: str  # i8, f8E4M3FN, f32, i32, i64, f16, bf16
    shape: tuple[Optional[int], ...]
    strides: Optional[tuple[int, ...]] = None

    @classmethod
    def of(cls, name: str, type: pir.MemRefType) -> "Arg":
        return cls(name, type.element, type.shape, type.strides)

    @property
    def type(self) -> pir.MemRefType:
        return pir.memref(self.shape, self.element, strides=self.strides)


@dataclasses.dataclass(frozen=True)
class Module:
    text: str
    functions: dict  # function name -> tuple[Arg, ...]


def _module(module: pir.Module) -> Module:
    """The text of ``module`` and its functions' arguments."""
    return Module(str(module), {
        function.name: tuple(Arg.of(value.name, value.type)
                             for value in function.args)
        for function in module.functions})


# ---------------------------------------------------------------------------
# Paged attention
# ---------------------------------------------------------------------------


def cache_type(config: Config, encoding: str, scale: str) -> pir.CacheType:
    """The cache type of one side of ``config`` (its layout written out)."""
    return pir.cache(block_size=config.block_size, kv_heads=config.kv_heads,
                     head_dim=config.head_dim, encoding=encoding,
                     scale=scale, layout=config.layout)


def cache_args(config: Config, prefix: str, encoding: str,
               scale: str) -> list[Arg]:
    """The buffers bound as one cache: pages, nvfp4 group scales, token
    scales (shapes as the verifier derives them)."""
    cache = cache_type(config, encoding, scale)
    stride = None
    if config.engine_pages:
        pages = {cache_type(config, e, s).page_bytes for e, s in (
            (config.k_encoding, config.k_scale),
            (config.v_encoding, config.v_scale))}
        if len(pages) != 1:
            raise ValueError(f"engine_pages needs K and V pages of one size, "
                             f"got {sorted(pages)} bytes")
        stride = 2 * cache.page_bytes
    args = [Arg.of(f"{prefix}_pages", cache.storage_type(page_stride=stride))]
    if cache.group_scales_type() is not None:
        args.append(Arg.of(f"{prefix}_groups", cache.group_scales_type()))
    if cache.token_scales_type() is not None:
        args.append(Arg.of(f"{prefix}_tokens", cache.token_scales_type()))
    return args


def emit_paged(config: Config, k_table=None, v_table=None) -> Module:
    """The module of one paged-attention test case.

    ``k_table``/``v_table`` are the [kv_heads, head_dim] channel scales of a
    ``static_tables`` config (nested or flattened in row-major order);
    dynamic tables are function arguments instead.
    """
    module = pir.Module(comment=f"pattn GPU test: {config.id}")
    sides = {"k": (config.k_encoding, config.k_scale, k_table),
             "v": (config.v_encoding, config.v_scale, v_table)}
    types = {prefix: module.alias(f"{prefix}_cache",
                                  cache_type(config, encoding, scale))
             for prefix, (encoding, scale, _) in sides.items()}
    tables = {}
    for prefix, (_, scale, table) in sides.items():
        if scale == "channel" and config.static_tables:
            if table is None:
                raise ValueError(f"static {prefix} table needs its values")
            tables[prefix] = table

    def storage(function: pir.Function, prefix: str) -> list:
        encoding, scale, _ = sides[prefix]
        return [function.arg(arg.name, arg.type)
                for arg in cache_args(config, prefix, encoding, scale)]

    def scale_operand(function: pir.Function, prefix: str):
        """The scale of a tensor/channel cache: a constant table read at
        the top of the body, or an argument; None for other caches."""
        scale = types[prefix].scale_type()
        if scale is None:
            return None
        if prefix in tables:
            return function.constant_table(
                f"{prefix}_scale", tables[prefix], scale.shape,
                symbol=f"{prefix}_scale_table")
        return function.arg(f"{prefix}_scale", scale)

    def bind(function: pir.Function, prefix: str, buffers: list):
        keywords = {"groups": "group_scales", "tokens": "token_scales"}
        return function.bind_cache(
            buffers[0], types[prefix], name=prefix,
            **{keywords[b.name.rsplit("_", 1)[1]]: b for b in buffers[1:]})

    act = config.dtype
    rows = (None, config.kv_heads, config.head_dim)
    # write_k / write_v: bind the cache and quantize new rows into slots.
    for prefix in sides:
        function = module.function(f"write_{prefix}")
        buffers = storage(function, prefix)
        new = function.arg(f"{prefix}_new", pir.memref(rows, act))
        slots = function.arg("slots", pir.memref((None,), "i64"))
        scale = scale_operand(function, prefix)
        function.write_cache(new, bind(function, prefix, buffers), slots,
                             scale=scale)

    # decode: bind both caches and attend.
    function = module.function("decode")
    heads = (None, config.num_heads, config.head_dim)
    query = function.arg("query", pir.memref(heads, act))
    k_buffers, v_buffers = storage(function, "k"), storage(function, "v")
    block_table = function.arg("block_table",
                               pir.memref((None, config.max_blocks), "i32"))
    seq_lens = function.arg("seq_lens", pir.memref((None,), "i32"))
    query_start = (function.arg("query_start", pir.memref((None,), "i32"))
                   if config.query_tokens > 1 else None)
    k_scale = scale_operand(function, "k")
    v_scale = scale_operand(function, "v")
    sinks = (function.arg("sinks", pir.memref((config.num_heads,), "f32"))
             if config.sinks else None)
    out = function.arg("out", pir.memref(heads, act))
    function.paged_attention(
        query, bind(function, "k", k_buffers), bind(function, "v", v_buffers),
        block_table, seq_lens, out, num_heads=config.num_heads,
        query_start=query_start, k_scale=k_scale, v_scale=v_scale,
        sinks=sinks, max_query_len=config.query_tokens,
        softmax_scale=config.softmax_scale, softcap=config.softcap,
        window=config.window if config.window > 0 else -1)
    return _module(module)


# ---------------------------------------------------------------------------
# MLA
# ---------------------------------------------------------------------------


def record_cache_type(config: MlaConfig) -> pir.RecordCacheType:
    """The record cache of ``config`` (a mode other than none written
    out)."""
    mode = None if config.mode == "none" else config.mode
    return pir.record_cache(config.block_size, pir.record(config.preset, mode))


def emit_mla(config: MlaConfig) -> Module:
    """``@write_records(pages, latent, rope, slots, [outer_scale])`` and
    ``@mla(query, pages, block_table, seq_lens, [query_start],
    [outer_scale], out)``."""
    module = pir.Module(comment=f"pattn GPU test: {config.id}")
    records = module.alias("records", record_cache_type(config))
    act = config.dtype
    tensor_mode = config.mode == "tensor"

    write = module.function("write_records")
    pages = write.arg("pages", records.storage_type())
    latent = write.arg("latent", pir.memref((None, config.latent), act))
    rope = write.arg("rope", pir.memref((None, config.rope), act))
    slots = write.arg("slots", pir.memref((None,), "i64"))
    outer = (write.arg("outer_scale", pir.memref((1,), "f32"))
             if tensor_mode else None)
    write.write_record(latent, rope,
                       write.bind_cache(pages, records, name="cache"), slots,
                       outer_scale=outer)

    mla = module.function("mla")
    width = config.latent + config.rope
    query = mla.arg("query", pir.memref((None, config.num_heads, width), act))
    pages = mla.arg("pages", records.storage_type())
    block_table = mla.arg("block_table",
                          pir.memref((None, config.max_blocks), "i32"))
    seq_lens = mla.arg("seq_lens", pir.memref((None,), "i32"))
    query_start = (mla.arg("query_start", pir.memref((None,), "i32"))
                   if config.query_tokens > 1 else None)
    outer = (mla.arg("outer_scale", pir.memref((1,), "f32"))
             if tensor_mode else None)
    out = mla.arg("out", pir.memref((None, config.num_heads, config.latent),
                                    act))
    mla.mla_decode(query, mla.bind_cache(pages, records, name="cache"),
                   block_table, seq_lens, out, num_heads=config.num_heads,
                   query_start=query_start, outer_scale=outer,
                   softmax_scale=config.softmax_scale,
                   max_query_len=config.query_tokens)
    return _module(module)


# ---------------------------------------------------------------------------
# The test grid
# ---------------------------------------------------------------------------

#: The axes of the sampled grid. Cache kinds are (encoding, granularity).
AXES = {
    "k": CACHE_KINDS,
    "v": CACHE_KINDS,
    "head_dim": (64, 128, 256),
    "block_size": (16, 32, 128),
    "g": (1, 4, 6, 8),
    "query_tokens": (1, 3, 8),
    "kv_heads": (1, 2, 4),
    "layout": ("nhd", "hnd"),
    "dtype": ("f16", "bf16"),
    "softcap": (False, True),
    "window": (False, True),
    "sinks": (False, True),
    "static_tables": (False, True),
}

#: Axis pairs whose every combination must appear at least once. The cache
#: kinds meet every shape axis (addressing, row sizes, group counts, layout,
#: XQA vs portable); the shape and feature axes meet each other. K x V is
#: left out (256 pairs): every K and every V kind appears, asymmetric pairs
#: are common, and the symmetric ones are named below.
_KIND_PARTNERS = ("head_dim", "block_size", "query_tokens", "layout", "dtype")
_SHAPE_AXES = ("head_dim", "block_size", "g", "query_tokens", "kv_heads",
               "layout", "dtype", "softcap", "window", "sinks")
PAIRS = tuple(
    [(kind, partner) for kind in ("k", "v") for partner in _KIND_PARTNERS]
    + list(itertools.combinations(_SHAPE_AXES, 2))
    + [("k", "static_tables"), ("v", "static_tables")])


def _sequence_lengths(block_size: int, query_tokens: int,
                      rng: random.Random) -> tuple[int, ...]:
    """Three or four lengths, mostly not multiples of the block size, with a
    zero-length sequence in single-token decode (a speculative sequence has
    at least its query tokens in the cache)."""
    candidates = [1, 2, block_size - 1, block_size + 1, 2 * block_size + 3,
                  3 * block_size - 5, block_size + block_size // 2]
    lengths = [max(length, query_tokens)
               for length in rng.sample(candidates, 3)]
    if query_tokens == 1:
        lengths.insert(rng.randrange(4), 0)
    return tuple(lengths)


def _config_from(choice: dict, rng: random.Random) -> Config:
    (k_enc, k_scale), (v_enc, v_scale) = choice["k"], choice["v"]
    block_size = choice["block_size"]
    lengths = _sequence_lengths(block_size, choice["query_tokens"], rng)
    return Config(
        k_encoding=k_enc, k_scale=k_scale, v_encoding=v_enc, v_scale=v_scale,
        head_dim=choice["head_dim"], block_size=block_size,
        kv_heads=choice["kv_heads"], g=choice["g"],
        query_tokens=choice["query_tokens"], seq_lens=lengths,
        layout=choice["layout"], dtype=choice["dtype"],
        softcap=1.5 if choice["softcap"] else 0.0,
        # A window that cuts pages in the middle.
        window=block_size + 7 if choice["window"] else -1,
        sinks=choice["sinks"],
        static_tables=choice["static_tables"] and (
            "channel" in (k_scale, v_scale)))


def paged_grid(limit: Optional[int] = None, seed: int = 2026) -> list[Config]:
    """A deterministic covering sample of the grid.

    Greedy pairwise covering (AETG): each step draws candidate rows from a
    seeded generator and keeps the one covering the most not-yet-covered
    pairs of ``PAIRS``, until every pair is covered (or ``limit`` rows).
    Every value of every axis therefore appears, and the sample is the same
    on every machine.
    """
    rng = random.Random(seed)
    names = list(AXES)
    uncovered = {(a, x, b, y) for a, b in PAIRS
                 for x in AXES[a] for y in AXES[b]
                 # static tables only mean something for channel scales
                 if b != "static_tables" or x[1] == "channel"}
    rows: list[dict] = []
    while uncovered and (limit is None or len(rows) < limit):
        best, best_gain = None, -1
        pool = sorted(uncovered, key=repr)  # a set's order is not stable
        for _ in range(60):
            # Seed the candidate with an uncovered pair, fill the rest.
            a, x, b, y = rng.choice(pool)
            candidate = {n: rng.choice(AXES[n]) for n in names}
            candidate[a], candidate[b] = x, y
            gain = sum((p, candidate[p], q, candidate[q]) in uncovered
                       for p, q in PAIRS)
            if gain > best_gain:
                best, best_gain = candidate, gain
        rows.append(best)
        uncovered -= {(p, best[p], q, best[q]) for p, q in PAIRS}
    return [_config_from(row, rng) for row in rows]


if __name__ == "__main__":
    grid = paged_grid()
    for config in grid:
        print(config.id)
    print(f"{len(grid)} configurations")
