"""pattn for serving engines: cache formats, a layer's kernels and buffers.

What an engine (or a model integration such as
:mod:`pattn.integrations.transformers`) needs to keep a model's KV cache in
pattn pages and attend over it, without writing MLIR:

* :class:`CacheFormat` / :data:`FORMATS`: the encoding and scale of K and V
  (f16, bf16, i8, f8e4m3, i4 with per-channel K scales, nvfp4);
* :class:`LayerSpec`: one attention layer's shape and attributes, and
  :func:`build_module`, its pattn module (``decode`` and ``extend``, each an
  append of the new K/V rows followed by attention);
* :class:`LayerBuffers`: the layer's pages and scale buffers in torch;
* :func:`kernels_for`: the kernels of a spec for a device, compiled once per
  process and shape (:class:`CompiledKernels`, through pattn's artifact
  cache) or, on the CPU, :class:`ReferenceKernels` (pattn's float64
  reference, bit-exact writes).

docs/Serving.md maps this onto vLLM's and SGLang's attention backends.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Tuple

from ._formats import FORMATS, MAX_CODE, CacheFormat, cache_format, row_bytes
from ._kernels import (MAX_QUERY_TOKENS, STEP_ARGUMENTS, CompiledKernels,
                       LayerBuffers, LayerSpec, build_module, chip_of,
                       default_cache_dir, device_chip)
from ._reference import ReferenceKernels
from .._errors import ArgumentError

__all__ = ["CacheFormat", "CompiledKernels", "FORMATS", "LayerBuffers",
           "LayerSpec", "MAX_CODE", "MAX_QUERY_TOKENS", "ReferenceKernels",
           "STEP_ARGUMENTS", "build_module", "cache_format", "chip_of",
           "default_cache_dir", "device_chip", "kernels_for", "row_bytes"]

_LOCK = threading.Lock()
_KERNELS: Dict[Tuple[Any, ...], Any] = {}


def kernels_for(spec: LayerSpec, device: Any, mode: str = "auto",
                cache_dir: Optional[str] = None, progress: Any = None) -> Any:
    """The kernels of ``spec`` for tensors on ``device``: ``mode`` "auto"
    (compiled on CUDA, the reference on the CPU), "compiled" or
    "reference". Made once per process for each spec, chip and cache
    directory."""
    kind = getattr(device, "type", str(device))
    if mode == "reference" or (mode == "auto" and kind == "cpu"):
        key: Tuple[Any, ...] = (spec, "reference")
    elif kind == "cuda":
        key = (spec, device_chip(device), cache_dir or default_cache_dir())
    else:
        raise ArgumentError(f"pattn kernels run on CUDA devices (or, as the "
                            f"reference, on the CPU), not on {device}")
    with _LOCK:
        kernels = _KERNELS.get(key)
        if kernels is None:
            kernels = (ReferenceKernels(spec) if key[1] == "reference"
                       else CompiledKernels(spec, key[1], key[2], progress))
            _KERNELS[key] = kernels
    return kernels
