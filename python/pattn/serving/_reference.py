"""The serving kernels on the CPU: pattn's reference, call for call.

:class:`ReferenceKernels` takes the calls :class:`CompiledKernels` takes
(``step("decode" | "extend", tensors)``, the same tensor names) and runs
them with :mod:`pattn.reference`: the K/V rows are quantized into the
pages bit-exactly as ``pattn.write_cache`` does (the GPU suite checks the
two agree byte for byte), and attention is computed in float64 over the
dequantized pages and rounded once to the activation type. It is what
tests use to drive a model through pattn's caches on a machine without a
GPU, and what a user can run to see what a cache format does to a model
before running it on one. It is slow: a correctness path.
"""

from __future__ import annotations

from typing import Any, Dict

from ._kernels import LayerSpec

__all__ = ["ReferenceKernels"]


def _numpy(tensor: Any) -> Any:
    """A numpy view of a CPU tensor (fp8 and bf16 through their bytes)."""
    import torch
    if tensor.dtype in (torch.float8_e4m3fn, torch.bfloat16):
        tensor = tensor.view(torch.uint8 if tensor.dtype ==
                             torch.float8_e4m3fn else torch.int16)
    return tensor.detach().numpy()


def _float64(tensor: Any) -> Any:
    return tensor.detach().to("cpu").double().numpy()


class ReferenceKernels:
    """The ``decode``/``extend`` steps of ``spec`` on CPU tensors."""

    def __init__(self, spec: LayerSpec):
        self.spec = spec

    def _cache(self, side: str, tensors: Dict[str, Any]) -> Any:
        from .. import reference
        spec = self.spec
        encoding, scale = getattr(spec.format, side)
        pages = tensors[f"{side}_pages"]
        groups = tensors.get(f"{side}_groups")
        tokens = tensors.get(f"{side}_tokens")
        return reference.PagedCache(
            encoding, scale, spec.layout, pages.shape[0], spec.block_size,
            spec.kv_heads, spec.head_dim, storage=_numpy(pages),
            group_scales=None if groups is None else _numpy(groups),
            token_scales=None if tokens is None else _numpy(tokens))

    def step(self, name: str, tensors: Dict[str, Any]) -> None:
        """Appends ``k_new``/``v_new`` at ``slots``, then writes the
        attention of ``query`` into ``out`` (in place, like the GPU)."""
        import torch
        from .. import reference
        for tensor in tensors.values():
            if tensor.device.type != "cpu":
                raise ValueError("pattn.serving.ReferenceKernels runs on CPU "
                                 f"tensors, got one on {tensor.device}")
        slots = tensors["slots"].numpy()
        caches, scales = {}, {}
        for side in ("k", "v"):
            cache = self._cache(side, tensors)
            scale = tensors.get(f"{side}_scale")
            scales[side] = None if scale is None else scale.numpy()
            cache.write(_float64(tensors[f"{side}_new"]), slots,
                        scale=scales[side])
            caches[side] = cache
        query_start = tensors.get("query_start")
        if name == "decode" and query_start is not None:
            raise ValueError("decode takes no query_start")
        sinks = tensors.get("sinks")
        spec = self.spec
        result = reference.paged_attention_ref(
            _float64(tensors["query"]),
            caches["k"].dequantize(scales["k"]),
            caches["v"].dequantize(scales["v"]),
            tensors["block_table"].numpy(), tensors["seq_lens"].numpy(),
            query_start=None if query_start is None else query_start.numpy(),
            softmax_scale=spec.softmax_scale, softcap=spec.softcap,
            window=spec.window,
            sinks=None if sinks is None else _float64(sinks))
        out = tensors["out"]
        out.copy_(torch.from_numpy(result).to(out.dtype))
