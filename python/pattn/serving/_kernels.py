"""The attention kernels of one layer shape, and the buffers they run on.

A :class:`LayerSpec` is everything that fixes a layer's compiled code: heads,
head size, activation type, cache format, page size and the attention
attributes (softmax scale, softcap, window, sinks). :func:`build_module`
writes its pattn module with two entry points, each of which appends the
new K/V rows to the pages and then attends:

* ``decode``: one query token per sequence (``max_query_len = 1``);
* ``extend``: any number of query tokens per sequence (prompts, prompt
  chunks over a cached prefix, speculative tokens and mixed batches),
  ``query_start`` giving each sequence's tokens, up to
  :data:`MAX_QUERY_TOKENS` per sequence.

Both take their tensors by name (:data:`STEP_ARGUMENTS`, the ones a spec
uses): the layer's cache buffers (:class:`LayerBuffers`), then ``query``
[tokens, heads, D], ``k_new``/``v_new`` [tokens, kv_heads, D], ``slots``
[tokens] (block * block_size + offset; -1 skips a token), ``block_table``
[batch, width], ``seq_lens`` [batch] (lengths after the append),
``query_start`` [batch + 1] (``extend`` only), the scale tables, ``sinks``
and ``out`` [tokens, heads, D].

:class:`CompiledKernels` compiles the module (an artifact cache makes that
once per shape and compiler) and runs it on the GPU;
:class:`pattn.serving.ReferenceKernels` runs the same calls on the CPU with
pattn's float64 reference, bit-exact in what it writes, for tests and for
machines without a GPU.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Dict, Optional, Tuple

from .. import ir
from .._errors import ArgumentError
from ._formats import CacheFormat

__all__ = ["CompiledKernels", "LayerBuffers", "LayerSpec",
           "MAX_QUERY_TOKENS", "STEP_ARGUMENTS", "build_module", "chip_of",
           "default_cache_dir", "device_chip"]

#: Query tokens per sequence one ``extend`` call takes (the op's bound,
#: docs/Dialect.md); longer prompts go in chunks.
MAX_QUERY_TOKENS = 32768

#: Every argument a step function may take, in its order.
STEP_ARGUMENTS = (
    "k_pages", "k_groups", "k_tokens", "v_pages", "v_groups", "v_tokens",
    "query", "k_new", "v_new", "slots", "block_table", "seq_lens",
    "query_start", "k_scale", "v_scale", "sinks", "out")


@dataclasses.dataclass(frozen=True)
class LayerSpec:
    """What fixes one attention layer's kernels."""

    num_heads: int
    kv_heads: int
    head_dim: int
    dtype: str                      # activations: "f16" or "bf16"
    format: CacheFormat
    block_size: int = 16
    softmax_scale: Optional[float] = None   # None: 1/sqrt(head_dim)
    softcap: float = 0.0
    window: int = -1
    sinks: bool = False
    layout: str = "nhd"
    #: K and V pages as the two halves of each block of one
    #: [blocks, 2, ...] allocation (vLLM's and FlashInfer's layout): the
    #: kernels take page-strided views of it (pages of equal size only).
    interleaved_kv: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in ("f16", "bf16"):
            raise ArgumentError(f"pattn.serving.LayerSpec: activations must "
                                f"be f16 or bf16, not {self.dtype!r}")
        if self.num_heads % self.kv_heads:
            raise ArgumentError(
                f"pattn.serving.LayerSpec: {self.num_heads} query heads are "
                f"not a multiple of {self.kv_heads} KV heads")
        if self.interleaved_kv and self.cache_type("k").page_bytes != \
                self.cache_type("v").page_bytes:
            raise ArgumentError(
                f"pattn.serving.LayerSpec: interleaved K and V pages must be "
                f"of one size; format {self.format.name} has K pages of "
                f"{self.cache_type('k').page_bytes} bytes and V pages of "
                f"{self.cache_type('v').page_bytes}")

    def storage_type(self, side: str,
                     blocks: Optional[int] = None) -> ir.MemRefType:
        """``side``'s page storage as the kernels take it: contiguous, or
        page-strided (two pages a block) when ``interleaved_kv``."""
        kind = self.cache_type(side)
        stride = 2 * kind.page_bytes if self.interleaved_kv else None
        return kind.storage_type(blocks, page_stride=stride)

    def cache_type(self, side: str) -> ir.CacheType:
        encoding, scale = getattr(self.format, side)
        return ir.cache(block_size=self.block_size, kv_heads=self.kv_heads,
                        head_dim=self.head_dim, encoding=encoding,
                        scale=scale, layout=self.layout)


def _cache_arguments(function: ir.Function, spec: LayerSpec, side: str,
                     alias: ir.Alias) -> ir.Value:
    """Binds ``side``'s buffers (arguments ``<side>_pages``, ``_groups``,
    ``_tokens``) as a cache."""
    kind = spec.cache_type(side)
    pages = function.arg(f"{side}_pages", spec.storage_type(side))
    extra = {}
    if kind.group_scales_type() is not None:
        extra["group_scales"] = function.arg(f"{side}_groups",
                                             kind.group_scales_type())
    if kind.token_scales_type() is not None:
        extra["token_scales"] = function.arg(f"{side}_tokens",
                                             kind.token_scales_type())
    return function.bind_cache(pages, alias, name=side, **extra)


def _step_function(module: ir.Module, spec: LayerSpec, name: str,
                   aliases: Dict[str, ir.Alias]) -> None:
    f = module.function(name)
    k = _cache_arguments(f, spec, "k", aliases["k"])
    v = _cache_arguments(f, spec, "v", aliases["v"])
    query = f.arg("query", ir.memref((None, spec.num_heads, spec.head_dim),
                                     spec.dtype))
    rows = ir.memref((None, spec.kv_heads, spec.head_dim), spec.dtype)
    k_new = f.arg("k_new", rows)
    v_new = f.arg("v_new", rows)
    slots = f.arg("slots", ir.memref((None,), "i32"))
    block_table = f.arg("block_table", ir.memref((None, None), "i32"))
    seq_lens = f.arg("seq_lens", ir.memref((None,), "i32"))
    query_start = (f.arg("query_start", ir.memref((None,), "i32"))
                   if name == "extend" else None)
    scales = {}
    for side in ("k", "v"):
        scale_type = spec.cache_type(side).scale_type()
        if scale_type is not None:
            scales[side] = f.arg(f"{side}_scale", scale_type)
    sinks = (f.arg("sinks", ir.memref((spec.num_heads,), "f32"))
             if spec.sinks else None)
    out = f.arg("out", ir.memref((None, spec.num_heads, spec.head_dim),
                                 spec.dtype))
    f.write_cache(k_new, k, slots, scale=scales.get("k"))
    f.write_cache(v_new, v, slots, scale=scales.get("v"))
    f.paged_attention(
        query, k, v, block_table, seq_lens, out, num_heads=spec.num_heads,
        query_start=query_start, k_scale=scales.get("k"),
        v_scale=scales.get("v"), sinks=sinks,
        softmax_scale=spec.softmax_scale, softcap=spec.softcap,
        window=spec.window,
        max_query_len=MAX_QUERY_TOKENS if name == "extend" else 1)


def build_module(spec: LayerSpec) -> ir.Module:
    """The pattn module of ``spec``: ``decode`` and ``extend``."""
    module = ir.Module(comment=f"pattn.serving kernels: {spec}")
    aliases = {side: module.alias(f"{side}_cache", spec.cache_type(side))
               for side in ("k", "v")}
    for name in ("decode", "extend"):
        _step_function(module, spec, name, aliases)
    return module


class LayerBuffers:
    """One layer's cache buffers, allocated with torch: ``k_pages`` and
    ``v_pages`` (uint8 [blocks, block_size, kv_heads, row bytes], or
    [blocks, kv_heads, block_size, row] for ``hnd``; with
    ``interleaved_kv`` the two halves of one [blocks, 2, ...] tensor), nvfp4's
    ``<side>_groups`` (float8_e4m3fn, D/16 per row), a token side's
    ``<side>_tokens`` (f32 [blocks, block_size, kv_heads]) and a calibrated
    side's ``<side>_scale`` (f32 [1] or [kv_heads, D]), all zero until
    written. ``tensors`` maps argument names to them."""

    def __init__(self, spec: LayerSpec, num_blocks: int, device: Any):
        import torch
        self.spec = spec
        self.num_blocks = num_blocks
        self.tensors: Dict[str, Any] = {}
        if spec.interleaved_kv:  # one [blocks, 2, ...] allocation
            page = _shape(spec.cache_type("k").storage_type(num_blocks))
            pairs = torch.zeros((num_blocks, 2) + page[1:], dtype=torch.uint8,
                                device=device)
            self.tensors["k_pages"], self.tensors["v_pages"] = \
                pairs[:, 0], pairs[:, 1]
        for side in ("k", "v"):
            kind = spec.cache_type(side)
            if not spec.interleaved_kv:
                self.tensors[f"{side}_pages"] = torch.zeros(
                    _shape(kind.storage_type(num_blocks)), dtype=torch.uint8,
                    device=device)
            groups = kind.group_scales_type(num_blocks)
            if groups is not None:
                self.tensors[f"{side}_groups"] = torch.zeros(
                    _shape(groups), dtype=torch.uint8,
                    device=device).view(torch.float8_e4m3fn)
            tokens = kind.token_scales_type(num_blocks)
            if tokens is not None:
                self.tensors[f"{side}_tokens"] = torch.zeros(
                    _shape(tokens), dtype=torch.float32, device=device)
            scale = kind.scale_type()
            if scale is not None:
                self.tensors[f"{side}_scale"] = torch.ones(
                    _shape(scale), dtype=torch.float32, device=device)
        # The buffers live as long as the cache: inductor's CUDA graphs
        # (torch.compile mode="reduce-overhead") may write them in place
        # instead of skipping the graph for mutated inputs.
        for tensor in self.tensors.values():
            torch._dynamo.mark_static_address(tensor)

    @property
    def nbytes(self) -> int:
        """Bytes of the pages and per-row scales (not the small tables)."""
        return sum(t.numel() * t.element_size()
                   for name, t in self.tensors.items()
                   if not name.endswith("_scale"))


def _shape(memref: ir.MemRefType) -> Tuple[int, ...]:
    return tuple(memref.shape)


def default_cache_dir() -> str:
    """Where compiled kernels are kept: ``$PATTN_ARTIFACT_DIR``, else
    ``$XDG_CACHE_HOME/pattn/artifacts`` (``~/.cache/pattn/artifacts``)."""
    directory = os.environ.get("PATTN_ARTIFACT_DIR")
    if directory:
        return directory
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pattn", "artifacts")


def chip_of(capability: Tuple[int, int]) -> str:
    """The pattn chip (SPEC §1) whose code runs on a device of compute
    ``capability``: sm_90a, sm_100a and sm_120a for exactly 9.0, 10.0 and
    12.0 (their architecture-specific code runs nowhere else), else the
    newest of sm_80, sm_86 and sm_89 the device has (an sm_87 runs sm_86
    code)."""
    exact = {(9, 0): "sm_90a", (10, 0): "sm_100a", (12, 0): "sm_120a"}
    capability = tuple(capability)
    if capability in exact:
        return exact[capability]
    if (8, 0) <= capability < (9, 0):
        return "sm_89" if capability >= (8, 9) else \
            "sm_86" if capability >= (8, 6) else "sm_80"
    raise ArgumentError(
        f"pattn has no code for a GPU of compute capability "
        f"{capability[0]}.{capability[1]}: it compiles for 8.x, 9.0, 10.0 "
        "and 12.0 (sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a)")


def device_chip(device: Any) -> str:
    """:func:`chip_of` the CUDA ``device``."""
    import torch
    return chip_of(tuple(torch.cuda.get_device_capability(device)))


class CompiledKernels:
    """:func:`build_module` of ``spec`` compiled for ``chip`` and loaded.

    Compiling goes through pattn's artifact cache in ``cache_dir``
    (:func:`default_cache_dir`), so a shape is compiled once per compiler;
    ``progress`` (a callable taking a line, default: print to stderr)
    says when a compile starts and ends, so a first call is a visible
    compile, not a stall."""

    def __init__(self, spec: LayerSpec, chip: str,
                 cache_dir: Optional[str] = None, progress: Any = None):
        import pattn
        self.spec = spec
        self.chip = chip
        source = build_module(spec)
        say = progress if progress is not None else _stderr_line
        directory = cache_dir or default_cache_dir()
        say(f"pattn: kernels for {_describe(spec)} on {chip} "
            f"(cache {directory}) ...")
        path = pattn.compile(source, chips=(chip,), cache_dir=directory)
        say(f"pattn: kernels for {_describe(spec)} ready")
        self.module = pattn.load(path)
        self._functions = {name: self.module.functions[name]
                           for name in ("decode", "extend")}

    def step(self, name: str, tensors: Dict[str, Any]) -> None:
        """Runs ``decode`` or ``extend`` on torch's current stream."""
        function = self._functions[name]
        function(**{arg: tensors[arg] for arg in function.arg_names})


def _describe(spec: LayerSpec) -> str:
    k, v = spec.format.k, spec.format.v
    extras = []
    if spec.softcap:
        extras.append(f"softcap {spec.softcap:g}")
    if spec.window > 0:
        extras.append(f"window {spec.window}")
    if spec.sinks:
        extras.append("sinks")
    return (f"{spec.num_heads}/{spec.kv_heads} heads D{spec.head_dim} "
            f"{spec.dtype}, K {k[0]}/{k[1]}, V {v[0]}/{v[1]}, "
            f"{spec.block_size}-token pages"
            + "".join(", " + e for e in extras))


def _stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)

