"""What a transformers PattnCache keeps, apart from transformers' classes.

:class:`CacheState` holds every layer's pages (:class:`pattn.serving.
LayerBuffers`), the sequences' lengths, the block table and the current
forward step, and runs a layer's append + attention (:meth:`attend`). It
needs torch but not transformers, so it is tested on its own too.

A *step* is one forward of the model: the first layer that attends in it
works out which of the step's query tokens are real (the padding mask),
where they go (slots), the lengths after it and the query starts, and the
other layers reuse that. Pages are laid out statically: sequence ``b``
owns blocks ``b * P .. (b + 1) * P - 1`` (``P = ceil(max_cache_len /
block_size)``), so the block table never changes and a decode step's
metadata is computed on the device without a host round trip.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Set, Union

from .._errors import ArgumentError, ArgumentTypeError
from ..serving import (MAX_CODE, MAX_QUERY_TOKENS, CacheFormat,
                       LayerBuffers, LayerSpec, kernels_for)
from ..serving import cache_format as _cache_format

__all__ = ["CacheState", "calibrated_scale", "checked_table"]

_KERNEL_MODES = ("auto", "compiled", "reference")
_DTYPES = {"torch.float16": "f16", "torch.bfloat16": "bf16"}


def calibrated_scale(values: Any, encoding: str, scale: str,
                     headroom: float = 1.0) -> Any:
    """The table a prompt sets for a ``tensor``/``channel`` side:
    ``headroom * max(amax, amax_max * 2**-16) / max_code`` per (KV head,
    channel) of ``values`` [tokens, kv_heads, D] (one value for
    ``tensor``), f32; all ones when every value is zero. No host sync."""
    import torch
    amax = values.detach().abs().float().amax(dim=0)          # [kvh, D]
    if scale == "tensor":
        amax = amax.amax().reshape(1)
    top = amax.max()
    table = torch.maximum(amax, top * 2.0 ** -16) * float(headroom) \
        / MAX_CODE[encoding]
    return torch.where(top > 0, table, torch.ones_like(table)).contiguous()


@dataclasses.dataclass
class _Chunk:
    """One kernel call of a step: ``columns`` of the step's query tokens."""

    name: str                  # "decode" or "extend"
    index: Any                 # flat [B * S] rows of real tokens, or None
    slots: Any
    seq_lens: Any
    query_start: Any           # None for decode


@dataclasses.dataclass
class _Step:
    batch: int
    width: int                 # query tokens per row (padded), S
    chunks: List[_Chunk]
    whole: bool                # one chunk, every token real: no gather
    done: Set[int] = dataclasses.field(default_factory=set)


class _Layer:
    def __init__(self, buffers: LayerBuffers, calibrated: bool):
        self.buffers = buffers
        self.calibrated = calibrated
        self.specs: Dict[tuple, LayerSpec] = {}


class CacheState:
    """The pages, lengths and step of one PattnCache (module docstring)."""

    def __init__(self, layers: int, max_batch_size: int, max_cache_len: int,
                 cache_format: Union[str, CacheFormat, None] = None,
                 block_size: int = 16, kernels: str = "auto",
                 scales: Optional[Dict[int, Dict[str, Any]]] = None,
                 headroom: float = 1.0, cache_dir: Optional[str] = None,
                 progress: Any = None):
        for name, value, low in (("layers", layers, 1),
                                 ("max_batch_size", max_batch_size, 1),
                                 ("max_cache_len", max_cache_len, 1),
                                 ("block_size", block_size, 16)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ArgumentTypeError(f"PattnCache: '{name}' must be an "
                                        f"int, got {type(value).__name__}")
            if value < low:
                raise ArgumentError(f"PattnCache: '{name}' must be >= {low}, "
                                    f"got {value}")
        if block_size & (block_size - 1):
            raise ArgumentError(f"PattnCache: 'block_size' must be a power "
                                f"of two (SPEC §3), got {block_size}")
        if kernels not in _KERNEL_MODES:
            raise ArgumentError(f"PattnCache: 'kernels' must be one of "
                                f"{', '.join(_KERNEL_MODES)}, got "
                                f"{kernels!r:.40}")
        if not headroom > 0:
            raise ArgumentError(f"PattnCache: 'headroom' must be > 0, got "
                                f"{headroom!r}")
        # None: the model's 16-bit type, known at the first update.
        self.format: Optional[CacheFormat] = (
            None if cache_format is None else _cache_format(cache_format))
        self.max_batch_size = max_batch_size
        self.max_cache_len = max_cache_len
        self.block_size = block_size
        self.pages_per_sequence = -(-max_cache_len // block_size)
        self.kernels_mode = kernels
        self.scales = dict(scales or {})
        self.headroom = float(headroom)
        self.cache_dir = cache_dir
        self.progress = progress
        self._layers: List[Optional[_Layer]] = [None] * layers
        self._columns = [0] * layers
        self.batch: Optional[int] = None
        self.lengths: List[int] = []
        self._lengths_device: Any = None
        self._block_table: Any = None
        self._slot_base: Any = None
        self._step: Optional[_Step] = None

    # -- layers ------------------------------------------------------------

    def layer(self, index: int, key_states: Any) -> _Layer:
        """Layer ``index``'s buffers, allocated on the first call from the
        device, type and shape of its keys [batch, kv_heads, tokens, D]."""
        layer = self._layers[index]
        if layer is not None:
            return layer
        dtype = _DTYPES.get(str(key_states.dtype))
        if dtype is None:
            raise ArgumentError(
                f"PattnCache: layer {index}'s keys are {key_states.dtype}; "
                "pattn attends in float16 or bfloat16 (load the model with "
                "dtype=torch.float16 or torch.bfloat16)")
        if self.format is None:
            self.format = _cache_format(None, dtype)
        kv_heads, head_dim = int(key_states.shape[1]), int(key_states.shape[-1])
        # The buffers depend on the format and sizes only; the attention
        # attributes join the spec when the layer first attends.
        spec = LayerSpec(kv_heads, kv_heads, head_dim, dtype, self.format,
                         self.block_size)
        buffers = LayerBuffers(
            spec, self.max_batch_size * self.pages_per_sequence,
            key_states.device)
        given = self.scales.get(index, {})
        for side in self.format.calibrated:
            if side in given:
                target = buffers.tensors[f"{side}_scale"]
                target.copy_(checked_table(given[side], target, index, side))
        layer = _Layer(buffers, calibrated=all(
            side in given for side in self.format.calibrated))
        self._layers[index] = layer
        return layer

    def note_replays(self, replays: int) -> None:
        """Counts ``replays`` replays of a captured decode step: each
        sequence and each layer's positions advanced by one per replay on
        the device, which the host did not see."""
        if replays < 0:
            raise ArgumentError("PattnCache.note_replays: replays >= 0")
        capacity = self.pages_per_sequence * self.block_size
        lengths = [n + replays for n in self.lengths]
        if any(n > capacity for n in lengths):
            raise ArgumentError(
                f"PattnCache: {replays} replays ran past max_cache_len "
                f"{self.max_cache_len}; the pages held no more")
        self.lengths = lengths
        self._columns = [c + replays if c else c for c in self._columns]
        self._step = None

    def note_update(self, index: int, tokens: int) -> None:
        self._columns[index] += int(tokens)

    def columns(self, index: int) -> int:
        """Positions layer ``index`` has taken (padding included), what
        transformers calls its sequence length."""
        return self._columns[index]

    def memory_bytes(self) -> int:
        return sum(layer.buffers.nbytes for layer in self._layers
                   if layer is not None)

    # -- steps -------------------------------------------------------------

    def _start_batch(self, batch: int, device: Any) -> None:
        import torch
        if batch > self.max_batch_size:
            raise ArgumentError(
                f"PattnCache: a batch of {batch} sequences; this cache was "
                f"made for at most {self.max_batch_size} (max_batch_size)")
        self.batch = batch
        self.lengths = [0] * batch
        self._lengths_device = torch.zeros(batch, dtype=torch.int32,
                                           device=device)
        pages = self.pages_per_sequence
        self._block_table = torch.arange(
            self.max_batch_size * pages, dtype=torch.int32,
            device=device).view(self.max_batch_size, pages)
        self._slot_base = self._block_table[:, 0] * self.block_size

    def _new_step(self, query: Any, real: Any) -> _Step:
        import torch
        batch, width = int(query.shape[0]), int(query.shape[2])
        device = query.device
        if self.batch is None:
            self._start_batch(batch, device)
        elif batch != self.batch:
            raise ArgumentError(
                f"PattnCache: this step has {batch} sequences, the cache "
                f"holds {self.batch}; a cache serves one batch (reset() it "
                "or make another)")
        if real is not None and tuple(real.shape) != (batch, width):
            raise ArgumentError(
                f"PattnCache: the padding mask of this step is "
                f"{tuple(real.shape)}, expected [{batch}, {width}]")
        if real is None and width == 1:
            return self._decode_step(batch)
        windows = [(low, min(width, low + MAX_QUERY_TOKENS))
                   for low in range(0, width, MAX_QUERY_TOKENS)]
        counts = [[high - low] * batch if real is None
                  else real[:, low:high].sum(dim=1).tolist()
                  for low, high in windows]
        capacity = self.pages_per_sequence * self.block_size
        for b in range(batch):
            total = self.lengths[b] + sum(c[b] for c in counts)
            if total > capacity:
                raise ArgumentError(
                    f"PattnCache: sequence {b} would hold {total} tokens; "
                    f"the cache holds {self.max_cache_len} per sequence "
                    "(max_cache_len)")
        chunks = [self._extend_chunk(batch, width, window, chunk_counts,
                                     None if real is None else
                                     real[:, window[0]:window[1]], device)
                  for window, chunk_counts in zip(windows, counts)]
        whole = real is None and len(chunks) == 1
        self._lengths_device.copy_(chunks[-1].seq_lens)
        return _Step(batch, width, chunks, whole)

    def _decode_step(self, batch: int) -> _Step:
        import torch
        capacity = self.pages_per_sequence * self.block_size
        full = [b for b in range(batch) if self.lengths[b] + 1 > capacity]
        if full:
            raise ArgumentError(
                f"PattnCache: sequence {full[0]} is full ({capacity} tokens "
                f"in {self.pages_per_sequence} pages; max_cache_len "
                f"{self.max_cache_len})")
        # In place on the device: a captured decode step (a CUDA graph of
        # the model's forward) advances the lengths on every replay. The
        # host's copy (capacity checks, the next prompt's slots) advances
        # once, at the capture: note_replays() brings it up to date.
        lengths = self._lengths_device
        lengths.add_(1)
        slots = self._slot_base[:batch] + lengths - 1
        seq_lens = lengths
        self.lengths = [n + 1 for n in self.lengths]
        chunk = _Chunk("decode", None, slots, seq_lens, None)
        return _Step(batch, 1, [chunk], True)

    def _extend_chunk(self, batch: int, width: int, window: Any,
                      counts: List[int], real: Any, device: Any) -> _Chunk:
        """The ``extend`` call for query columns [low, high) of a step,
        ``counts[b]`` real tokens of sequence b among them."""
        import torch
        low, high = window
        if real is None:
            index = None if (low, high) == (0, width) else torch.cat([
                torch.arange(b * width + low, b * width + high)
                for b in range(batch)]).to(device)
        else:
            rows = torch.arange(batch, device=real.device)[:, None] * width \
                + torch.arange(low, high, device=real.device)[None, :]
            index = rows[real].to(device)
        capacity = self.pages_per_sequence * self.block_size
        slots = torch.cat([
            torch.arange(self.lengths[b], self.lengths[b] + counts[b],
                         dtype=torch.int32) + b * capacity
            for b in range(batch)])
        for b in range(batch):
            self.lengths[b] += counts[b]
        starts = [0]
        for count in counts:
            starts.append(starts[-1] + count)
        host = {"slots": slots,
                "seq_lens": torch.tensor(self.lengths, dtype=torch.int32),
                "query_start": torch.tensor(starts, dtype=torch.int32)}
        moved = {name: t.to(device) for name, t in host.items()}
        return _Chunk("extend", index, moved["slots"], moved["seq_lens"],
                      moved["query_start"])

    def _step_for(self, index: int, query: Any, real: Any) -> _Step:
        step = self._step
        if step is None or index in step.done:
            step = self._step = self._new_step(query, real)
        elif int(query.shape[2]) != step.width:
            raise ArgumentError(
                f"PattnCache: layer {index} attends {query.shape[2]} tokens "
                f"in a step of {step.width}")
        step.done.add(index)
        return step

    # -- attention ---------------------------------------------------------

    def _spec(self, layer: _Layer, query: Any, scaling: Optional[float],
              softcap: Optional[float], window: Optional[int],
              sinks: bool) -> LayerSpec:
        key = (int(query.shape[1]), scaling, softcap, window, sinks)
        spec = layer.specs.get(key)
        if spec is None:
            base = layer.buffers.spec
            spec = dataclasses.replace(
                base, num_heads=int(query.shape[1]),
                softmax_scale=None if scaling is None else float(scaling),
                softcap=float(softcap or 0.0),
                window=int(window) if window else -1, sinks=sinks)
            layer.specs[key] = spec
        return spec

    def attend(self, index: int, query: Any, key: Any, value: Any,
               real: Any, scaling: Optional[float] = None,
               softcap: Optional[float] = None, window: Optional[int] = None,
               sinks: Any = None) -> Any:
        """Appends layer ``index``'s new rows ``key``/``value`` [batch,
        kv_heads, S, D] and attends ``query`` [batch, heads, S, D] over the
        pages; ``real`` [batch, S] bool marks the real tokens (None: all).
        Returns [batch, S, heads, D]; a padding token's row is zero."""
        import torch
        layer = self._layers[index]
        if layer is None:
            layer = self.layer(index, key)
        spec = self._spec(layer, query, scaling, softcap, window,
                          sinks is not None)
        _check_rows(spec, query, key, value)
        kernels = kernels_for(spec, query.device, self.kernels_mode,
                              self.cache_dir, self.progress)
        step = self._step_for(index, query, real)
        batch, width = step.batch, step.width
        heads, dim = spec.num_heads, spec.head_dim
        flat_q = query.transpose(1, 2).reshape(batch * width, heads, dim)
        flat_k = key.transpose(1, 2).reshape(batch * width, spec.kv_heads,
                                             dim)
        flat_v = value.transpose(1, 2).reshape(batch * width, spec.kv_heads,
                                               dim)
        outputs = []
        for chunk in step.chunks:
            rows = [t if chunk.index is None else t.index_select(0,
                                                                 chunk.index)
                    for t in (flat_q, flat_k, flat_v)]
            q, k, v = (t.contiguous() for t in rows)
            if not layer.calibrated:
                self._calibrate(layer, k, v)
            out = torch.empty_like(q)
            tensors = dict(layer.buffers.tensors)
            tensors.update(query=q, k_new=k, v_new=v, slots=chunk.slots,
                           block_table=self._block_table[:batch],
                           seq_lens=chunk.seq_lens, out=out)
            if chunk.query_start is not None:
                tensors["query_start"] = chunk.query_start
            if sinks is not None:
                tensors["sinks"] = sinks.detach().float().contiguous()
            kernels.step(chunk.name, tensors)
            outputs.append(out)
        if step.whole:
            return outputs[0].view(batch, width, heads, dim)
        full = query.new_zeros(batch * width, heads, dim)
        for chunk, out in zip(step.chunks, outputs):
            full.index_copy_(0, chunk.index, out)
        return full.view(batch, width, heads, dim)

    def _calibrate(self, layer: _Layer, k: Any, v: Any) -> None:
        for side, rows in (("k", k), ("v", v)):
            encoding, scale = getattr(self.format, side)
            if scale in ("tensor", "channel") and rows.shape[0] > 0:
                layer.buffers.tensors[f"{side}_scale"].copy_(
                    calibrated_scale(rows, encoding, scale, self.headroom))
        layer.calibrated = True

    # -- transformers' cache operations -------------------------------------

    def reset(self) -> None:
        """Forgets every sequence (the pages stay allocated; calibrated
        tables are set again by the next prompt unless given)."""
        self._columns = [0] * len(self._columns)
        self.batch = None
        self.lengths = []
        self._lengths_device = None
        self._step = None
        for index, layer in enumerate(self._layers):
            if layer is not None:
                given = self.scales.get(index, {})
                layer.calibrated = all(side in given
                                       for side in self.format.calibrated)

    def crop(self, index: int, max_length: int) -> None:
        """Drops the last positions of every sequence so that layer
        ``index`` keeps ``max_length`` (negative: that many fewer). The
        dropped positions must be real tokens of every sequence (as in
        assisted decoding)."""
        columns = self._columns[index]
        if max_length < 0:
            max_length = columns + max_length
        removed = columns - max(0, max_length)
        if removed <= 0:
            return
        self._columns[index] = columns - removed
        self._step = None
        if index == self._first_layer():
            if any(n < removed for n in self.lengths):
                raise ArgumentError(
                    f"PattnCache.crop: cannot drop {removed} tokens from a "
                    f"sequence of {min(self.lengths)}")
            self.lengths = [n - removed for n in self.lengths]
            self._sync_lengths()

    def _first_layer(self) -> int:
        return next((i for i, layer in enumerate(self._layers)
                     if layer is not None), 0)

    def _sync_lengths(self) -> None:
        import torch
        if self._lengths_device is not None:
            self._lengths_device.copy_(torch.tensor(self.lengths,
                                                    dtype=torch.int32))

    def _rows(self, layer: _Layer, batch: int) -> List[Any]:
        """Views [batch, pages, ...] of the layer's per-block buffers."""
        pages = self.pages_per_sequence
        return [t[:batch * pages].view(batch, pages, *t.shape[1:])
                for name, t in layer.buffers.tensors.items()
                if not name.endswith("_scale")]

    def _move_rows(self, index: int, sources: Any, batch: int) -> None:
        """Row ``r`` of every buffer of layer ``index`` becomes old row
        ``sources[r]`` (``batch`` rows afterwards)."""
        import torch
        layer = self._layers[index]
        old = self.batch or 0
        if batch > self.max_batch_size:
            raise ArgumentError(
                f"PattnCache: {batch} sequences exceed max_batch_size "
                f"{self.max_batch_size}")
        if layer is not None and old:
            sources = torch.as_tensor(sources, dtype=torch.long)
            for view, target in zip(self._rows(layer, old),
                                    self._rows(layer, batch)):
                target.copy_(view.index_select(0,
                                               sources.to(view.device)))
        self._step = None
        if index == self._first_layer() and old:
            self.lengths = [self.lengths[int(r)] for r in sources]
            device = self._lengths_device.device
            self.batch = batch
            self._lengths_device = torch.tensor(self.lengths,
                                                dtype=torch.int32,
                                                device=device)

    def reorder(self, index: int, beam_idx: Any) -> None:
        self._move_rows(index, beam_idx.tolist(), len(beam_idx))

    def repeat_interleave(self, index: int, repeats: int) -> None:
        old = self.batch or 0
        self._move_rows(index, [r // repeats for r in range(old * repeats)],
                        old * repeats)

    def select(self, index: int, indices: Any) -> None:
        self._move_rows(index, [int(i) for i in indices], len(indices))


def checked_table(value: Any, target: Any, index: int, side: str) -> Any:
    """``value`` as layer ``index``'s ``side`` table, the shape and device
    of ``target``; an error unless it is finite and non-negative."""
    import torch
    table = torch.as_tensor(value, dtype=torch.float32).to(target.device)
    if table.numel() != target.numel():
        raise ArgumentError(
            f"pattn: scales[{index}][{side!r}] has {table.numel()} "
            f"values; this layer's table is {list(target.shape)}")
    table = table.reshape(target.shape)
    if not bool(torch.isfinite(table).all()) or bool((table < 0).any()):
        raise ArgumentError(f"pattn: scales[{index}][{side!r}] must be "
                            "finite and non-negative (SPEC §2)")
    return table


def _check_rows(spec: LayerSpec, query: Any, key: Any, value: Any) -> None:
    dims = (int(query.shape[-1]), int(key.shape[-1]), int(value.shape[-1]))
    if len(set(dims)) != 1 or int(key.shape[1]) != spec.kv_heads:
        raise ArgumentError(
            f"PattnCache: query/key/value head sizes {dims} and "
            f"{key.shape[1]} KV heads; pattn's caches take one head size "
            f"for Q, K and V and {spec.kv_heads} KV heads in this layer")
