"""pattn IR for the GPU tests and the benchmark.

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
can build the matching tensors. The op syntax follows examples/*.mlir.

Static channel tables (``Config.static_tables``) become
``memref.global "private" constant`` tables read with ``memref.get_global``;
their values are passed to ``emit_paged`` and printed as little-endian hex
so that every bit (FLT_MAX included) survives.

The deterministic test grid (``paged_grid``) lives here too, so that it can
be inspected without a GPU: ``python3 python/tests/gpu/ir.py`` prints it.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import pathlib
import random
import struct
import subprocess
from typing import Iterable, Optional, Sequence

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

ENCODINGS = ("f16", "bf16", "i8", "f8e4m3", "f8e5m2", "i4", "nvfp4")

#: Every (encoding, scale granularity) pair a cache may have (SPEC §2).
CACHE_KINDS = (
    (("f16", "none"), ("bf16", "none"))
    + tuple((e, s) for e in ("i8", "f8e4m3", "f8e5m2", "i4")
            for s in ("tensor", "channel", "token"))
    + (("nvfp4", "tensor"), ("nvfp4", "token")))

_ROW_BYTES = {"f16": 2.0, "bf16": 2.0, "i8": 1.0, "f8e4m3": 1.0,
              "f8e5m2": 1.0, "i4": 0.5, "nvfp4": 0.5}


def row_bytes(encoding: str, head_dim: int) -> int:
    if encoding in ("i4", "nvfp4"):
        return (head_dim + 1) // 2
    return int(_ROW_BYTES[encoding] * head_dim)


@dataclasses.dataclass(frozen=True)
class Config:
    """One paged-attention test case.

    The IR depends on everything but the sequence lengths, which only set
    the block table's width (``max_blocks``). ``query_tokens`` > 1 means
    speculative decode: every sequence has that many query tokens, passed
    with ``query_start`` and ``max_query_len``.
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
    name: str = ""  # a label for named cases; part of the id

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
        return {"fp8_ds_mla": 656, "nvfp4_ds_mla": 432,
                "nvfp4_ds_mla_fp8_rope": 368}[self.preset]

    @property
    def id(self) -> str:
        return (f"{self.preset}-{self.mode},bs{self.block_size},"
                f"h{self.num_heads},q{self.query_tokens},{self.dtype},"
                "L" + "-".join(map(str, self.seq_lens)))


# ---------------------------------------------------------------------------
# Arguments and modules
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Arg:
    """One memref argument: element type as MLIR spells it, shape with None
    for a dynamic dimension."""

    name: str
    element: str  # i8, f8E4M3FN, f32, i32, i64, f16, bf16
    shape: tuple[Optional[int], ...]

    @property
    def memref(self) -> str:
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"memref<{dims}x{self.element}>"

    def __str__(self) -> str:
        return f"%{self.name}: {self.memref}"


@dataclasses.dataclass(frozen=True)
class Module:
    text: str
    functions: dict  # function name -> tuple[Arg, ...]


def mlir_float(value: float) -> str:
    """An fp32 value as an MLIR float literal that parses back to the same
    bits (the shortest repr of the exact value, always with a '.')."""
    exact = struct.unpack("<f", struct.pack("<f", float(value)))[0]
    text = repr(exact)
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    elif "." not in text and "e" not in text:
        text += ".0"
    return text


def _hex_table(values: Iterable[float]) -> str:
    """A dense f32 payload as little-endian hex, bit-exact."""
    raw = b"".join(struct.pack("<f", float(v)) for v in values)
    return '"0x' + raw.hex().upper() + '"'


def _act(dtype: str) -> str:
    return {"f16": "f16", "bf16": "bf16", "f32": "f32"}[dtype]


# ---------------------------------------------------------------------------
# Paged attention
# ---------------------------------------------------------------------------


def cache_type(config: Config, encoding: str, scale: str) -> str:
    return (f"!pattn.cache<block_size = {config.block_size}, "
            f"kv_heads = {config.kv_heads}, head_dim = {config.head_dim}, "
            f"encoding = {encoding}, scale = {scale}, "
            f"layout = {config.layout}>")


def _paged_dims(config: Config, last: int) -> tuple[Optional[int], ...]:
    if config.layout == "nhd":
        return (None, config.block_size, config.kv_heads, last)
    return (None, config.kv_heads, config.block_size, last)


def cache_args(config: Config, prefix: str, encoding: str,
               scale: str) -> list[Arg]:
    """The buffers bound as one cache: pages, nvfp4 group scales, token
    scales (shapes as the verifier derives them)."""
    args = [Arg(f"{prefix}_pages", "i8",
                _paged_dims(config, row_bytes(encoding, config.head_dim)))]
    if encoding == "nvfp4":
        args.append(Arg(f"{prefix}_groups", "f8E4M3FN",
                        _paged_dims(config, config.head_dim // 16)))
    if scale == "token":
        args.append(Arg(f"{prefix}_tokens", "f32",
                        (None, config.block_size, config.kv_heads)))
    return args


def scale_arg(config: Config, prefix: str, scale: str) -> Optional[Arg]:
    """The scale operand of a tensor/channel cache, or None."""
    if scale == "tensor":
        return Arg(f"{prefix}_scale", "f32", (1,))
    if scale == "channel":
        return Arg(f"{prefix}_scale", "f32", (config.kv_heads, config.head_dim))
    return None


def _bind(result: str, alias: str, args: Sequence[Arg]) -> str:
    keywords = {"pages": "storage", "groups": "group_scales",
                "tokens": "token_scales"}
    operands = " ".join(
        f"{keywords[a.name.rsplit('_', 1)[1]]}(%{a.name} : {a.memref})"
        for a in args)
    return f"  %{result} = pattn.bind_cache {operands} : {alias}"


def _function(name: str, args: Sequence[Arg], body: Sequence[str]) -> str:
    signature = ",\n    ".join(str(a) for a in args)
    return (f"func.func @{name}(\n    {signature}) {{\n"
            + "\n".join(body) + "\n  return\n}\n")


def emit_paged(config: Config, k_table=None, v_table=None) -> Module:
    """The module of one paged-attention test case.

    ``k_table``/``v_table`` are the [kv_heads, head_dim] channel scales of a
    ``static_tables`` config (flattened in row-major order); dynamic tables
    are function arguments instead.
    """
    header, globals_ = [], []
    caches = {"k": (config.k_encoding, config.k_scale, k_table),
              "v": (config.v_encoding, config.v_scale, v_table)}
    for prefix, (encoding, scale, _) in caches.items():
        header.append(
            f"!{prefix}_cache = {cache_type(config, encoding, scale)}")

    # Scale operands: function arguments, or globals for static tables.
    scale_operands: dict[str, Optional[Arg]] = {}
    static_loads: dict[str, list[str]] = {"k": [], "v": []}
    for prefix, (encoding, scale, table) in caches.items():
        arg = scale_arg(config, prefix, scale)
        scale_operands[prefix] = arg
        if arg is not None and scale == "channel" and config.static_tables:
            if table is None:
                raise ValueError(f"static {prefix} table needs its values")
            values = [float(v) for v in _flatten(table)]
            if len(values) != config.kv_heads * config.head_dim:
                raise ValueError(f"{prefix} table has {len(values)} entries")
            globals_.append(
                f'memref.global "private" constant @{prefix}_scale_table : '
                f"{arg.memref} = dense<{_hex_table(values)}>")
            static_loads[prefix] = [
                f"  %{arg.name} = memref.get_global @{prefix}_scale_table : "
                f"{arg.memref}"]

    def dynamic(prefix: str) -> list[Arg]:
        arg = scale_operands[prefix]
        return [arg] if arg is not None and not static_loads[prefix] else []

    def scale_clause(keyword: str, prefix: str) -> str:
        arg = scale_operands[prefix]
        return "" if arg is None else f" {keyword}(%{arg.name} : {arg.memref})"

    act = _act(config.dtype)
    functions, bodies = {}, []
    slots = Arg("slots", "i64", (None,))

    # write_k / write_v: bind the cache and quantize new rows into slots.
    for prefix, (encoding, scale, _) in caches.items():
        storage = cache_args(config, prefix, encoding, scale)
        new = Arg(f"{prefix}_new", act,
                  (None, config.kv_heads, config.head_dim))
        args = storage + [new, slots] + dynamic(prefix)
        body = static_loads[prefix] + [
            _bind(prefix, f"!{prefix}_cache", storage),
            f"  pattn.write_cache values(%{new.name} : {new.memref}) "
            f"into(%{prefix} : !{prefix}_cache)\n"
            f"      slots(%slots : {slots.memref})"
            f"{scale_clause('scale', prefix)}"]
        functions[f"write_{prefix}"] = tuple(args)
        bodies.append(_function(f"write_{prefix}", args, body))

    # decode: bind both caches and attend.
    query = Arg("query", act, (None, config.num_heads, config.head_dim))
    out = Arg("out", act, (None, config.num_heads, config.head_dim))
    k_storage = cache_args(config, "k", config.k_encoding, config.k_scale)
    v_storage = cache_args(config, "v", config.v_encoding, config.v_scale)
    block_table = Arg("block_table", "i32", (None, config.max_blocks))
    seq_lens = Arg("seq_lens", "i32", (None,))
    query_start = Arg("query_start", "i32", (None,)) \
        if config.query_tokens > 1 else None
    sinks = Arg("sinks", "f32", (config.num_heads,)) if config.sinks else None
    args = [query] + k_storage + v_storage + [block_table, seq_lens]
    args += [query_start] if query_start else []
    args += dynamic("k") + dynamic("v")
    args += [sinks] if sinks else []
    args += [out]

    attributes = [f"num_heads = {config.num_heads} : i64"]
    if config.query_tokens > 1:
        attributes.append(f"max_query_len = {config.query_tokens} : i64")
    if config.softmax_scale is not None:
        attributes.append(
            f"softmax_scale = {mlir_float(config.softmax_scale)} : f32")
    if config.softcap:
        attributes.append(f"softcap = {mlir_float(config.softcap)} : f32")
    if config.window > 0:
        attributes.append(f"window = {config.window} : i64")

    optional = ""
    if query_start:
        optional += f"\n      query_start(%query_start : {query_start.memref})"
    optional += scale_clause("k_scale", "k") + scale_clause("v_scale", "v")
    if sinks:
        optional += f" sinks(%sinks : {sinks.memref})"
    body = static_loads["k"] + static_loads["v"] + [
        _bind("k", "!k_cache", k_storage),
        _bind("v", "!v_cache", v_storage),
        f"  pattn.paged_attention query(%query : {query.memref})\n"
        f"      key(%k : !k_cache) value(%v : !v_cache)\n"
        f"      block_table(%block_table : {block_table.memref})\n"
        f"      seq_lens(%seq_lens : {seq_lens.memref}){optional}\n"
        f"      outs(%out : {out.memref})\n"
        f"      {{{', '.join(attributes)}}}"]
    functions["decode"] = tuple(args)
    bodies.append(_function("decode", args, body))

    text = (f"// pattn GPU test: {config.id}\n" + "\n".join(header) + "\n\n"
            + "".join(g + "\n" for g in globals_)
            + ("\n" if globals_ else "") + "\n".join(bodies))
    return Module(text, functions)


def _flatten(table) -> list:
    if hasattr(table, "reshape"):
        return list(table.reshape(-1))
    flat = []
    for item in table:
        nested = isinstance(item, (list, tuple))
        flat.extend(_flatten(item) if nested else [item])
    return flat


# ---------------------------------------------------------------------------
# MLA
# ---------------------------------------------------------------------------


def record_cache_type(config: MlaConfig) -> str:
    mode = "" if config.mode == "none" else f", {config.mode}"
    return (f"!pattn.record_cache<block_size = {config.block_size}, "
            f"record = !pattn.record<{config.preset}{mode}>>")


def emit_mla(config: MlaConfig) -> Module:
    """``@write_records(pages, latent, rope, slots, [outer_scale])`` and
    ``@mla(query, pages, block_table, seq_lens, [query_start],
    [outer_scale], out)``."""
    act = _act(config.dtype)
    pages = Arg("pages", "i8", (None, config.block_size, config.record_bytes))
    outer = Arg("outer_scale", "f32", (1,)) if config.mode == "tensor" else None
    outer_clause = \
        f" outer_scale(%outer_scale : {outer.memref})" if outer else ""
    bind = (f"  %cache = pattn.bind_cache storage(%pages : {pages.memref})"
            " : !records")

    latent = Arg("latent", act, (None, config.latent))
    rope = Arg("rope", act, (None, config.rope))
    slots = Arg("slots", "i64", (None,))
    write_args = [pages, latent, rope, slots] + ([outer] if outer else [])
    write = _function("write_records", write_args, [
        bind,
        f"  pattn.write_record latent(%latent : {latent.memref})\n"
        f"      rope(%rope : {rope.memref}) into(%cache : !records)\n"
        f"      slots(%slots : {slots.memref}){outer_clause}"])

    width = config.latent + config.rope
    query = Arg("query", act, (None, config.num_heads, width))
    out = Arg("out", act, (None, config.num_heads, config.latent))
    block_table = Arg("block_table", "i32", (None, config.max_blocks))
    seq_lens = Arg("seq_lens", "i32", (None,))
    query_start = Arg("query_start", "i32", (None,)) \
        if config.query_tokens > 1 else None
    mla_args = [query, pages, block_table, seq_lens]
    mla_args += [query_start] if query_start else []
    mla_args += [outer] if outer else []
    mla_args += [out]
    attributes = [f"num_heads = {config.num_heads} : i64",
                  f"softmax_scale = {mlir_float(config.softmax_scale)} : f32"]
    optional = ""
    if query_start:
        optional = f" query_start(%query_start : {query_start.memref})"
        attributes.append(f"max_query_len = {config.query_tokens} : i64")
    mla = _function("mla", mla_args, [
        bind,
        f"  pattn.mla_decode query(%query : {query.memref}) "
        f"cache(%cache : !records)\n"
        f"      block_table(%block_table : {block_table.memref})\n"
        f"      seq_lens(%seq_lens : {seq_lens.memref}){optional}"
        f"{outer_clause}\n"
        f"      outs(%out : {out.memref})\n"
        f"      {{{', '.join(attributes)}}}"])

    text = (f"// pattn GPU test: {config.id}\n"
            f"!records = {record_cache_type(config)}\n\n" + write + "\n" + mla)
    return Module(text, {"write_records": tuple(write_args),
                         "mla": tuple(mla_args)})


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
