"""pattn in Hugging Face transformers: generate() on quantized paged caches.

::

    from pattn.integrations.transformers import PattnCache, register
    register()                                     # attn_implementation "pattn"
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.float16,
                                                 attn_implementation="pattn")
    cache = PattnCache(model.config, max_batch_size=4, max_cache_len=8192,
                       cache_format="i4")
    out = model.generate(**inputs, past_key_values=cache, max_new_tokens=64)

:class:`PattnCache` is a ``transformers.Cache`` whose layers keep K and V
in pattn pages of a :class:`pattn.serving.CacheFormat` (f16, bf16, i8,
f8e4m3, i4 with per-channel K scales, nvfp4), and :func:`register` adds
``"pattn"`` to transformers' ``AttentionInterface`` (and its mask to
``AttentionMaskInterface``). The model applies its own RoPE and norms as
always; ``Cache.update`` hands the new K/V rows to the attention function,
which appends them to the pages and attends in one pattn call per layer:
``decode`` for one token per sequence, ``extend`` for prompts, prompt
chunks and speculative tokens.

Sequences are ragged inside the cache: a left-padded batch's pad tokens are
never written (the attention mask says which tokens are real), so each
sequence's pages hold only its own tokens, and RoPE positions (transformers
counts them from the mask) match the cache positions. Each sequence owns
``ceil(max_cache_len / block_size)`` pages.

Calibrated sides (int4's per-channel K table; any ``tensor``/``channel``
side of a custom format): the first prompt a layer sees sets its table,
``s[h, c] = headroom * max(amax[h, c], amax_max * 2**-16) / max_code``
over the prompt's real tokens of every sequence, kept for the cache's life
(later tokens that exceed it saturate); ``scales=`` gives tables instead.
The floor keeps a silent channel's scale within 16 binades of the loudest,
inside the fold's budget (SPEC §6), so the XQA kernel stays eligible.

Kernels are compiled per layer shape once (pattn's artifact cache, a
progress line while it runs). On CPU tensors, or with
``kernels="reference"``, the same calls run on pattn's float64 reference
(:class:`pattn.serving.ReferenceKernels`).

Importing this module never imports transformers or torch; the classes
that derive from transformers' are made on first use.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Union

from .._errors import ArgumentError
from ..serving import CacheFormat
from ._state import CacheState

__all__ = ["ATTENTION_NAME", "PattnCache", "layer_specs",
           "pattn_attention_forward", "pattn_attention_mask", "precompile",
           "register"]

#: The attn_implementation name pattn registers.
ATTENTION_NAME = "pattn"

_HANDOFF = threading.local()
_CLASSES: Dict[str, Any] = {}


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as error:
        raise ImportError(
            "pattn.integrations.transformers needs transformers >= 5.0 "
            f"(pip install transformers): {error}") from None
    return transformers


def register() -> None:
    """Registers ``"pattn"`` with transformers' ``AttentionInterface`` and
    ``AttentionMaskInterface`` (idempotent), so that
    ``attn_implementation="pattn"`` and ``model.set_attn_implementation(
    "pattn")`` work; also ``"paged|pattn"`` for continuous batching
    (:mod:`pattn.integrations.transformers_batching`)."""
    _transformers()
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface
    from . import transformers_batching
    AttentionInterface.register(ATTENTION_NAME, pattn_attention_forward)
    AttentionMaskInterface.register(ATTENTION_NAME, pattn_attention_mask)
    transformers_batching.register()


def pattn_attention_mask(batch_size: int, q_length: int, kv_length: int,
                         q_offset: int = 0, kv_offset: int = 0,
                         mask_function: Any = None,
                         attention_mask: Any = None, **kwargs: Any) -> Any:
    """The mask pattn's attention takes: which of this step's query tokens
    are real, as a bool [batch, q_length] (the last ``q_length`` columns
    of the 2-D padding mask), or None when all are. Causality, windows and
    the cache's history are the kernel's own business. While a CUDA graph
    is being captured the check would need the host, so a captured step
    takes every token as real (a decode step's are)."""
    if attention_mask is None:
        return None
    import torch
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        return None
    if attention_mask.dim() != 2:
        raise ArgumentError(
            "attn_implementation 'pattn' takes the 2-D padding mask "
            f"[batch, tokens]; got a {attention_mask.dim()}-D mask")
    real = attention_mask[:, -q_length:].bool()
    return None if bool(real.all()) else real


def _pending(key: Any) -> Any:
    pending = getattr(_HANDOFF, "pending", None)
    _HANDOFF.pending = None
    if pending is None or pending[2] is not key:
        raise ArgumentError(
            "attn_implementation 'pattn' attends over a pattn cache: call the "
            "model with past_key_values=pattn.integrations.transformers."
            "PattnCache(...) (and use_cache=True); this call's keys did not "
            "come from one")
    return pending


def pattn_attention_forward(module: Any, query: Any, key: Any, value: Any,
                            attention_mask: Any, scaling: Optional[float] =
                            None, dropout: float = 0.0,
                            softcap: Optional[float] = None,
                            sliding_window: Optional[int] = None,
                            s_aux: Any = None, **kwargs: Any) -> Any:
    """transformers' attention function for ``"pattn"``: query
    [batch, heads, tokens, D], key/value the rows
    :meth:`PattnCache.update` just took; returns ([batch, tokens, heads,
    D], None)."""
    if dropout:
        raise ArgumentError("attn_implementation 'pattn' is for inference: "
                            "attention dropout must be 0 (model.eval())")
    cache, layer_idx, _, _ = _pending(key)
    sinks = s_aux if s_aux is not None else getattr(module, "sinks", None)
    out = cache._state.attend(
        layer_idx, query, key, value, attention_mask, scaling=scaling,
        softcap=softcap, window=sliding_window, sinks=sinks)
    return out, None


def layer_specs(model: Any, cache_format: Union[str, CacheFormat, None],
                dtype: str = "f16", block_size: int = 16,
                tp_size: Optional[int] = None) -> list:
    """The :class:`pattn.serving.LayerSpec` of each distinct attention layer
    of ``model`` (a model, or a config: then built on torch's meta device,
    which allocates nothing), as its attention calls will ask for them:
    heads from the config, ``scaling``, ``attn_logit_softcapping``,
    ``sliding_window`` and ``sinks`` from the attention modules.

    Under tensor parallelism each rank attends over its share of the heads:
    ``tp_size`` ranks (default: the model's ``tp_size``, else 1) divide the
    query and KV heads."""
    import torch
    from ..serving import LayerSpec, cache_format as as_format
    if tp_size is None:
        tp_size = int(getattr(model, "tp_size", None) or 1)
    if not hasattr(model, "modules"):
        transformers = _transformers()
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(model)
    config = model.config.get_text_config() if hasattr(
        model.config, "get_text_config") else model.config
    heads, kv_heads = (int(config.num_attention_heads),
                       int(config.num_key_value_heads))
    if tp_size < 1 or heads % tp_size or kv_heads % tp_size:
        raise ArgumentError(
            f"layer_specs: {tp_size} tensor-parallel ranks do not divide "
            f"{heads} query heads and {kv_heads} KV heads evenly")
    fmt = as_format(cache_format, dtype)
    specs = []
    for module in model.modules():
        if not (hasattr(module, "layer_idx") and hasattr(module, "scaling")
                and hasattr(module, "k_proj")):
            continue
        head_dim = int(getattr(module, "head_dim", None) or
                       config.hidden_size // config.num_attention_heads)
        softcap = getattr(module, "attn_logit_softcapping", None)
        window = getattr(module, "sliding_window", None)
        spec = LayerSpec(
            heads // tp_size, kv_heads // tp_size, head_dim, dtype, fmt,
            block_size,
            softmax_scale=float(module.scaling), softcap=float(softcap or 0),
            window=int(window) if window else -1,
            sinks=getattr(module, "sinks", None) is not None)
        if spec not in specs:
            specs.append(spec)
    return specs


def precompile(model: Any, cache_formats: Any, chips: Any,
               dtype: str = "f16", block_size: int = 16,
               cache_dir: Optional[str] = None, progress: Any = None,
               tp_size: Optional[int] = None) -> list:
    """Compiles the kernels of ``model`` (a model or a config) for each of
    ``cache_formats`` and ``chips`` into the artifact cache (``cache_dir``,
    default :func:`pattn.serving.default_cache_dir`), so that a GPU machine
    without pattn's compiler finds them there; ``tp_size`` as in
    :func:`layer_specs` (every rank's shard has the same shape, so ranks
    share the artifacts). Returns the artifacts' paths."""
    import pattn
    from ..serving import build_module, default_cache_dir
    formats = [cache_formats] if isinstance(cache_formats, (str,
                                                            CacheFormat)) \
        else list(cache_formats)
    chip_list = [chips] if isinstance(chips, str) else list(chips)
    directory = cache_dir or default_cache_dir()
    paths = []
    for fmt in formats:
        for spec in layer_specs(model, fmt, dtype, block_size, tp_size):
            for chip in chip_list:
                if progress is not None:
                    progress(f"pattn: compiling {spec} for {chip}")
                paths.append(pattn.compile(build_module(spec), chips=(chip,),
                                           cache_dir=directory))
    return paths


def _cache_classes() -> Any:
    """PattnCache and PattnLayer, derived from transformers' Cache and
    CacheLayerMixin on first use."""
    if "cache" in _CLASSES:
        return _CLASSES["cache"], _CLASSES["layer"]
    _transformers()
    from transformers.cache_utils import Cache, CacheLayerMixin

    class PattnLayer(CacheLayerMixin):
        """One layer of a :class:`PattnCache`: its place in the shared
        state. The pages live in the state (``state.layers[i]``)."""

        is_compileable = False
        is_croppable = True

        def __init__(self, state: CacheState, index: int):
            super().__init__()
            self.state = state
            self.index = index

        def lazy_initialization(self, key_states: Any,
                                value_states: Any) -> None:
            self.state.layer(self.index, key_states)
            self.is_initialized = True

        def update(self, key_states: Any, value_states: Any, *args: Any,
                   **kwargs: Any) -> Any:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            self.state.note_update(self.index, key_states.shape[-2])
            return key_states, value_states

        def get_mask_sizes(self, query_length: int) -> Any:
            return self.state.columns(self.index) + query_length, 0

        def get_seq_length(self) -> int:
            return self.state.columns(self.index)

        def get_max_length(self) -> int:
            return self.state.max_cache_len

        def reset(self) -> None:
            self.state.reset()

        def crop(self, max_length: int) -> None:
            self.state.crop(self.index, max_length)

        def reorder_cache(self, beam_idx: Any) -> None:
            self.state.reorder(self.index, beam_idx)

        def batch_repeat_interleave(self, repeats: int) -> None:
            self.state.repeat_interleave(self.index, repeats)

        def batch_select_indices(self, indices: Any) -> None:
            self.state.select(self.index, indices)

        def offload(self) -> None:
            raise NotImplementedError("a PattnCache stays on its GPU")

        def prefetch(self) -> None:
            pass

    class PattnCache(Cache):
        __doc__ = _PATTN_CACHE_DOC

        def __init__(self, config: Any, max_batch_size: int,
                     max_cache_len: int,
                     cache_format: Union[str, CacheFormat, None] = None, *,
                     block_size: int = 16, kernels: str = "auto",
                     scales: Optional[Dict[int, Dict[str, Any]]] = None,
                     headroom: float = 1.0, cache_dir: Optional[str] = None,
                     progress: Any = None):
            config = getattr(config, "config", config)  # a model is fine
            text = config.get_text_config() if hasattr(
                config, "get_text_config") else config
            layers = int(text.num_hidden_layers)
            state = CacheState(
                layers=layers, max_batch_size=max_batch_size,
                max_cache_len=max_cache_len, cache_format=cache_format,
                block_size=block_size, kernels=kernels, scales=scales,
                headroom=headroom, cache_dir=cache_dir, progress=progress)
            self._state = state
            super().__init__(layers=[PattnLayer(state, i)
                                     for i in range(layers)])

        @property
        def cache_format(self) -> CacheFormat:
            return self._state.format

        @property
        def seq_lens(self) -> Any:
            """Each sequence's tokens in the cache (host list)."""
            return list(self._state.lengths)

        def update(self, key_states: Any, value_states: Any, layer_idx: int,
                   *args: Any, **kwargs: Any) -> Any:
            unclaimed = getattr(_HANDOFF, "pending", None)
            if unclaimed is not None and unclaimed[0] is self:
                _HANDOFF.pending = None
                raise ArgumentError(
                    "PattnCache: layer "
                    f"{unclaimed[1]}'s new keys were not taken by pattn's "
                    "attention: a PattnCache hands the attention only the "
                    "new rows, so the model must run with "
                    "attn_implementation='pattn' (register() it, then "
                    "model.set_attn_implementation('pattn'))")
            keys, values = super().update(key_states, value_states,
                                          layer_idx, *args, **kwargs)
            _HANDOFF.pending = (self, layer_idx, keys, values)
            return keys, values

        def note_replays(self, replays: int = 1) -> None:
            """After replaying a captured decode step ``replays`` times
            (each replay advanced the pages and lengths on the device),
            brings the host's lengths and positions up to date."""
            self._state.note_replays(replays)

        def memory_bytes(self) -> int:
            """Bytes of the pages and per-token scales allocated so far."""
            return self._state.memory_bytes()

    _CLASSES["cache"], _CLASSES["layer"] = PattnCache, PattnLayer
    return PattnCache, PattnLayer


_PATTN_CACHE_DOC = """A transformers ``Cache`` over pattn pages.

``PattnCache(config, max_batch_size, max_cache_len, cache_format="i4")``:
``config`` is the model's config (or the model); each of up to
``max_batch_size`` sequences holds up to ``max_cache_len`` tokens in
``block_size``-token pages of ``cache_format`` (a preset name of
:data:`pattn.serving.FORMATS` or a :class:`pattn.serving.CacheFormat`;
None: the model's 16-bit type). Buffers are allocated on the first
``update`` of each layer, on the device and in the type of its keys.
``kernels``: ``"auto"`` (compiled pattn kernels on CUDA, the reference on
CPU), ``"compiled"`` or ``"reference"``. ``scales``: ``{layer: {"k":
table, "v": table}}`` for calibrated sides, else the first prompt
calibrates them (module docstring); ``headroom`` multiplies calibrated
scales. ``cache_dir`` and ``progress`` go to the kernel compiles.
"""


def __getattr__(name: str) -> Any:
    if name == "PattnCache":
        return _cache_classes()[0]
    if name == "PattnLayer":
        return _cache_classes()[1]
    raise AttributeError(name)

