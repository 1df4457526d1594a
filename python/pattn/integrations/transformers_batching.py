"""pattn under transformers' continuous batching: ``"paged|pattn"``.

::

    from pattn.integrations import transformers_batching
    transformers_batching.use(cache_format="i4")   # also registers the name
    model.set_attn_implementation("paged|pattn")
    outputs = model.generate_batch(prompts, generation_config=config)

transformers' own engine runs unchanged: its scheduler, block allocator,
prefix sharing, forks and chunked prefill decide which tokens go where; pattn
replaces the storage and the attention. :class:`PattnPagedAttentionCache`
(installed as continuous batching's ``PagedAttentionCache``; for any other
implementation it makes transformers' own) asks its base class for raw byte pages, so that the base class's
block allocator, trash blocks, fork copies and memory planner all work on
pattn's ``[blocks, block_size, kv_heads, row_bytes]`` pages; the per-token
and nvfp4 group scales live beside them (``scale_buffers``) and follow the
pages in fork copies. The attention function (:func:`paged_attention`)
takes what the engine passes (``cu_seq_lens_q/k``, ``read_index``,
``write_index``) and derives pattn's block table from the read index on the
device, with no host round trip, then appends and attends with one
``extend`` call per layer.

Limits (transformers 5.17, the GPU machine's version): models whose layers
are all full attention (the engine keeps a sliding layer's pages as a ring
in its own order, which a block table cannot describe); one row size for K
and V (the presets); calibrated sides (int4's K table) are set by the first
batch the engine runs unless ``scales=`` gives them, and CUDA-graph capture
needs them given. transformers 5.25 reworks continuous batching (no
``paged|`` names, custom implementations rejected): :func:`use` says so.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Union

from .._errors import ArgumentError
from ..serving import CacheFormat, LayerSpec, kernels_for
from ..serving import cache_format as _as_format
from ..serving import row_bytes as _row_bytes
from ._state import calibrated_scale, checked_table

__all__ = ["NAME", "PattnPagedAttentionCache", "paged_attention", "register",
           "use"]

#: The attn_implementation name of pattn under continuous batching.
NAME = "paged|pattn"

_SETTINGS: Dict[str, Any] = {"format": None, "scales": {}, "headroom": 1.0,
                             "kernels": "auto"}
_LOCK = threading.Lock()
_CLASSES: Dict[str, Any] = {}


def register() -> None:
    """Registers ``"paged|pattn"`` with transformers' AttentionInterface
    and installs :class:`PattnPagedAttentionCache` into continuous
    batching (idempotent)."""
    import transformers
    from transformers import AttentionInterface
    major_minor = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    AttentionInterface.register(NAME, paged_attention)
    if major_minor >= (5, 18):
        return  # continuous batching reworked: see use()
    from transformers.generation.continuous_batching import continuous_api
    continuous_api.PagedAttentionCache = _cache_class()


def use(cache_format: Union[str, CacheFormat, None] = None, *,
        scales: Optional[Dict[int, Dict[str, Any]]] = None,
        headroom: float = 1.0, kernels: str = "auto") -> None:
    """Sets the cache format (and calibrated scales) of the continuous
    batching runs that follow, process-wide, and registers
    ``"paged|pattn"``."""
    import transformers
    version = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    if version >= (5, 18):
        raise ArgumentError(
            f"pattn's continuous batching is written against transformers "
            f"5.17 ('paged|' implementations, PagedAttentionCache.update in "
            f"the attention function); this is {transformers.__version__}, "
            "whose continuous batching takes no custom attention: use "
            "PattnCache with generate(), or transformers==5.17.0")
    fmt = None if cache_format is None else _as_format(cache_format)
    if fmt is not None and _row_bytes(fmt.k[0], 128) != _row_bytes(
            fmt.v[0], 128):
        raise ArgumentError(
            f"continuous batching keeps K and V pages in one layout: format "
            f"{fmt.name} has K {fmt.k[0]} and V {fmt.v[0]}, rows of "
            "different sizes")
    with _LOCK:
        _SETTINGS.update(format=fmt, scales=dict(scales or {}),
                         headroom=float(headroom), kernels=kernels)
    register()


def _cache_class() -> Any:
    if "cache" in _CLASSES:
        return _CLASSES["cache"]
    import copy

    import torch
    from transformers.generation.continuous_batching.cache import (
        PagedAttentionCache, find_head_dim)

    class PattnPagedAttentionCache(PagedAttentionCache):
        """continuous batching's cache over pattn pages (module
        docstring). Installed in place of transformers' class, it makes
        one of those for every other attention implementation."""

        def __new__(cls, config: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(config, "_attn_implementation", None) != NAME:
                return PagedAttentionCache(config, *args, **kwargs)
            return super().__new__(cls)

        def __init__(self, config: Any, continuous_batching_config: Any,
                     device: Any, distributed_helper: Any, tp_plan: Any,
                     dtype: Any = torch.float16) -> None:
            act = {torch.float16: "f16", torch.bfloat16: "bf16"}.get(dtype)
            if act is None:
                raise ArgumentError(f"paged|pattn attends in float16 or "
                                    f"bfloat16, not {dtype}")
            fmt = _SETTINGS["format"] or _as_format(None, act)
            self.pattn_format, self.activation = fmt, act
            self.real_head_dim = find_head_dim(config)
            row = _row_bytes(fmt.k[0], self.real_head_dim)
            shim = copy.copy(config)
            shim.head_dim = row
            super().__init__(shim, continuous_batching_config, device,
                             distributed_helper, tp_plan, dtype=torch.uint8)
            self.config = config
            self.pattn_row_bytes = row
            blocks = self.key_cache[0].shape[0] // self.block_size
            self.scale_buffers = [self._scale_buffers(blocks)
                                  for _ in self.key_cache]
            self.scale_tables: Dict[int, Dict[str, Any]] = {}
            if any(s != 1 for s in getattr(self, "sliding_windows",
                                           {}).values()):
                raise ArgumentError(
                    "paged|pattn serves models whose layers are all full "
                    "attention: transformers keeps a sliding layer's pages "
                    "as a ring (use PattnCache with generate() for them)")

        def _scale_buffers(self, blocks: int) -> Dict[str, Any]:
            spec = LayerSpec(self.num_key_value_heads,
                             self.num_key_value_heads, self.real_head_dim,
                             self.activation, self.pattn_format,
                             self.block_size)
            out = {}
            for side in ("k", "v"):
                kind = spec.cache_type(side)
                groups = kind.group_scales_type(blocks)
                if groups is not None:
                    out[f"{side}_groups"] = torch.zeros(
                        tuple(groups.shape), dtype=torch.uint8,
                        device=self.device).view(torch.float8_e4m3fn)
                tokens = kind.token_scales_type(blocks)
                if tokens is not None:
                    out[f"{side}_tokens"] = torch.zeros(
                        tuple(tokens.shape), dtype=torch.float32,
                        device=self.device)
            return out

        def pages(self, index: int) -> Dict[str, Any]:
            """Storage ``index``'s buffers under the kernels' names."""
            shape = (-1, self.block_size, self.num_key_value_heads,
                     self.pattn_row_bytes)
            buffers = {"k_pages": self.key_cache[index].view(shape),
                       "v_pages": self.value_cache[index].view(shape)}
            buffers.update(self.scale_buffers[index])
            return buffers

        def copy_cache(self, list_source_blocks: Any,
                       list_forked_blocks: Any) -> None:
            super().copy_cache(list_source_blocks, list_forked_blocks)
            source = torch.tensor(list_source_blocks, device=self.device)
            forked = torch.tensor(list_forked_blocks, device=self.device)
            for buffers in self.scale_buffers:
                for tensor in buffers.values():
                    tensor[forked] = tensor[source]

    _CLASSES["cache"] = PattnPagedAttentionCache
    return PattnPagedAttentionCache


def _block_table(read: Any, write: Any, cu_k: Any, cu_q: Any,
                 block_size: int, width: int) -> Any:
    """[batch, width] block ids of each request, from the engine's slot
    lists: ``read`` holds every request's slots of positions 0..len-1 in
    order (``cu_k`` apart); with no cached past it is empty and ``write``
    holds them (``cu_q`` apart). On the device, no host round trip."""
    import torch
    source, starts = (read, cu_k) if read.numel() else (write, cu_q)
    offsets = torch.arange(width, device=source.device) * block_size
    first = starts[:-1].long()[:, None] + offsets
    valid = offsets < (starts[1:] - starts[:-1]).long()[:, None]
    blocks = source[first.clamp(max=source.numel() - 1)] // block_size
    return torch.where(valid, blocks, -1).to(torch.int32).contiguous()


def paged_attention(module: Any, query: Any, key: Any, value: Any,
                    attention_mask: Any, scaling: Optional[float] = None,
                    dropout: float = 0.0, softcap: Optional[float] = None,
                    sliding_window: Optional[int] = None, s_aux: Any = None,
                    **kwargs: Any) -> Any:
    """The attention function of ``"paged|pattn"`` (module docstring):
    query [1, heads, T, D] and the new key/value rows [1, kv_heads, T, D]
    of the engine's packed batch; returns ([1, T, heads, D], None)."""
    import torch
    cache = kwargs.get("cache")
    if cache is None or not hasattr(cache, "pattn_format"):
        raise ArgumentError(
            "'paged|pattn' runs under transformers' continuous batching "
            "(generate_batch) after pattn.integrations.transformers_batching."
            "use(); for generate() use attn_implementation='pattn' with a "
            "PattnCache")
    if sliding_window:
        raise ArgumentError("paged|pattn: sliding-window layers are not "
                            "served under continuous batching")
    layer = module.layer_idx
    group, index = cache.layer_index_to_group_indices[layer]
    cu_q = kwargs["cu_seq_lens_q"].to(torch.int32)
    cu_k = kwargs["cu_seq_lens_k"]
    max_k = kwargs["max_seqlen_k"]
    if isinstance(cu_k, dict):
        cu_k, max_k = cu_k["full_attention"], max_k["full_attention"]
    cu_k = cu_k.to(torch.int32)
    width = max(1, -(-int(max_k) // cache.block_size))
    write = kwargs["write_index"][group]
    table = _block_table(kwargs["read_index"][group], write, cu_k, cu_q,
                         cache.block_size, width)
    heads, tokens, dim = query.shape[1], query.shape[2], query.shape[3]
    sinks = s_aux if s_aux is not None else getattr(module, "sinks", None)
    spec = LayerSpec(heads, key.shape[1], dim, cache.activation,
                     cache.pattn_format, cache.block_size,
                     softmax_scale=None if scaling is None else float(scaling),
                     softcap=float(softcap or 0.0), sinks=sinks is not None)
    q = query[0].transpose(0, 1).contiguous()
    k = key[0].transpose(0, 1).contiguous()
    v = value[0].transpose(0, 1).contiguous()
    tensors = cache.pages(index)
    tensors.update(_tables(cache, layer, spec, k, v))
    out = torch.zeros_like(q)   # padded tokens (no sequence) stay zero
    tensors.update(query=q, k_new=k, v_new=v, slots=write.to(torch.int32),
                   block_table=table, seq_lens=(cu_k[1:] - cu_k[:-1]),
                   query_start=cu_q, out=out)
    if sinks is not None:
        tensors["sinks"] = sinks.detach().float().contiguous()
    kernels = kernels_for(spec, query.device, _SETTINGS["kernels"])
    kernels.step("extend", tensors)
    return out.unsqueeze(0), None


def _tables(cache: Any, layer: int, spec: LayerSpec, k: Any, v: Any) -> Any:
    """Layer ``layer``'s calibrated scale tables: given, or set by the
    first batch it attends."""
    import torch
    tables = cache.scale_tables.get(layer)
    if tables is None:
        given = _SETTINGS["scales"].get(layer, {})
        tables = {}
        for side, rows in (("k", k), ("v", v)):
            encoding, scale = getattr(spec.format, side)
            if scale not in ("tensor", "channel"):
                continue
            if side in given:
                shape = tuple(spec.cache_type(side).scale_type().shape)
                tables[f"{side}_scale"] = checked_table(
                    given[side], torch.empty(shape, device=k.device), layer,
                    side)
            elif torch.cuda.is_available() and \
                    torch.cuda.is_current_stream_capturing():
                raise ArgumentError(
                    f"paged|pattn: layer {layer}'s {side.upper()} scale table "
                    "would be calibrated inside a CUDA-graph capture; give "
                    "it with transformers_batching.use(scales=...)")
            else:
                tables[f"{side}_scale"] = calibrated_scale(
                    rows, encoding, scale, _SETTINGS["headroom"])
        cache.scale_tables[layer] = tables
    return tables

