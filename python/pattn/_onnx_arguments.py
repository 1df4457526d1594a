"""The pattn arguments of an imported ONNX node, built from its tensors.

``pattn.onnx.call_arguments(entry, tensors)`` turns the tensors an ONNX
Runtime caller holds for one attention node (its inputs and outputs, by
ONNX tensor name) into the keyword arguments of the function pattn.onnx
made from it: each tensor viewed as its argument's memref (no copy: a
written buffer must stay the caller's buffer), and the arguments pattn
needs that ONNX does not have (``total_seqlens``, ``slots``, ...) computed
by the rule each manifest entry names (``computed_args[i]["rule"]``; the
``formula`` beside it says the same in words). torch tensors and numpy
arrays both work; the computed arguments are made with the same library,
on the same device, as int32.
"""

import re
from typing import Any, Dict, Mapping, Optional, Sequence

from ._errors import ArgumentError

_MEMREF = re.compile(r"^memref<(?:((?:\?|\d+)(?:x(?:\?|\d+))*)x)?(\w+)>$")

# Manifest element type -> the torch / numpy dtype names that carry it.
_ELEMENTS = {
    "f16": ("float16",), "bf16": ("bfloat16",), "f32": ("float32",),
    "i32": ("int32",), "i64": ("int64",), "i8": ("int8", "uint8"),
}


def _parse_memref(text: str):
    """(dims with None for ?, element) of a memref type's text."""
    match = _MEMREF.match(text)
    if not match:
        raise ArgumentError(f"cannot read the argument type {text!r}")
    dims = [] if not match.group(1) else [
        None if d == "?" else int(d) for d in match.group(1).split("x")]
    return dims, match.group(2)


class _Arrays:
    """The few array operations the rules need, in the caller's library."""

    def __init__(self, like: Any):
        self.torch = type(like).__module__.split(".")[0] == "torch"
        if self.torch:
            import torch
            self.lib, self.device = torch, like.device
        else:
            import numpy
            self.lib, self.device = numpy, None

    def contiguous(self, array: Any) -> bool:
        if self.torch:
            return array.is_contiguous()
        return bool(array.flags.c_contiguous)

    def dtype_name(self, array: Any) -> str:
        return str(array.dtype).replace("torch.", "")

    def int32(self, array: Any) -> Any:
        if self.torch:
            return array.to(self.lib.int32)
        return array.astype(self.lib.int32)

    def arange(self, n: int) -> Any:
        if self.torch:
            return self.lib.arange(n, dtype=self.lib.int32,
                                   device=self.device)
        return self.lib.arange(n, dtype=self.lib.int32)

    def take(self, array: Any, *indices: Any) -> Any:
        """array[indices...] (torch indexes with int64)."""
        if self.torch:
            indices = tuple(index.long() for index in indices)
        return array[indices]

    def repeat(self, values: Any, counts: Any) -> Any:
        """values[b] repeated counts[b] times, in order."""
        if self.torch:
            return self.lib.repeat_interleave(values, counts.long())
        return self.lib.repeat(values, counts)

    def bytes_view(self, array: Any) -> Any:
        return array.view(self.lib.int8)

    def reshape(self, array: Any, dims: Sequence[Optional[int]]) -> Any:
        """A view of ``array`` with ``dims``: one unknown dimension (None)
        is what the others leave; several are the array's own (the ranks
        then agree: the view only retypes, like a block table's)."""
        if list(dims).count(None) > 1 and len(dims) == len(array.shape):
            shape = [int(n) if d is None else d
                     for d, n in zip(dims, array.shape)]
        else:
            shape = [-1 if d is None else d for d in dims]
        if self.torch:
            return array.view(*shape) if shape else array.view(())
        view = array.view()
        view.shape = shape  # raises instead of copying a strided array
        return view


def _view(arrays: _Arrays, item: dict, tensor: Any) -> Any:
    """The ONNX tensor of manifest input/output ``item`` as its argument."""
    dims, element = _parse_memref(item["arg_type"])
    dtype = arrays.dtype_name(tensor)
    if not arrays.contiguous(tensor):
        raise ArgumentError(
            f"ONNX tensor '{item['onnx']}' is not contiguous: pattn takes "
            "contiguous buffers, and a contiguous copy would not be the "
            "caller's buffer (which the function may write)")
    if element == "i8" and dtype not in _ELEMENTS["i8"]:
        tensor = arrays.bytes_view(tensor)  # a cache: its bytes
    elif dtype not in _ELEMENTS.get(element, (element,)):
        raise ArgumentError(
            f"ONNX tensor '{item['onnx']}' has dtype {dtype}; argument "
            f"'{item['arg']}' takes {item['arg_type']}")
    try:
        return arrays.reshape(tensor, dims)
    except (RuntimeError, ValueError, AttributeError) as error:
        raise ArgumentError(
            f"ONNX tensor '{item['onnx']}' of shape {tuple(tensor.shape)} "
            f"cannot be viewed as {item['arg_type']} without a copy "
            f"({item.get('view', 'a reshape')}): {error}") from None


def _sequence_positions(arrays: _Arrays, first: Any, counts: Any) -> tuple:
    """For each new token, its sequence b and its position first[b] + i,
    for i < counts[b], tokens in sequence order."""
    batch = counts.shape[0]
    sequence = arrays.repeat(arrays.arange(batch), counts)
    starts = arrays.repeat(arrays.int32(counts.cumsum(0) - counts), counts)
    index = arrays.arange(sequence.shape[0]) - starts
    return sequence, arrays.int32(arrays.take(first, sequence) + index)


def _paged_slots(arrays: _Arrays, block_table: Any, sequence: Any,
                 position: Any, block: int) -> Any:
    pages = arrays.take(block_table, sequence, position // block)
    return arrays.int32(pages * block + position % block)


def _compute(arrays: _Arrays, rule: dict, onnx: Dict[str, Any],
             given: Dict[str, Any]) -> Any:
    """One computed argument by its manifest rule."""
    kind = rule["rule"]
    if kind == "past_plus_new":
        cu = arrays.int32(onnx["cumulative_sequence_length"])
        return arrays.int32(onnx["past_seqlens"] + cu[1:] - cu[:-1])
    if kind == "slots_after_past":
        cu = arrays.int32(onnx["cumulative_sequence_length"])
        sequence, position = _sequence_positions(
            arrays, arrays.int32(onnx["past_seqlens"]), cu[1:] - cu[:-1])
        return _paged_slots(arrays, onnx["block_table"], sequence, position,
                            rule["block_size"])
    seqlens_k = arrays.int32(onnx["seqlens_k"])
    batch, seq = seqlens_k.shape[0], rule.get("query_tokens", 1)
    if kind == "total_is_seqlens_k_plus_one":
        return arrays.int32(seqlens_k + 1)
    if kind == "page_per_sequence":
        return arrays.reshape(arrays.arange(batch), [batch, 1])
    if kind == "uniform_query_start":
        return arrays.int32(arrays.arange(batch + 1) * seq)
    counts = arrays.int32(seqlens_k * 0 + seq)
    sequence, position = _sequence_positions(
        arrays, arrays.int32(seqlens_k + 1 - seq), counts)
    if kind == "sequence_page_slots":
        return arrays.int32(sequence * rule["page_tokens"] + position)
    if kind == "paged_copy_slots":
        return _paged_slots(arrays, given["block_table"], sequence, position,
                            rule["block_size"])
    raise ArgumentError(f"unknown computed-argument rule {kind!r} (a "
                        "manifest from a newer pattn?)")


def call_arguments(entry: Mapping[str, Any], tensors: Mapping[str, Any],
                   **caller_held: Any) -> Dict[str, Any]:
    """The keyword arguments of the pattn function of manifest ``entry``.

    ``tensors`` maps ONNX tensor names to the node's inputs and outputs
    (outputs that are an input's buffer, like ``present.0.key``, may be left
    out). ``caller_held`` gives the arguments only the caller can have (a
    GroupQueryAttention imported with paged copies: ``past_key_pages``,
    ``past_value_pages`` and ``block_table``). Raises
    :class:`pattn.ArgumentError` naming what is missing or cannot be
    viewed.
    """
    args: Dict[str, Any] = {}
    arrays = None
    for item in list(entry["inputs"]) + list(entry["outputs"]):
        if not item.get("arg") or "aliases" in item:
            continue
        if item["onnx"] not in tensors:
            raise ArgumentError(
                f"{entry['function']}: no tensor for ONNX "
                f"{'input' if 'input' in item else 'output'} "
                f"'{item['onnx']}' (argument '{item['arg']}')")
        tensor = tensors[item["onnx"]]
        arrays = arrays or _Arrays(tensor)
        args[item["arg"]] = _view(arrays, item, tensor)
    for computed in entry["computed_args"]:
        name, rule = computed["arg"], computed["rule"]
        if rule["rule"] == "caller_held":
            if name not in caller_held:
                raise ArgumentError(
                    f"{entry['function']}: argument '{name}' is the "
                    f"caller's ({computed['formula']}); pass {name}=...")
            args[name] = caller_held[name]
            continue
        sources = computed["from_onnx"]
        missing = [f"{slot} ('{tensor}')" for slot, tensor in sources.items()
                   if tensor not in tensors]
        if missing:
            raise ArgumentError(
                f"{entry['function']}: argument '{name}' is computed from "
                f"ONNX input {', '.join(missing)}, which tensors lacks")
        by_slot = {slot: tensors[tensor] for slot, tensor in sources.items()}
        arrays = arrays or _Arrays(next(iter(tensors.values())))
        args[name] = _compute(arrays, rule, by_slot, caller_held)
    return args
