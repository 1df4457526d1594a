"""Importing ONNX attention nodes into pattn (issue 11, item 3).

    python -m pattn.onnx model.onnx -o model.mlir     # also model.manifest.json
    python -m pattn.onnx model.onnx --list            # what compiles, and why not

Each ``com.microsoft`` ``PagedAttention`` and ``GroupQueryAttention`` node of
the model's main graph becomes one pattn function, built with
:mod:`pattn.ir`: the new K and V rows are written into the cache
(``pattn.write_cache``), then ``pattn.paged_attention`` attends over it.
Arguments are named after the ONNX tensors they carry (``--arg-names
schema`` names them after the op's input names instead), and a manifest
says, for every ONNX input and output of the node, which argument carries
it and how the tensor is viewed (a ``(tokens, heads*dim)`` query is the
``[tokens, heads, dim]`` argument; a cache is its bytes), and which
arguments the caller computes from other inputs (``total_seqlens`` is
``past_seqlens`` plus each sequence's new tokens). docs/ONNX.md has the
mapping attribute by attribute.

Whatever the dialect cannot express (rotary embedding, QK-norm, packed QKV,
head sinks, attention bias, quantized GQA caches, f32 activations, dynamic
cache shapes pattn needs static, ...) is an :class:`UnsupportedNodeError`
that names the node, the attribute or input, and the value; nothing is
dropped silently. ``--dim NAME=VALUE`` binds a symbolic dimension
(``--dim past_sequence_length=4096``).

``import pattn`` does not import this module, and this module imports the
``onnx`` package only when a model is read.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import ir
from ._errors import ArgumentError
from ._onnx_arguments import call_arguments

__all__ = ["AttentionNode", "Reason", "UnsupportedNodeError", "analyze",
           "call_arguments", "import_model", "main", "write_outputs"]

DOMAIN = "com.microsoft"
OP_TYPES = ("PagedAttention", "GroupQueryAttention")
#: Query tokens per sequence pattn.paged_attention takes (max_query_len):
#: decode, speculative tokens, prompts and prompt chunks.
MAX_QUERY_TOKENS = 32768

# ONNX TensorProto element types (onnx.TensorProto.*), so that the tables
# below do not need onnx imported.
_FLOAT, _UINT8, _INT8, _INT32, _INT64, _FLOAT16, _DOUBLE, _BFLOAT16 = (
    1, 2, 3, 6, 7, 10, 11, 16)
_FLOAT8E4M3FN, _FLOAT8E5M2 = 17, 19
_DTYPE_NAMES = {
    1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
    7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "double",
    12: "uint32", 13: "uint64", 16: "bfloat16", 17: "float8e4m3fn",
    18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz",
    21: "uint4", 22: "int4", 23: "float4e2m1"}
_ACTIVATIONS = {_FLOAT16: "f16", _BFLOAT16: "bf16"}

PAGED_INPUTS = (
    "query", "key", "value", "key_cache", "value_cache",
    "cumulative_sequence_length", "past_seqlens", "block_table", "cos_cache",
    "sin_cache", "slot_mapping", "head_sink", "q_norm_weight",
    "k_norm_weight", "k_scale", "v_scale", "attention_metadata")
PAGED_OUTPUTS = ("output", "key_cache_out", "value_cache_out")
PAGED_ATTRIBUTES = {
    "num_heads": None, "kv_num_heads": None, "scale": 0.0, "softcap": 0.0,
    "local_window_size": -1, "is_causal": 1, "do_rotary": 0,
    "rotary_interleaved": 0, "qk_norm_epsilon": 1e-6, "k_quant_type": "NONE",
    "v_quant_type": "NONE", "k_cache_dtype": "", "v_cache_dtype": "",
    "kv_cache_layout": "SEPARATE", "v_head_size": 0, "rotary_offset": 0}

GQA_INPUTS = (
    "query", "key", "value", "past_key", "past_value", "seqlens_k",
    "total_sequence_length", "cos_cache", "sin_cache", "position_ids",
    "attention_bias", "head_sink", "k_scale", "v_scale", "q_norm_weight",
    "k_norm_weight", "query_seqlens")
GQA_OUTPUTS = ("output", "present_key", "present_value", "output_qk")
GQA_ATTRIBUTES = {
    "num_heads": None, "kv_num_heads": None, "causal": 1, "scale": 0.0,
    "softcap": 0.0, "local_window_size": -1, "sliding_window_cache": 0,
    "do_rotary": 0, "rotary_interleaved": 0, "smooth_softmax": -1,
    "qk_output": 0, "k_quant_type": "NONE", "v_quant_type": "NONE",
    "kv_cache_bit_width": None, "qk_norm_epsilon": 1e-6,
    "q_norm_epsilon": None, "k_norm_epsilon": None}

_FLOATS = {_FLOAT16: "f16", _BFLOAT16: "bf16", _FLOAT: "f32"}
_TABLE_ELEMENTS = {"f16": "f16", "f32": "f32"}  # constant tables pattn prints


class UnsupportedNodeError(ArgumentError):
    """An attention node (or several) that pattn cannot compile; ``reasons``
    lists every :class:`Reason`, each naming the node, the attribute or
    input, and its value."""

    def __init__(self, message: str, reasons: Sequence["Reason"]):
        super().__init__(message)
        self.reasons = list(reasons)


@dataclass(frozen=True)
class Reason:
    """Why a node does not import: ``what`` is ``"attribute"``, ``"input"``
    or ``"output"``, ``name`` its schema name (with ``index`` for inputs and
    outputs), ``value`` what the model has."""

    node: str
    op_type: str
    what: str
    name: str
    value: object
    why: str
    index: Optional[int] = None

    def __str__(self) -> str:
        slot = "" if self.index is None else f" (#{self.index})"
        return (f"{self.op_type} node '{self.node}': {self.what} "
                f"'{self.name}'{slot} = {_show(self.value)}: {self.why}")


class _Word(str):
    """A value written bare in messages (``absent``), not quoted."""


ABSENT, MISSING = _Word("absent"), _Word("missing")


def _show(value: object) -> str:
    if isinstance(value, _Word):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)


@dataclass
class AttentionNode:
    """One attention node and what the importer made of it: ``function``
    is the pattn function's name, ``reasons`` empty when it imports."""

    name: str
    op_type: str
    function: str
    reasons: List[Reason] = field(default_factory=list)

    @property
    def compiles(self) -> bool:
        return not self.reasons


# ---------------------------------------------------------------------------
# Reading the graph
# ---------------------------------------------------------------------------

Dim = Union[int, str, None]


@dataclass
class _Tensor:
    name: str
    dtype: Optional[int]  # TensorProto element type, None if unknown
    shape: Optional[Tuple[Dim, ...]]  # None if the rank is unknown
    initializer: object = None  # the TensorProto if it is an initializer

    @property
    def dtype_name(self) -> str:
        return "unknown" if self.dtype is None else _DTYPE_NAMES.get(
            self.dtype, str(self.dtype))

    def shape_text(self) -> str:
        if self.shape is None:
            return "unknown"
        return "(" + ", ".join("?" if d is None else str(d)
                               for d in self.shape) + ")"


def _load(model: object):
    import onnx  # the package, not this module
    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model), load_external_data=False)
    if not isinstance(model, onnx.ModelProto):
        raise ArgumentError(f"pattn.onnx: expected an onnx.ModelProto or a "
                            f"path, got {type(model).__name__}")
    try:  # fills value_info for tensors computed by standard ops
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # contrib ops or a broken graph: keep what is there
        inferred = model
    return onnx, model, inferred


def _tensors(onnx, graph, dims: Dict[str, int]) -> Dict[str, _Tensor]:
    table: Dict[str, _Tensor] = {}

    def from_type(name: str, type_proto) -> None:
        if not type_proto.HasField("tensor_type"):
            return
        tensor_type = type_proto.tensor_type
        dtype = tensor_type.elem_type or None
        shape = None
        if tensor_type.HasField("shape"):
            shape = []
            for dim in tensor_type.shape.dim:
                if dim.HasField("dim_value"):
                    shape.append(dim.dim_value)
                elif dim.HasField("dim_param"):
                    shape.append(dims.get(dim.dim_param, dim.dim_param))
                else:
                    shape.append(None)
            shape = tuple(shape)
        table[name] = _Tensor(name, dtype, shape)

    for info in list(graph.value_info) + list(graph.output) + list(
            graph.input):
        from_type(info.name, info.type)
    for init in graph.initializer:
        table[init.name] = _Tensor(init.name, init.data_type,
                                   tuple(init.dims), init)
    return table


def _identifier(text: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "t"
    out = re.sub(r"_+", "_", out)
    return "_" + out if out[0].isdigit() else out


def _static(dim: Dim) -> Optional[int]:
    return dim if isinstance(dim, int) else None


# ---------------------------------------------------------------------------
# One node
# ---------------------------------------------------------------------------


class _Node:
    """The state of importing one node: its inputs and attributes, the
    reasons it cannot import, then the function and the manifest entry."""

    def __init__(self, onnx, node, tensors: Dict[str, _Tensor], name: str,
                 options: dict):
        self.onnx = onnx
        self.node = node
        self.name = name
        self.op = node.op_type
        self.tensors = tensors
        self.options = options
        schema = PAGED_INPUTS if self.op == "PagedAttention" else GQA_INPUTS
        outputs = PAGED_OUTPUTS if self.op == "PagedAttention" else \
            GQA_OUTPUTS
        known = PAGED_ATTRIBUTES if self.op == "PagedAttention" else \
            GQA_ATTRIBUTES
        self.schema, self.schema_outputs, self.known = schema, outputs, known
        self.reasons: List[Reason] = []
        self.inputs: Dict[str, str] = {}
        for index, tensor in enumerate(node.input):
            if index >= len(schema):
                self.reject("input", f"input #{index}", tensor,
                            f"{self.op} has {len(schema)} inputs", index)
            elif tensor:
                self.inputs[schema[index]] = tensor
        self.outputs: Dict[str, str] = {}
        for index, tensor in enumerate(node.output):
            if index >= len(outputs):
                self.reject("output", f"output #{index}", tensor,
                            f"{self.op} has {len(outputs)} outputs", index)
            elif tensor:
                self.outputs[outputs[index]] = tensor
        self.attrs: Dict[str, object] = {}
        for attribute in node.attribute:
            value = onnx.helper.get_attribute_value(attribute)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            self.attrs[attribute.name] = value
            if attribute.name not in known:
                self.reject("attribute", attribute.name, value,
                            f"not an attribute of com.microsoft {self.op} "
                            "that pattn knows; refusing to guess what it "
                            "does")

    # -- helpers -------------------------------------------------------------

    def reject(self, what: str, name: str, value: object, why: str,
               index: Optional[int] = None) -> None:
        if what == "input" and index is None and name in self.schema:
            index = self.schema.index(name)
        if what == "output" and index is None and name in \
                self.schema_outputs:
            index = self.schema_outputs.index(name)
        self.reasons.append(Reason(self.name, self.op, what, name, value,
                                   why, index))

    def attr(self, name: str) -> object:
        return self.attrs.get(name, self.known[name])

    def tensor(self, slot: str) -> Optional[_Tensor]:
        name = self.inputs.get(slot) or self.outputs.get(slot)
        if name is None:
            return None
        return self.tensors.get(name, _Tensor(name, None, None))

    def must_be_absent(self, slot: str, why: str) -> None:
        if slot in self.inputs:
            self.reject("input", slot, self.inputs[slot], why)

    def must_be_default(self, name: str, why: str,
                        off: Sequence[object] = ()) -> None:
        value = self.attr(name)
        if value != self.known[name] and value not in off:
            self.reject("attribute", name, value, why)

    def dtype(self, slot: str, allowed: Dict[int, str], what: str) -> \
            Optional[str]:
        tensor = self.tensor(slot)
        if tensor is None:
            return None
        if tensor.dtype not in allowed:
            names = ", ".join(_DTYPE_NAMES[d] for d in allowed)
            self.reject("input" if slot in self.inputs else "output", slot,
                        f"{tensor.name}: {tensor.dtype_name}",
                        f"{what} must be {names}")
            return None
        return allowed[tensor.dtype]

    def shape(self, slot: str, rank: int, meaning: str) -> \
            Optional[Tuple[Dim, ...]]:
        tensor = self.tensor(slot)
        if tensor is None:
            return None
        if tensor.shape is None:
            self.reject("input" if slot in self.inputs else "output", slot,
                        f"{tensor.name}: shape unknown",
                        f"pattn needs its shape {meaning}; give the graph "
                        "input or value_info a shape")
            return None
        if len(tensor.shape) != rank:
            self.reject("input" if slot in self.inputs else "output", slot,
                        f"{tensor.name}: {tensor.shape_text()}",
                        f"expected rank {rank}: {meaning}")
            return None
        return tensor.shape

    def static_dim(self, slot: str, shape, axis: int, label: str
                   ) -> Optional[int]:
        dim = shape[axis]
        if isinstance(dim, int):
            return dim
        tensor = self.tensor(slot)
        hint = (f"; bind it with --dim {dim}=N" if isinstance(dim, str)
                else "")
        self.reject("input" if slot in self.inputs else "output", slot,
                    f"{tensor.name}: {tensor.shape_text()}",
                    f"pattn needs {label} (axis {axis}) static, but it is "
                    f"{'dynamic' if dim is None else repr(dim)}{hint}")
        return None

    def heads(self) -> Tuple[Optional[int], Optional[int]]:
        heads, kv_heads = self.attr("num_heads"), self.attr("kv_num_heads")
        for label, value in (("num_heads", heads),
                             ("kv_num_heads", kv_heads)):
            if value is None:
                self.reject("attribute", label, MISSING,
                            f"{self.op} requires it")
            elif not isinstance(value, int) or value <= 0:
                self.reject("attribute", label, value,
                            "must be a positive integer")
        if not (isinstance(heads, int) and isinstance(kv_heads, int) and
                heads > 0 and kv_heads > 0):
            return None, None
        if heads % kv_heads:
            self.reject("attribute", "num_heads", heads,
                        f"must be a multiple of kv_num_heads ({kv_heads})")
            return None, None
        return heads, kv_heads

    def common_attributes(self, head_dim: Optional[int]) -> dict:
        """scale, softcap: the same meaning in both ops."""
        out = {}
        scale = self.attr("scale")
        if not isinstance(scale, float) or not math.isfinite(scale) or \
                scale < 0:
            self.reject("attribute", "scale", scale,
                        "must be 0 (1/sqrt(head_size)) or a finite positive "
                        "float")
        elif scale > 0:
            out["softmax_scale"] = scale
        softcap = self.attr("softcap")
        if not isinstance(softcap, float) or not math.isfinite(softcap) or \
                softcap < 0:
            self.reject("attribute", "softcap", softcap,
                        "must be 0 (off) or a finite positive float")
        elif softcap > 0:
            out["softcap"] = softcap
        return out

    def head_features(self) -> bool:
        """do_rotary, rotary_interleaved, the cos/sin caches, QK-norm and
        packed QKV, checked for consistency (shapes come later, in
        :meth:`rotary_tables`). Returns whether Q and K are rotated."""
        rotary = self.attr("do_rotary")
        if rotary not in (0, 1):
            self.reject("attribute", "do_rotary", rotary, "must be 0 or 1")
        interleaved = self.attr("rotary_interleaved")
        if interleaved not in (0, 1):
            self.reject("attribute", "rotary_interleaved", interleaved,
                        "must be 0 or 1")
        elif interleaved and rotary != 1:
            self.reject("attribute", "rotary_interleaved", interleaved,
                        "set without do_rotary=1: nothing is rotated")
        for slot in ("cos_cache", "sin_cache"):
            if rotary == 1 and slot not in self.inputs:
                self.reject("input", slot, ABSENT, "do_rotary=1 needs the "
                            "cos_cache and sin_cache tables")
            elif rotary != 1 and slot in self.inputs:
                self.reject("input", slot, self.inputs[slot],
                            "given without do_rotary=1: pattn would not "
                            "use it")
        for slot in ("q_norm_weight", "k_norm_weight"):
            if slot in self.inputs and rotary != 1:
                self.reject("input", slot, self.inputs[slot],
                            "QK-norm is imported with rotary embedding "
                            "(pattn.rotary normalizes, then rotates); "
                            "without do_rotary=1 it is not imported")
        if "key" not in self.inputs or "value" not in self.inputs:
            missing = [s for s in ("key", "value") if s not in self.inputs]
            if len(missing) == 1:
                self.reject("input", missing[0], ABSENT,
                            "key and value are given together, or both "
                            "absent (packed QKV)")
            elif rotary != 1:
                self.reject("input", "key", ABSENT,
                            "packed QKV (key and value absent) is imported "
                            "with do_rotary=1, whose pattn.rotary ops take "
                            "Q and K out of the packed rows; without it the "
                            "query would need a copy pattn does not emit")
        return rotary == 1

    @property
    def packed(self) -> bool:
        return "key" not in self.inputs and "value" not in self.inputs

    def rotary_tables(self, head_dim: Optional[int]) -> Optional[dict]:
        """The cos/sin caches' type and R/2, the norm weights and epsilon:
        what the rotary ops take (None where something was rejected)."""
        half = element = None
        for slot in ("cos_cache", "sin_cache"):
            kind = self.dtype(slot, _FLOATS, "the table")
            shape = self.shape(slot, 2, "(max_sequence_length, "
                               "rotary_dim / 2)")
            if kind is None or shape is None:
                continue
            if element not in (None, kind):
                self.reject("input", slot, f"{self.inputs[slot]}: {kind}",
                            f"must have cos_cache's type ({element})")
            element = kind
            width = self.static_dim(slot, shape, 1, "rotary_dim / 2")
            if width is None:
                continue
            if half not in (None, width):
                self.reject("input", slot, self.tensor(slot).shape_text(),
                            f"must have cos_cache's shape")
            half = width
            if head_dim is not None and not 1 <= 2 * width <= head_dim:
                self.reject("input", slot, self.tensor(slot).shape_text(),
                            f"rotary_dim {2 * width} must be in [2, "
                            f"head_size = {head_dim}]")
            self.embeddable(slot)
        norms = {}
        for side, slot in (("q", "q_norm_weight"), ("k", "k_norm_weight")):
            if slot not in self.inputs:
                continue
            self.dtype(slot, _FLOATS, "the norm weight")
            shape = self.shape(slot, 1, "(head_size)")
            if shape is not None and head_dim is not None and \
                    shape[0] not in (None, head_dim):
                self.reject("input", slot, self.tensor(slot).shape_text(),
                            f"must have head_size ({head_dim}) weights")
            norms[side] = slot
            self.embeddable(slot)
        # qk_norm_epsilon, which GroupQueryAttention's q_norm_epsilon and
        # k_norm_epsilon override per side.
        epsilons = {}
        for side in norms:
            name = f"{side}_norm_epsilon"
            if name not in self.known or self.attr(name) is None:
                name = "qk_norm_epsilon"
            epsilon = self.attr(name)
            if not isinstance(epsilon, float) or \
                    not math.isfinite(epsilon) or epsilon <= 0:
                self.reject("attribute", name, epsilon,
                            "must be a finite positive float (pattn.rotary's"
                            " norm_epsilon)")
            epsilons[side] = epsilon
        if self.reasons:
            return None
        return {"half": half, "element": element, "norms": norms,
                "epsilons": epsilons,
                "interleaved": self.attr("rotary_interleaved") == 1}

    def embeddable(self, slot: str) -> None:
        """An initializer pattn compiles in must be f16 or f32 and static."""
        tensor = self.tensor(slot)
        if tensor is None or tensor.initializer is None:
            return
        kind = _FLOATS.get(tensor.dtype)
        if kind not in _TABLE_ELEMENTS or tensor.shape is None or \
                not all(isinstance(d, int) for d in tensor.shape):
            self.reject("input", slot, f"{tensor.name}: "
                        f"{tensor.dtype_name}{tensor.shape_text()}",
                        "an initializer pattn compiles in must be float16 "
                        "or float with a static shape; pass it as a graph "
                        "input instead")

    def sink_type(self, heads: Optional[int]) -> Optional[str]:
        """head_sink [num_heads] of a float type: pattn's ``sinks``."""
        if "head_sink" not in self.inputs:
            return None
        kind = self.dtype("head_sink", _FLOATS, "the sinks")
        shape = self.shape("head_sink", 1, "(num_heads)")
        if shape is not None and heads and shape[0] not in (None, heads):
            self.reject("input", "head_sink",
                        self.tensor("head_sink").shape_text(),
                        f"must have num_heads ({heads}) sinks")
        self.embeddable("head_sink")
        return kind

    def window(self, value: object, offset: int) -> Optional[int]:
        if not isinstance(value, int) or (value != -1 and value <= 0):
            self.reject("attribute", "local_window_size", value,
                        "must be -1 (off) or a positive window")
            return None
        return -1 if value == -1 else value + offset


# ---------------------------------------------------------------------------
# Building functions
# ---------------------------------------------------------------------------


class _Builder:
    """Names arguments and records the manifest entry of one function."""

    def __init__(self, node: _Node, function: ir.Function, arg_names: str):
        self.node = node
        self.f = function
        self.arg_names = arg_names
        self.used: set = set()
        self.inputs: List[dict] = []
        self.outputs: List[dict] = []
        self.computed: List[dict] = []
        self.notes: Dict[str, str] = {}

    def _name(self, slot: str, tensor: Optional[str]) -> str:
        base = _identifier(slot if self.arg_names == "schema" or tensor is
                           None else tensor)
        name, n = base, 2
        while name in self.used or name == "stream":
            name, n = f"{base}_{n}", n + 1
        self.used.add(name)
        return name

    def onnx_arg(self, slot: str, type: ir.Type, view: Optional[str] = None,
                 written: bool = False) -> ir.Value:
        """An argument carrying the ONNX input ``slot``."""
        tensor = self.node.tensor(slot)
        value = self.f.arg(self._name(slot, tensor.name), type)
        entry = {"input": slot, "index": self.node.schema.index(slot),
                 "onnx": tensor.name, "arg": value.name,
                 "onnx_type": f"{tensor.dtype_name}{tensor.shape_text()}",
                 "arg_type": str(type.resolved()
                                 if isinstance(type, ir.Alias) else type)}
        if view:
            entry["view"] = view
        if written:
            entry["written"] = True
        self.inputs.append(entry)
        return value

    def output_arg(self, slot: str, type: ir.Type, view: str) -> ir.Value:
        tensor = self.node.tensor(slot)
        value = self.f.arg(self._name(slot, tensor.name), type)
        self.outputs.append({
            "output": slot, "index": self.node.schema_outputs.index(slot),
            "onnx": tensor.name, "arg": value.name,
            "onnx_type": f"{tensor.dtype_name}{tensor.shape_text()}",
            "arg_type": str(type), "view": view, "written": True})
        return value

    def alias_output(self, slot: str, arg: ir.Value, why: str) -> None:
        tensor = self.node.outputs.get(slot)
        if tensor is None:
            return
        self.outputs.append({
            "output": slot, "index": self.node.schema_outputs.index(slot),
            "onnx": tensor, "arg": arg.name, "written": True,
            "aliases": why})

    def computed_arg(self, name: str, type: ir.Type, sources: Sequence[str],
                     formula: str, rule: dict) -> ir.Value:
        """An argument the caller computes from ONNX inputs: ``formula``
        says how in words, ``rule`` names it for call_arguments
        (pattn/_onnx_arguments.py), with its constants."""
        value = self.f.arg(self._name(name, None), type)
        self.computed.append({"arg": value.name, "arg_type": str(type),
                              "from": list(sources),
                              "from_onnx": {slot: self.node.inputs.get(slot)
                                            for slot in sources},
                              "formula": formula, "rule": rule})
        return value

    def constant(self, slot: str, values: list, shape: Sequence[int],
                 view: str, element: str = "f32") -> ir.Value:
        tensor = self.node.tensor(slot)
        name = self._name(slot, tensor.name)
        value = self.f.constant_table(name, values, shape, element=element,
                                      symbol=f"{self.f.name}_{name}")
        self.inputs.append({
            "input": slot, "index": self.node.schema.index(slot),
            "onnx": tensor.name, "arg": None, "constant": f"@{self.f.name}_"
            f"{name}", "onnx_type": f"{tensor.dtype_name}"
            f"{tensor.shape_text()}", "view": view})
        return value

    def not_passed(self, slot: str, why: str) -> None:
        if slot in self.node.inputs:
            self.inputs.append({
                "input": slot, "index": self.node.schema.index(slot),
                "onnx": self.node.inputs[slot], "arg": None, "why": why})

    def entry(self, attributes: dict, pattn: dict) -> dict:
        names = {}
        for item in self.inputs + self.outputs:
            if item.get("arg"):
                names[item["onnx"]] = item["arg"]
        return {"function": self.f.name, "node": self.node.name,
                "op_type": self.node.op, "args": [a.name for a in self.f.args],
                "names": names, "inputs": self.inputs,
                "outputs": self.outputs, "computed_args": self.computed,
                "attributes": attributes, "pattn_attributes": pattn,
                "notes": self.notes}


_CACHE_DTYPES = {_FLOAT16: "float16", _BFLOAT16: "bfloat16", _INT8: "int8",
                 _FLOAT8E4M3FN: "float8e4m3fn", _UINT8: "int4"}
_ENCODINGS = {"float16": "f16", "bfloat16": "bf16", "int8": "i8",
              "float8e4m3fn": "f8e4m3", "int4": "i4"}
_QUANT = {"NONE": "none", "PER_TENSOR": "tensor", "PER_CHANNEL": "channel"}


def _bytes_view(tensor: _Tensor, storage: ir.Type) -> str:
    return (f"the {tensor.dtype_name} tensor's bytes viewed as "
            f"{storage} (torch: .view(torch.int8))")


def _scale_values(onnx, tensor: _Tensor) -> list:
    from onnx import numpy_helper
    return [float(x) for x in numpy_helper.to_array(
        tensor.initializer).reshape(-1).tolist()]


def _float_input(b: _Builder, slot: str, shape: Sequence[Optional[int]],
                 kind: str, view: str) -> ir.Value:
    """A float input as an argument, or compiled in when an initializer
    (f16 / f32; bf16 initializers were rejected)."""
    tensor = b.node.tensor(slot)
    if tensor.initializer is not None:
        from onnx import numpy_helper
        values = numpy_helper.to_array(tensor.initializer).astype(
            "float64").reshape(-1).tolist()
        return b.constant(slot, values, list(shape), "an initializer: "
                          "compiled in as a constant table, " + view,
                          element=_TABLE_ELEMENTS[kind])
    return b.onnx_arg(slot, ir.memref(list(shape), kind), view)


def _activation_args(b: _Builder, n: _Node, tokens: Optional[int],
                     heads: int, kv_heads: int, head_dim: int, act: str,
                     onnx_rows: str, pattn_rows: str) -> tuple:
    """The query argument (the packed QKV rows where key and value are
    absent) and the key and value arguments (None when packed), each
    [tokens, heads, head_dim]; ``onnx_rows`` / ``pattn_rows`` open the
    views' descriptions ("(token_count", "[token_count")."""
    def arg(slot: str, count: int) -> ir.Value:
        return b.onnx_arg(slot, ir.memref([tokens, count, head_dim], act),
                          f"{onnx_rows}, {count}*{head_dim}) viewed as "
                          f"{pattn_rows}, {count}, {head_dim}]")
    if n.packed:
        return arg("query", heads + 2 * kv_heads), None, None
    return arg("query", heads), arg("key", kv_heads), arg("value", kv_heads)


@dataclass
class _Heads:
    """What attention reads and the caches take: the query, and K and V
    rows (with the head V starts at in them: a packed QKV buffer's)."""
    query: ir.Value
    key: ir.Value
    value: ir.Value
    value_first_head: int = 0
    temporaries: List[ir.Value] = field(default_factory=list)


def _prepare_heads(n: _Node, b: _Builder, tables: Optional[dict],
                   source: ir.Value, key: Optional[ir.Value],
                   value: Optional[ir.Value], heads: int, kv_heads: int,
                   head_dim: int, act: str,
                   positions: Dict[str, ir.Value]) -> _Heads:
    """Rotary embedding (and QK-norm) of Q and K into temporaries, from
    their own buffers or from the packed QKV rows in ``source``."""
    f = b.f
    if tables is None:
        return _Heads(source, key, value)
    half, kind = tables["half"], tables["element"]
    rows = _static(n.tensor("cos_cache").shape[0])
    view = f"({rows or 'max_sequence_length'}, {2 * half}/2) as is"
    cos = _float_input(b, "cos_cache", [rows, half], kind, view)
    sin = _float_input(b, "sin_cache", [rows, half], kind, view)
    norms = {}
    for side, slot in tables["norms"].items():
        norms[side] = _float_input(b, slot, [head_dim],
                                   n.dtype(slot, _FLOATS, ""), "as is")
    packed = key is None
    tokens = source.type.resolved().shape[0]
    prepared = {}
    for side, count, first, buffer in (
            ("q", heads, 0, source),
            ("k", kv_heads, heads if packed else 0,
             source if packed else key)):
        out = f.alloc(ir.memref([tokens, count, head_dim], act), like=buffer,
                      name=b._name(f"{side}_rotated", None))
        f.rotary(buffer, cos, sin, out, first_head=first,
                 norm_weight=norms.get(side),
                 norm_epsilon=tables["epsilons"].get(side, 1e-6),
                 interleaved=tables["interleaved"], **positions)
        prepared[side] = out
    if packed:
        b.notes["query"] = (f"packed QKV: pattn.rotary takes heads [0, "
                            f"{heads}) as Q and [{heads}, {heads + kv_heads})"
                            " as K; the cache write takes V from heads "
                            f"[{heads + kv_heads}, {heads + 2 * kv_heads})")
    return _Heads(prepared["q"], prepared["k"], source if packed else value,
                  heads + kv_heads if packed else 0,
                  [prepared["q"], prepared["k"]])


def _paged_attention(n: _Node, module: ir.Module, function: str,
                     options: dict) -> Optional[dict]:
    """com.microsoft PagedAttention, input by input (research doc §1)."""
    heads, kv_heads = n.heads()
    rotary = n.head_features()
    n.must_be_default("rotary_offset", "a nonzero rotary_offset is not "
                      "imported: how ONNX Runtime adds it to the positions "
                      "is not pinned down here (pattn.rotary's "
                      "position_offset is there once it is)", off=(0,))
    if n.attr("kv_cache_layout") != "SEPARATE":
        n.reject("attribute", "kv_cache_layout", n.attr("kv_cache_layout"),
                 "LATENT (absorbed MLA) caches map to pattn.mla_decode "
                 "records, which this importer does not build yet; only "
                 "SEPARATE is imported")
    for slot in ("key_cache", "value_cache", "cumulative_sequence_length",
                 "past_seqlens", "block_table"):
        if slot not in n.inputs:
            n.reject("input", slot, ABSENT,
                     "required by pattn's write_cache and paged_attention")
    act = n.dtype("query", _ACTIVATIONS, "the query (pattn activations)")
    for slot in ("key", "value"):
        if slot in n.inputs:
            kind = n.dtype(slot, _ACTIVATIONS, f"the new {slot} rows")
            if act and kind and kind != act:
                n.reject("input", slot, f"{n.inputs[slot]}: {kind}",
                         f"must have the query's type ({act})")
    if "output" in n.outputs:
        kind = n.dtype("output", _ACTIVATIONS, "the output")
        if act and kind and kind != act:
            n.reject("output", "output", kind,
                     f"must have the query's type ({act})")
    for slot in ("cumulative_sequence_length", "past_seqlens",
                 "block_table", "slot_mapping"):
        if slot in n.inputs:
            n.dtype(slot, {_INT32: "i32"}, "an int32 tensor")

    q_shape = n.shape("query", 2, "(token_count, num_heads * head_size)")
    head_dim = None
    row_heads = heads + 2 * kv_heads if n.packed and heads and kv_heads \
        else heads
    if q_shape is not None and row_heads and isinstance(q_shape[1], int):
        if q_shape[1] % row_heads:
            n.reject("input", "query", f"{n.inputs['query']}: "
                     f"{n.tensor('query').shape_text()}",
                     f"hidden size {q_shape[1]} is not "
                     + (f"(num_heads + 2 * kv_num_heads) ({row_heads})"
                        if n.packed else f"num_heads ({heads})")
                     + " times a head size")
        else:
            head_dim = q_shape[1] // row_heads
    tokens = None if q_shape is None else _static(q_shape[0])

    # The caches: type and granularity from the tensors and attributes.
    caches = {}
    for side, slot, scale_slot in (("k", "key_cache", "k_scale"),
                                   ("v", "value_cache", "v_scale")):
        tensor = n.tensor(slot)
        declared = n.attr(f"{side}_cache_dtype")
        quant = n.attr(f"{side}_quant_type")
        if quant not in _QUANT:
            n.reject("attribute", f"{side}_quant_type", quant,
                     "must be NONE, PER_TENSOR or PER_CHANNEL")
            quant = None
        if tensor is None:
            continue
        if tensor.dtype not in _CACHE_DTYPES:
            n.reject("input", slot, f"{tensor.name}: {tensor.dtype_name}",
                     "cache element type must be float16, bfloat16, int8, "
                     "float8e4m3fn or uint8 (packed int4)")
            continue
        kind = _CACHE_DTYPES[tensor.dtype]
        if tensor.dtype == _UINT8 and declared != "int4":
            n.reject("attribute", f"{side}_cache_dtype", declared,
                     "a uint8 cache must say explicit int4 (the only packed "
                     "format imported; 'float4e2m1' is reserved)")
            continue
        if declared not in ("", kind):
            n.reject("attribute", f"{side}_cache_dtype", declared,
                     f"does not match the {slot} tensor's type "
                     f"{tensor.dtype_name} (expected '' or '{kind}')")
            continue
        encoding = _ENCODINGS[kind]
        scale = _QUANT.get(quant)
        if scale is None:
            continue
        quantized = encoding not in ("f16", "bf16")
        if quantized and scale == "none":
            n.reject("attribute", f"{side}_quant_type", quant,
                     f"a {kind} cache needs PER_TENSOR or PER_CHANNEL scales")
            continue
        if not quantized and scale != "none":
            n.reject("attribute", f"{side}_quant_type", quant,
                     f"pattn's {encoding} caches take no scale")
            continue
        if scale != "none" and scale_slot not in n.inputs:
            n.reject("input", scale_slot, ABSENT,
                     f"{side}_quant_type {quant} needs it")
        if scale == "none" and scale_slot in n.inputs:
            n.reject("input", scale_slot, n.inputs[scale_slot],
                     f"given, but {side}_quant_type is NONE")
        shape = n.shape(slot, 4, "(num_blocks, block_size, kv_num_heads, "
                        "head_size or (head_size+1)/2 for int4)")
        if shape is None:
            continue
        block_size = n.static_dim(slot, shape, 1, "block_size")
        cache_heads = n.static_dim(slot, shape, 2, "kv_num_heads")
        row = n.static_dim(slot, shape, 3, "the row")
        if None in (block_size, cache_heads, row):
            continue
        if kv_heads and cache_heads != kv_heads:
            n.reject("input", slot, f"{tensor.name}: {tensor.shape_text()}",
                     f"axis 2 must be kv_num_heads ({kv_heads})")
            continue
        cache_dim = row * 2 if encoding == "i4" else row
        if head_dim is None:
            head_dim = cache_dim
        expected_row = (head_dim + 1) // 2 if encoding == "i4" else head_dim
        if row != expected_row:
            n.reject("input", slot, f"{tensor.name}: {tensor.shape_text()}",
                     f"axis 3 must be {expected_row} for head_size "
                     f"{head_dim} ({kind})")
            continue
        if block_size < 16 or block_size & (block_size - 1) or \
                block_size > 4096:
            n.reject("input", slot, f"{tensor.name}: {tensor.shape_text()}",
                     f"block_size {block_size} must be a power of two in "
                     "[16, 4096]")
            continue
        if kv_heads is None:
            continue
        caches[side] = (ir.cache(block_size=block_size, kv_heads=kv_heads,
                                 head_dim=head_dim, encoding=encoding,
                                 scale=scale), tensor, scale_slot, scale)
    if "k" in caches and "v" in caches and \
            caches["k"][0].block_size != caches["v"][0].block_size:
        n.reject("input", "value_cache", n.inputs["value_cache"],
                 f"block_size {caches['v'][0].block_size} differs from "
                 f"key_cache's {caches['k'][0].block_size}")
    v_head = n.attr("v_head_size")
    if v_head not in (0, head_dim):
        n.reject("attribute", "v_head_size", v_head,
                 f"pattn's V rows have head_size ({head_dim}) channels")

    # Scale tensors: [1] or numel kv_heads*head_size with last dim head_size.
    for side in ("k", "v"):
        slot = f"{side}_scale"
        tensor = n.tensor(slot)
        if tensor is None or side not in caches:
            continue
        scale = caches[side][3]
        if tensor.dtype not in (None, _FLOAT):
            n.reject("input", slot, f"{tensor.name}: {tensor.dtype_name}",
                     "scales must be float")
        if tensor.shape is not None and None not in tensor.shape and all(
                isinstance(d, int) for d in tensor.shape):
            numel = math.prod(tensor.shape)
            if scale == "tensor" and numel != 1:
                n.reject("input", slot, f"{tensor.name}: "
                         f"{tensor.shape_text()}", "PER_TENSOR takes one "
                         "scale")
            if scale == "channel" and (
                    numel != kv_heads * head_dim or
                    tensor.shape[-1] != head_dim):
                n.reject("input", slot, f"{tensor.name}: "
                         f"{tensor.shape_text()}", "PER_CHANNEL takes "
                         f"kv_num_heads*head_size ({kv_heads}*{head_dim}) "
                         "scales, last axis head_size")

    # Query tokens per sequence.
    max_query_len = options.get("max_query_len")
    metadata = n.tensor("attention_metadata")
    if metadata is not None and metadata.initializer is not None:
        from onnx import numpy_helper
        bound = int(numpy_helper.to_array(metadata.initializer).reshape(-1)[0])
        if bound > 0 and max_query_len is None:
            max_query_len = bound
    if max_query_len is None:
        max_query_len = 1
    if not 1 <= max_query_len <= MAX_QUERY_TOKENS:
        n.reject("input" if metadata is not None else "attribute",
                 "attention_metadata" if metadata is not None else
                 "max_query_len", max_query_len,
                 f"pattn attends 1 to {MAX_QUERY_TOKENS} query tokens per "
                 "sequence (the bound is compiled in; --max-query-len)")
    if n.attr("is_causal") not in (0, 1):
        n.reject("attribute", "is_causal", n.attr("is_causal"),
                 "must be 0 or 1")
    elif n.attr("is_causal") == 0 and max_query_len > 1:
        n.reject("attribute", "is_causal", 0,
                 "pattn's query tokens of one sequence are causal among "
                 "themselves; bidirectional multi-token steps are not in "
                 "the dialect")
    window = n.window(n.attr("local_window_size"), 0)
    attributes = n.common_attributes(head_dim)
    tables = n.rotary_tables(head_dim) if rotary else None
    sink_kind = n.sink_type(heads)
    if head_dim is None and not n.reasons:
        n.reject("input", "query", n.inputs.get("query"),
                 "head_size is unknown: neither the query nor the caches "
                 "have a static last axis")
    if n.reasons:
        return None

    # -- build ---------------------------------------------------------------
    f = module.function(function)
    b = _Builder(n, f, options.get("arg_names", "tensor"))
    k_type, k_tensor, _, k_gran = caches["k"]
    v_type, v_tensor, _, v_gran = caches["v"]
    k_alias = module.alias(f"{function}_k_cache", k_type)
    v_alias = module.alias(f"{function}_v_cache", v_type)
    query, key, value = _activation_args(
        b, n, tokens, heads, kv_heads, head_dim, act, "(token_count",
        "[token_count")
    k_pages = b.onnx_arg("key_cache", k_alias.storage_type(),
                         _bytes_view(k_tensor, k_alias.storage_type()),
                         written=True)
    v_pages = b.onnx_arg("value_cache", v_alias.storage_type(),
                         _bytes_view(v_tensor, v_alias.storage_type()),
                         written=True)
    query_start = b.onnx_arg("cumulative_sequence_length",
                             ir.memref([None], "i32"),
                             "pattn's query_start")
    total = b.computed_arg(
        "total_seqlens", ir.memref([None], "i32"), ["past_seqlens",
                                                    "cumulative_sequence_"
                                                    "length"],
        "past_seqlens[b] + cumulative_sequence_length[b+1] - "
        "cumulative_sequence_length[b] (pattn's seq_lens count the new "
        "tokens)", {"rule": "past_plus_new"})
    block_table = b.onnx_arg("block_table", ir.memref([None, None], "i32"))
    if "slot_mapping" in n.inputs:
        slots = b.onnx_arg("slot_mapping", ir.memref([tokens], "i32"),
                           "write_cache slots (-1 skips a token)")
    else:
        slots = b.computed_arg(
            "slot_mapping", ir.memref([tokens], "i32"),
            ["block_table", "past_seqlens", "cumulative_sequence_length"],
            "slot_mapping is absent: for token i of sequence b (i < "
            "cumulative_sequence_length[b+1]-cumulative_sequence_length[b]),"
            " p = past_seqlens[b] + i, slot = block_table[b][p // "
            f"{k_type.block_size}] * {k_type.block_size} + p % "
            f"{k_type.block_size}, as ONNX Runtime derives it",
            {"rule": "slots_after_past", "block_size": k_type.block_size})
    b.notes["past_seqlens"] = ("not an argument: it enters through "
                               f"{total.name}" + (
                                   " and slot_mapping"
                                   if "slot_mapping" not in n.inputs else ""))
    scales = {}
    for side, gran in (("k", k_gran), ("v", v_gran)):
        slot = f"{side}_scale"
        if gran == "none":
            continue
        tensor = n.tensor(slot)
        shape = [1] if gran == "tensor" else [kv_heads, head_dim]
        view = ("[1]" if gran == "tensor" else
                f"viewed as [{kv_heads}, {head_dim}] (index "
                "kv_head*head_size + c)")
        if tensor.initializer is not None:
            scales[side] = b.constant(slot, _scale_values(n.onnx, tensor),
                                      shape, "an initializer: compiled in "
                                      "as a constant table, " + view)
        else:
            scales[side] = b.onnx_arg(slot, ir.memref(shape, "f32"), view)
    out = b.output_arg("output", ir.memref([tokens, heads, head_dim], act),
                       f"(token_count, {heads}*{head_dim}) viewed as "
                       f"[token_count, {heads}, {head_dim}]")
    b.alias_output("key_cache_out", k_pages, "the key_cache buffer, "
                   "written in place (ONNX Runtime requires the same buffer)")
    b.alias_output("value_cache_out", v_pages, "the value_cache buffer, "
                   "written in place (ONNX Runtime requires the same buffer)")
    if "attention_metadata" in n.inputs:
        b.not_passed("attention_metadata",
                     f"a host-side bound: max_query_len = {max_query_len} is "
                     "compiled in (metadata[0] must not exceed it); the kv "
                     "bounds are not needed")

    sinks = None
    if sink_kind:
        sinks = _float_input(b, "head_sink", [heads], sink_kind,
                             "pattn's sinks (as is)")

    k = f.bind_cache(k_pages, k_alias, name=b._name("k", None))
    v = f.bind_cache(v_pages, v_alias, name=b._name("v", None))
    prepared = _prepare_heads(n, b, tables, query, key, value, heads,
                              kv_heads, head_dim, act,
                              {"seq_lens": total, "query_start": query_start})
    f.write_cache(prepared.key, k, slots, scale=scales.get("k"))
    f.write_cache(prepared.value, v, slots, scale=scales.get("v"),
                  first_head=prepared.value_first_head)
    f.paged_attention(prepared.query, k, v, block_table, total, out,
                      num_heads=heads, query_start=query_start,
                      k_scale=scales.get("k"), v_scale=scales.get("v"),
                      sinks=sinks, window=window,
                      max_query_len=max_query_len, **attributes)
    for temporary in prepared.temporaries:
        f.dealloc(temporary)
    pattn = dict(attributes, num_heads=heads, window=window,
                 max_query_len=max_query_len,
                 **_rotary_summary(tables, sinks is not None))
    return b.entry({k: _jsonable(v) for k, v in n.attrs.items()}, pattn)


def _group_query_attention(n: _Node, module: ir.Module, function: str,
                           options: dict) -> Optional[dict]:
    """com.microsoft GroupQueryAttention with a BNSH past/present buffer."""
    heads, kv_heads = n.heads()
    rotary = n.head_features()
    if not rotary:
        n.must_be_absent("position_ids",
                         "position ids only feed rotary embedding, and "
                         "do_rotary is 0")
    n.must_be_absent("attention_bias",
                     "an additive attention bias is not in the dialect")
    n.must_be_absent("query_seqlens",
                     "right-padded query chunks (idle or partly padded "
                     "batch entries) are not imported: pattn's query tokens "
                     "are all valid")
    n.must_be_default("smooth_softmax",
                      "smooth softmax (an extra 1 in every softmax "
                      "denominator) is not in the dialect", off=(0, -1))
    n.must_be_default("qk_output", "pattn does not output Q·K", off=(0,))
    if "output_qk" in n.outputs:
        n.reject("output", "output_qk", n.outputs["output_qk"],
                 "pattn does not output Q·K")
    n.must_be_default("sliding_window_cache",
                      "window-sized ring caches (evicting from the front) "
                      "are not in the dialect", off=(0,))
    quant = ("GroupQueryAttention's quantized caches are not imported yet "
             "(their quantizer is not yet checked against SPEC §2); "
             "f16/bf16 caches only")
    n.must_be_default("k_quant_type", quant)
    n.must_be_default("v_quant_type", quant)
    n.must_be_default("kv_cache_bit_width", quant)
    for slot in ("k_scale", "v_scale"):
        n.must_be_absent(slot, quant)
    for slot in ("past_key", "past_value", "seqlens_k"):
        if slot not in n.inputs:
            n.reject("input", slot, ABSENT,
                     "pattn decodes over a cache: past_key and past_value "
                     "(BNSH, shared with present_*) and seqlens_k are needed")
    act = n.dtype("query", _ACTIVATIONS, "the query (pattn activations)")
    if rotary and "position_ids" in n.inputs:
        n.dtype("position_ids", {_INT64: "i64", _INT32: "i32"},
                "an int64 or int32 tensor")
    for slot in ("key", "value", "past_key", "past_value", "output",
                 "present_key", "present_value"):
        if n.tensor(slot) is None:
            continue
        what = ("the cache (f16/bf16 only)" if "past" in slot or
                "present" in slot else f"{slot}")
        kind = n.dtype(slot, _ACTIVATIONS, what)
        if act and kind and kind != act:
            n.reject("input" if slot in n.inputs else "output", slot,
                     f"{n.tensor(slot).name}: {kind}",
                     f"must have the query's type ({act})")
    if "seqlens_k" in n.inputs:
        n.dtype("seqlens_k", {_INT32: "i32"}, "an int32 tensor")

    q_shape = n.shape("query", 3, "(batch_size, sequence_length, "
                      "num_heads * head_size)")
    head_dim = seq = batch = None
    if q_shape is not None and heads:
        batch = _static(q_shape[0])
        seq = n.static_dim("query", q_shape, 1, "sequence_length "
                           f"(query tokens per sequence, 1 to "
                           f"{MAX_QUERY_TOKENS})")
        row_heads = heads + 2 * kv_heads if n.packed and kv_heads else \
            heads
        if isinstance(q_shape[2], int):
            if q_shape[2] % row_heads:
                n.reject("input", "query", n.tensor("query").shape_text(),
                         f"hidden size {q_shape[2]} is not "
                         + (f"(num_heads + 2 * kv_num_heads) ({row_heads})"
                            if n.packed else f"num_heads ({heads})")
                         + " times a head size")
            else:
                head_dim = q_shape[2] // row_heads
    if seq is not None and not 1 <= seq <= MAX_QUERY_TOKENS:
        n.reject("input", "query", n.tensor("query").shape_text(),
                 f"sequence_length {seq}: pattn attends 1 to "
                 f"{MAX_QUERY_TOKENS} query tokens per sequence (longer "
                 "prompts go in chunks)")
    causal = n.attr("causal")
    if causal not in (0, 1):
        n.reject("attribute", "causal", causal, "must be 0 or 1")
    elif causal == 0 and seq is not None and seq > 1:
        n.reject("attribute", "causal", 0,
                 "pattn's query tokens of one sequence are causal among "
                 "themselves")
    block = options.get("gqa_block_size")
    cache_seq = None
    for slot in ("past_key", "past_value"):
        shape = n.shape(slot, 4, "(batch_size, kv_num_heads, "
                        "cache_sequence_length, head_size), BNSH")
        if shape is None:
            continue
        dims_ok = True
        if kv_heads and shape[1] != kv_heads:
            n.reject("input", slot, n.tensor(slot).shape_text(),
                     f"axis 1 must be kv_num_heads ({kv_heads})")
            dims_ok = False
        if head_dim is None and isinstance(shape[3], int):
            head_dim = shape[3]
        if head_dim is not None and shape[3] != head_dim:
            n.reject("input", slot, n.tensor(slot).shape_text(),
                     f"axis 3 must be head_size ({head_dim})")
            dims_ok = False
        if block is None and dims_ok:
            length = n.static_dim(slot, shape, 2, "cache_sequence_length "
                                  "(one page per sequence; or import with "
                                  "--gqa-block-size N)")
            if length is not None and (
                    length < 16 or length & (length - 1) or length > 4096):
                n.reject("input", slot, n.tensor(slot).shape_text(),
                         f"cache_sequence_length {length} cannot be one "
                         "pattn page per sequence (pages are a power of two "
                         "in [16, 4096] tokens); import with --gqa-block-size"
                         " N to take a paged cache instead (an explicit "
                         "conversion step, docs/ONNX.md)")
            elif length is not None:
                if cache_seq not in (None, length):
                    n.reject("input", slot, n.tensor(slot).shape_text(),
                             "past_key and past_value lengths differ")
                cache_seq = length
    for out_slot, in_slot in (("present_key", "past_key"),
                              ("present_value", "past_value")):
        if out_slot not in n.outputs or in_slot not in n.inputs:
            continue
        past, present = n.tensor(in_slot), n.tensor(out_slot)
        if past.shape and present.shape and len(past.shape) == 4 and \
                len(present.shape) == 4:
            a, c = past.shape[2], present.shape[2]
            if isinstance(a, int) and isinstance(c, int) and a != c:
                n.reject("output", out_slot, present.shape_text(),
                         f"{out_slot} is longer than {in_slot} "
                         f"{past.shape_text()}: pattn writes the cache in "
                         "place, so past and present must share one buffer "
                         "(ONNX Runtime's past_present_share_buffer)")
    if block is not None and (block < 16 or block & (block - 1) or
                              block > 4096):
        n.reject("attribute", "gqa_block_size", block,
                 "pages are a power of two in [16, 4096] tokens")
    # W keys, the current one included (as onnxruntime's CPU kernel keeps
    # them; measured, bench/onnx_vs_ort.py): pattn's window W.
    window = n.window(n.attr("local_window_size"), 0)
    attributes = n.common_attributes(head_dim)
    tables = n.rotary_tables(head_dim) if rotary else None
    sink_kind = n.sink_type(heads)
    if head_dim is None and not n.reasons:
        n.reject("input", "query", n.inputs.get("query"),
                 "head_size is unknown")
    if n.reasons:
        return None

    # -- build ---------------------------------------------------------------
    f = module.function(function)
    b = _Builder(n, f, options.get("arg_names", "tensor"))
    tokens = None if batch is None else batch * seq
    query, key, value = _activation_args(
        b, n, tokens, heads, kv_heads, head_dim, act, f"(batch_size, {seq}",
        f"[batch_size*{seq}")
    if block is None:
        # BNSH [B, kv, S_max, H] is an hnd paged cache of B pages of S_max
        # tokens: page b is sequence b.
        cache_type = ir.cache(block_size=cache_seq, kv_heads=kv_heads,
                              head_dim=head_dim, encoding=act, layout="hnd")
        cache = module.alias(f"{function}_kv_cache", cache_type)
        storage = cache.storage_type()
        k_pages = b.onnx_arg("past_key", storage,
                             _bytes_view(n.tensor("past_key"), storage) +
                             "; page b is sequence b", written=True)
        v_pages = b.onnx_arg("past_value", storage,
                             _bytes_view(n.tensor("past_value"), storage) +
                             "; page b is sequence b", written=True)
        block_table = b.computed_arg(
            "block_table", ir.memref([batch, 1], "i32"), ["seqlens_k"],
            "torch.arange(batch_size, dtype=torch.int32).view(-1, 1): "
            "sequence b is page b (compute once)",
            {"rule": "page_per_sequence"})
        slots_rule = {"rule": "sequence_page_slots", "page_tokens": cache_seq,
                      "query_tokens": seq}
        slots_formula = (f"b * {cache_seq} + seqlens_k[b] + 1 - {seq} + i "
                         f"for the token i < {seq} of sequence b (the "
                         "position ONNX Runtime appends at)")
    else:
        cache_type = ir.cache(block_size=block, kv_heads=kv_heads,
                              head_dim=head_dim, encoding=act)
        cache = module.alias(f"{function}_kv_cache", cache_type)
        storage = cache.storage_type()
        k_pages = b.computed_arg(
            "past_key_pages", storage, ["past_key"],
            f"a paged copy of past_key: pages[block_table[b][s // {block}],"
            f" s % {block}, h, :] = past_key[b, h, s, :] (the bytes of a "
            f"{act} [num_blocks, {block}, {kv_heads}, {head_dim}] tensor); "
            "the caller keeps this paged cache instead of the BNSH buffer",
            {"rule": "caller_held"})
        v_pages = b.computed_arg(
            "past_value_pages", storage, ["past_value"],
            "a paged copy of past_value, as past_key_pages",
            {"rule": "caller_held"})
        block_table = b.computed_arg(
            "block_table", ir.memref([batch, None], "i32"), [],
            "the caller's page table of the paged copies",
            {"rule": "caller_held"})
        slots_rule = {"rule": "paged_copy_slots", "block_size": block,
                      "query_tokens": seq}
        slots_formula = (f"p = seqlens_k[b] + 1 - {seq} + i, slot = "
                         f"block_table[b][p // {block}] * {block} + p % "
                         f"{block}, for the token i < {seq} of sequence b")
        b.notes["past_key"] = ("converted: see past_key_pages; present_key "
                               "is the same paged copy, written in place")
        b.notes["past_value"] = ("converted: see past_value_pages; "
                                 "present_value likewise")
    slots = b.computed_arg("slots", ir.memref([tokens], "i32"),
                           ["seqlens_k"], slots_formula, slots_rule)
    total = b.computed_arg("total_seqlens", ir.memref([batch], "i32"),
                           ["seqlens_k"], "seqlens_k + 1 (seqlens_k is "
                           "each sequence's total length minus one)",
                           {"rule": "total_is_seqlens_k_plus_one"})
    query_start = None
    if seq > 1:
        query_start = b.computed_arg(
            "query_start", ir.memref([None], "i32"), ["seqlens_k"],
            f"torch.arange(batch_size + 1, dtype=torch.int32) * {seq}",
            {"rule": "uniform_query_start", "query_tokens": seq})
    out = b.output_arg("output", ir.memref([tokens, heads, head_dim], act),
                       f"(batch_size, {seq}, {heads}*{head_dim}) viewed as "
                       f"[batch_size*{seq}, {heads}, {head_dim}]")
    if block is None:
        b.alias_output("present_key", k_pages, "the past_key buffer, "
                       "written in place (past/present buffer sharing)")
        b.alias_output("present_value", v_pages, "the past_value buffer, "
                       "written in place (past/present buffer sharing)")
    else:
        b.alias_output("present_key", k_pages, "the paged copy of past_key,"
                       " written in place")
        b.alias_output("present_value", v_pages, "the paged copy of "
                       "past_value, written in place")
    b.not_passed("seqlens_k", f"enters through {total.name} and {slots.name}")
    b.not_passed("total_sequence_length",
                 "ONNX Runtime's batch-wide bound and prompt/decode switch; "
                 "pattn takes each sequence's length from total_seqlens")

    sinks = None
    if sink_kind:
        sinks = _float_input(b, "head_sink", [heads], sink_kind,
                             "pattn's sinks (as is)")
    positions = {"seq_lens": total, "query_start": query_start}
    if tables is not None and "position_ids" in n.inputs:
        kind = n.dtype("position_ids", {_INT64: "i64", _INT32: "i32"}, "")
        positions = {"positions": b.onnx_arg(
            "position_ids", ir.memref([tokens], kind),
            f"(batch_size, {seq}) viewed as [batch_size*{seq}]")}
    elif tables is not None:
        b.notes["position_ids"] = (
            "absent: token i of sequence b is rotated at position "
            f"seqlens_k[b] + 1 - {seq} + i, the slot it is appended at")

    k = f.bind_cache(k_pages, cache, name=b._name("k", None))
    v = f.bind_cache(v_pages, cache, name=b._name("v", None))
    prepared = _prepare_heads(n, b, tables, query, key, value, heads,
                              kv_heads, head_dim, act, positions)
    f.write_cache(prepared.key, k, slots)
    f.write_cache(prepared.value, v, slots,
                  first_head=prepared.value_first_head)
    f.paged_attention(prepared.query, k, v, block_table, total, out,
                      num_heads=heads, query_start=query_start,
                      sinks=sinks, window=window, max_query_len=seq,
                      **attributes)
    for temporary in prepared.temporaries:
        f.dealloc(temporary)
    pattn = dict(attributes, num_heads=heads, window=window,
                 max_query_len=seq, **_rotary_summary(tables,
                                                      sinks is not None),
                 cache=("one page per sequence" if block is None else
                        f"paged copy, block_size {block}"))
    return b.entry({k: _jsonable(v) for k, v in n.attrs.items()}, pattn)


def _rotary_summary(tables: Optional[dict], sinks: bool) -> dict:
    """The manifest's account of the rotary ops and sinks."""
    out = {}
    if tables is not None:
        out["rotary"] = {"rotary_dim": 2 * tables["half"],
                         "interleaved": tables["interleaved"],
                         "qk_norm": sorted(tables["norms"]),
                         "norm_epsilon": tables["epsilons"]}
    if sinks:
        out["sinks"] = True
    return out


def _jsonable(value: object) -> object:
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


def _run(model, dims, max_query_len, gqa_block_size, arg_names):
    onnx, original, inferred = _load(model)
    tensors = _tensors(onnx, inferred.graph, dict(dims or {}))
    options = {"max_query_len": max_query_len,
               "gqa_block_size": gqa_block_size, "arg_names": arg_names}
    module = ir.Module(comment=f"imported from ONNX by pattn.onnx "
                       f"({original.graph.name or 'graph'})")
    nodes: List[AttentionNode] = []
    entries = []
    used = set()
    for index, node in enumerate(original.graph.node):
        if node.domain != DOMAIN or node.op_type not in OP_TYPES:
            continue
        name = node.name or f"{node.op_type}_{index}"
        function, n = _identifier(name), 2
        while function in used:
            function, n = f"{_identifier(name)}_{n}", n + 1
        used.add(function)
        state = _Node(onnx, node, tensors, name, options)
        build = (_paged_attention if node.op_type == "PagedAttention" else
                 _group_query_attention)
        # Every check runs (so that --list gives every reason); the function
        # is built only when none failed.
        entry = build(state, module, function, options)
        nodes.append(AttentionNode(name, node.op_type, function,
                                   state.reasons))
        if entry is not None:
            entries.append(entry)
    return module, entries, nodes


def analyze(model, *, dims: Optional[Dict[str, int]] = None,
            max_query_len: Optional[int] = None,
            gqa_block_size: Optional[int] = None) -> List[AttentionNode]:
    """Every attention node of ``model`` (a path or an ``onnx.ModelProto``)
    and whether it imports (:attr:`AttentionNode.reasons`)."""
    return _run(model, dims, max_query_len, gqa_block_size, "tensor")[2]


def import_model(model, *, dims: Optional[Dict[str, int]] = None,
                 max_query_len: Optional[int] = None,
                 gqa_block_size: Optional[int] = None,
                 arg_names: str = "tensor") -> Tuple[ir.Module, dict]:
    """``model``'s attention nodes as a :class:`pattn.ir.Module` (one
    function per node) and the manifest (a JSON-able dict). Raises
    :class:`UnsupportedNodeError` listing every reason of every node that
    cannot import, or when the model has no attention node.

    ``dims`` binds symbolic dimensions; ``max_query_len`` is
    PagedAttention's compiled query-token bound (default: a constant
    ``attention_metadata``'s, else 1); ``gqa_block_size`` imports
    GroupQueryAttention's BNSH cache as a paged copy with that page size
    instead of one page per sequence; ``arg_names`` is ``"tensor"`` (name
    arguments after the ONNX tensors) or ``"schema"`` (after the op's input
    names)."""
    if arg_names not in ("tensor", "schema"):
        raise ArgumentError(f"pattn.onnx: arg_names must be 'tensor' or "
                            f"'schema', got {arg_names!r}")
    module, entries, nodes = _run(model, dims, max_query_len,
                                  gqa_block_size, arg_names)
    if not nodes:
        raise UnsupportedNodeError(
            "pattn.onnx: the model has no com.microsoft PagedAttention or "
            "GroupQueryAttention node", [])
    reasons = [r for node in nodes for r in node.reasons]
    if reasons:
        bad = [node for node in nodes if node.reasons]
        raise UnsupportedNodeError(
            f"pattn.onnx: {len(bad)} of {len(nodes)} attention nodes cannot "
            "be compiled by pattn:\n" + "\n".join(f"  {r}" for r in reasons),
            reasons)
    manifest = {"format": "pattn.onnx manifest 1",
                "options": {"dims": dict(dims or {}),
                            "max_query_len": max_query_len,
                            "gqa_block_size": gqa_block_size,
                            "arg_names": arg_names},
                "functions": entries}
    return module, manifest


def write_outputs(module: ir.Module, manifest: dict, output: str,
                  manifest_path: Optional[str] = None) -> Optional[str]:
    """Writes ``str(module)`` to ``output`` (``-``: stdout) and the
    manifest beside it (``model.mlir`` -> ``model.manifest.json``) or to
    ``manifest_path``; returns the manifest's path."""
    text = str(module)
    if output == "-":
        sys.stdout.write(text)
    else:
        with open(output, "w") as stream:
            stream.write(text)
        if manifest_path is None:
            root, ext = os.path.splitext(output)
            manifest_path = (root if ext == ".mlir" else output) + \
                ".manifest.json"
    if manifest_path is not None:
        with open(manifest_path, "w") as stream:
            json.dump(manifest, stream, indent=2)
            stream.write("\n")
    return manifest_path


def format_list(nodes: Sequence[AttentionNode]) -> str:
    """The ``--list`` text: a line per node, then its reasons."""
    if not nodes:
        return ("no com.microsoft PagedAttention or GroupQueryAttention "
                "node\n")
    lines = []
    for node in nodes:
        verdict = (f"compiles (@{node.function})" if node.compiles else
                   f"cannot compile: {len(node.reasons)} reason"
                   f"{'s' if len(node.reasons) != 1 else ''}")
        lines.append(f"{node.name}\t{node.op_type}\t{verdict}")
        for reason in node.reasons:
            slot = "" if reason.index is None else f" (#{reason.index})"
            lines.append(f"    - {reason.what} '{reason.name}'{slot} = "
                         f"{_show(reason.value)}: {reason.why}")
    return "\n".join(lines) + "\n"


def _dim(text: str) -> Tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value.isdigit():
        raise argparse.ArgumentTypeError(f"--dim takes NAME=VALUE, got "
                                         f"{text!r}")
    return name, int(value)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pattn.onnx",
        description="Import the com.microsoft PagedAttention and "
        "GroupQueryAttention nodes of an ONNX model as pattn MLIR, one "
        "function per node, with a manifest mapping ONNX names to "
        "arguments (docs/ONNX.md).")
    parser.add_argument("model", help="the .onnx file")
    parser.add_argument("-o", "--output", default="-",
                        help="the .mlir to write (default: stdout); the "
                        "manifest goes beside it as NAME.manifest.json")
    parser.add_argument("--manifest", help="where to write the manifest")
    parser.add_argument("--list", action="store_true",
                        help="list each attention node and whether pattn "
                        "can compile it (and every reason if not)")
    parser.add_argument("--dim", action="append", type=_dim, default=[],
                        metavar="NAME=VALUE",
                        help="bind a symbolic dimension (repeatable)")
    parser.add_argument("--max-query-len", type=int,
                        help="PagedAttention's query tokens per sequence "
                        f"bound, 1 to {MAX_QUERY_TOKENS} (default: a constant "
                        "attention_metadata's, else 1)")
    parser.add_argument("--gqa-block-size", type=int,
                        help="import GroupQueryAttention's BNSH past KV as a "
                        "paged copy with pages of N tokens (the caller "
                        "converts) instead of one page per sequence")
    parser.add_argument("--arg-names", choices=("tensor", "schema"),
                        default="tensor",
                        help="name arguments after the ONNX tensors "
                        "(default) or after the op's input names")
    args = parser.parse_args(argv)
    dims = dict(args.dim)
    try:
        if args.list:
            sys.stdout.write(format_list(analyze(
                args.model, dims=dims, max_query_len=args.max_query_len,
                gqa_block_size=args.gqa_block_size)))
            return 0
        module, manifest = import_model(
            args.model, dims=dims, max_query_len=args.max_query_len,
            gqa_block_size=args.gqa_block_size, arg_names=args.arg_names)
        path = write_outputs(module, manifest, args.output, args.manifest)
    except ArgumentError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if path is not None and args.output != "-":
        print(f"wrote {args.output} ({len(manifest['functions'])} "
              f"function{'s' if len(manifest['functions']) != 1 else ''}) "
              f"and {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
