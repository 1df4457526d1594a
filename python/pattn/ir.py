"""Building pattn MLIR from Python.

``pattn.ir`` builds the modules that ``pattn-opt`` and ``pattn-compile``
read, so that a model compiler emits pattn ops without writing MLIR by
hand::

    from pattn import ir

    m = ir.Module()
    k_type = m.alias("k_cache", ir.cache(block_size=16, kv_heads=8,
                                         head_dim=128, encoding="i8",
                                         scale="tensor"))
    f = m.function("decode_step")
    pages = f.arg("k_pages", k_type.storage_type())   # memref<?x16x8x128xi8>
    ...
    k = f.bind_cache(pages, k_type, name="k")
    f.paged_attention(query, k, k, block_table, seq_lens, out, k_scale=s,
                      v_scale=s)
    path = pattn.compile(m, chips=["sm_90a"])

Types are values of their own: :func:`memref` (shape with ``None`` for a
dynamic size, an element type as MLIR spells it), :func:`cache`
(``!pattn.cache``), :func:`record` and :func:`lane` (``!pattn.record``, a
preset by name or lanes written out), :func:`record_cache`; a
:meth:`Module.alias` prints as ``!name`` and stands for its type anywhere.
Caches derive the buffers they bind (:meth:`CacheType.storage_type`, ...),
as the dialect's verifier does.

A :class:`Function` has named arguments (:meth:`Function.arg`) and a body
that its op methods append to, in call order: ``bind_cache``,
``write_cache``, ``write_record``, ``paged_attention``, ``mla_decode``, the
forms the passes produce (``rescale_view``, ``scale_normalizer``,
``fold_query``, and paged_attention's ``out_scale``, ``guard``,
``query_exponents``, ``backend`` and ``plan``), and
:meth:`Function.constant_table` for scale tables known when compiling (the
fold pass folds them). Ops with a result return it as a :class:`Value`.

An argument's name is its SSA name (``%k_pages``), which pattn-compile's
manifest reports and the loaded function takes as a keyword, so it must be
an identifier; ``pattn_name=True`` also writes it as a ``pattn.name``
attribute, which survives re-printing (``pattn-opt`` renames SSA values).

The builder checks what it cheaply can when an op is added: operand kinds
(a memref, a cache, a record cache; a value of this function), names,
dtype, encoding and option names, that shapes hold ints or ``None``, that
attributes have their types (an int fits its width, a float fits f32),
and pairings the op's syntax implies (``guard`` with ``guard_value``, a
``plan`` with the ``backend`` it plans). Violations raise :class:`IRError`
(a :class:`pattn.ArgumentError`, naming the op and the argument) or
:class:`IRTypeError`. Everything else (shapes against the cache types,
ranges, the record layout rules) is the dialect verifier's, which
:meth:`Module.verify` runs through ``pattn-opt``; ``pattn.compile`` runs it
too, and both raise its diagnostics.

``str(module)`` prints comment, aliases, constant globals and functions in
that order. Floats are printed so that they parse back to the same fp32
bits (:func:`f32_literal`), tables as little-endian hex. Parameters left at
their defaults are left out (a cache's ``layout`` and a preset record's
mode are printed when given), and each op has one fixed layout of lines
and attribute order, so equal builds give equal text (the artifact cache
keys on it).
"""

from __future__ import annotations

import numbers
import operator
import os
import re
import struct
import subprocess
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ._errors import IRError, IRTypeError, VerifyError, _rejects_bad_calls

__all__ = [
    "Alias", "BACKENDS", "CacheType", "ELEMENT_TYPES", "ENCODINGS", "Function",
    "IRError", "IRTypeError", "LANE_ELEMENTS", "LAYOUTS", "Lane",
    "MemRefType", "Module", "Operation", "PRESETS", "PortablePlan",
    "RECORD_MODES", "RecordCacheType", "RecordType", "SCALES", "Type",
    "Value", "VerifyError", "XqaMlaPlan", "XqaPlan", "cache", "f32_literal",
    "lane", "memref", "portable_plan", "record", "record_cache",
    "xqa_mla_plan", "xqa_plan",
]

#: Element types a memref may hold, as MLIR spells them.
ELEMENT_TYPES = ("f16", "bf16", "f32", "f64", "f8E4M3FN", "f8E5M2",
                 "f4E2M1FN", "i1", "i8", "i16", "i32", "i64")
#: ``!pattn.cache`` encodings, scale granularities and page layouts.
ENCODINGS = ("f16", "bf16", "i8", "f8e4m3", "f8e5m2", "i4", "nvfp4")
SCALES = ("none", "tensor", "channel", "token")
LAYOUTS = ("nhd", "hnd")
#: A record's outer scale modes and the element types of its lanes.
RECORD_MODES = ("none", "tensor", "token")
LANE_ELEMENTS = ("f32", "f16", "bf16", "f8E4M3FN", "f8E5M2", "f4E2M1FN",
                 "i8")
#: The lowerings ``backend=`` names (``#pattn.backend``).
BACKENDS = ("xqa", "portable")

# Spellings people reach for, and the element type they mean.
_ELEMENT_HINTS = {
    "f8e4m3": "f8E4M3FN", "f8e4m3fn": "f8E4M3FN", "e4m3": "f8E4M3FN",
    "f8e5m2": "f8E5M2", "e5m2": "f8E5M2", "f4e2m1fn": "f4E2M1FN",
    "float16": "f16", "half": "f16", "bfloat16": "bf16", "float32": "f32",
    "float": "f32", "float64": "f64", "double": "f64", "int8": "i8",
    "uint8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "bool": "i1",
}

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SUFFIX_ID = re.compile(r"(?:[0-9]+|[A-Za-z_$.-][A-Za-z0-9_$.-]*)\Z")
_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*\Z")
_INT64 = (-(1 << 63), (1 << 63) - 1)
_INT32 = (-(1 << 31), (1 << 31) - 1)
_UINT32 = (0, (1 << 32) - 1)


# ---------------------------------------------------------------------------
# Checking arguments
# ---------------------------------------------------------------------------


def _describe(value: object) -> str:
    return f"{type(value).__name__} {value!r:.60}"


def _int(where: str, name: str, value: object,
         bounds: Tuple[int, int] = _INT64) -> int:
    """``value`` as an int within ``bounds``; bools and floats are not
    ints."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise IRTypeError(f"{where}: argument '{name}' must be an int, got "
                          f"{_describe(value)}")
    value = operator.index(value)
    low, high = bounds
    if not low <= value <= high:
        raise IRError(f"{where}: argument '{name}' is {value}, outside "
                      f"[{low}, {high}]")
    return value


def _f32(where: str, name: str, value: object) -> float:
    """``value`` rounded to fp32 (as a Python float holding it exactly)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise IRTypeError(f"{where}: argument '{name}' must be a float, got "
                          f"{_describe(value)}")
    try:
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    except OverflowError:
        raise IRError(f"{where}: argument '{name}' is {float(value)!r}, "
                      "which does not fit in f32 (largest finite value "
                      "3.4028234663852886e+38)") from None


def _choice(where: str, name: str, value: object,
            choices: Sequence[str]) -> str:
    if not isinstance(value, str):
        raise IRTypeError(f"{where}: argument '{name}' must be a str, one of "
                          f"{', '.join(choices)}; got {_describe(value)}")
    if value not in choices:
        raise IRError(f"{where}: argument '{name}' is {value!r:.60}; "
                      f"expected one of {', '.join(choices)}")
    return value


def _element(where: str, name: str, value: object,
             choices: Sequence[str] = ELEMENT_TYPES) -> str:
    """An element type name; a near miss says what it probably means."""
    if isinstance(value, str) and value not in choices:
        hint = _ELEMENT_HINTS.get(value.lower())
        if hint is None and value.lower() in (c.lower() for c in choices):
            hint = next(c for c in choices if c.lower() == value.lower())
        if hint in choices:
            raise IRError(f"{where}: argument '{name}' is {value!r:.60}, not "
                          f"an element type; did you mean {hint!r}? (MLIR "
                          f"spells them {', '.join(choices)})")
    return _choice(where, name, value, choices)


def _identifier(where: str, name: str, value: object, what: str) -> str:
    if not isinstance(value, str):
        raise IRTypeError(f"{where}: argument '{name}' must be a str, got "
                          f"{_describe(value)}")
    if not _IDENTIFIER.match(value):
        raise IRError(f"{where}: argument '{name}' is {value!r:.60}, which is "
                      f"not an identifier ([A-Za-z_][A-Za-z0-9_]*): {what}")
    return value


def _shape(where: str, value: object) -> Tuple[Optional[int], ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise IRTypeError(f"{where}: argument 'shape' must be a sequence of "
                          f"sizes (int, or None for a dynamic size), got "
                          f"{_describe(value)}")
    dims = []
    for index, dim in enumerate(value):
        if dim is not None:
            dim = _int(where, f"shape[{index}]", dim, (0, _INT64[1]))
        dims.append(dim)
    return tuple(dims)


def _blocks(where: str, blocks: Optional[int]) -> Optional[int]:
    return None if blocks is None else _int(where, "blocks", blocks,
                                            (0, _INT64[1]))


def _keyword_or_string(text: str) -> str:
    """``text`` as MLIR's printKeywordOrString writes it: bare where it is
    an identifier, else a quoted string with escapes."""
    if _BARE_ID.match(text):
        return text
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\{byte:02X}")
    return '"' + "".join(out) + '"'


def f32_literal(value: float) -> str:
    """An fp32 value as an MLIR float literal that parses back to the same
    bits: the shortest repr of its exact value, always with a '.'; inf and
    NaN as the hexadecimal bit pattern MLIR reads (``0x7F800000``)."""
    exact = struct.unpack("<f", struct.pack("<f", float(value)))[0]
    if exact != exact or exact in (float("inf"), float("-inf")):
        return "0x" + struct.pack(">f", exact).hex().upper()
    text = repr(exact)
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    elif "." not in text and "e" not in text:
        text += ".0"
    return text


class _Frozen:
    """Immutable after ``__init__`` (which sets fields with ``_set``)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _set(self, **fields: object) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)


# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------


class Type(_Frozen):
    """A type of the builder; ``str()`` is its MLIR spelling. Types compare
    equal when they are the same MLIR type (an :class:`Alias` equals the
    type it names; a cache with ``layout="nhd"`` equals one without)."""

    __slots__ = ()

    def resolved(self) -> "Type":
        """The type itself; for an alias, the type it names."""
        return self

    def _key(self) -> tuple:
        raise NotImplementedError

    def _text(self) -> str:
        raise NotImplementedError

    def _aliases(self) -> Tuple["Alias", ...]:
        """The aliases this type's text refers to, innermost first."""
        return ()

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Type) and
                self.resolved()._key() == other.resolved()._key())

    def __hash__(self) -> int:
        return hash(self.resolved()._key())

    def __str__(self) -> str:
        return self._text()

    def __repr__(self) -> str:
        return f"<ir.{type(self).__name__} {self}>"


class MemRefType(Type):
    """``memref<...>``: ``shape`` holds an int per static size and ``None``
    per dynamic one; ``element`` is one of :data:`ELEMENT_TYPES`;
    ``strides`` (static, in elements) gives a ``strided<[...]>`` layout,
    None the identity one. Built by :func:`memref`."""

    __slots__ = ("shape", "element", "strides")

    def __init__(self, shape: Sequence[Optional[int]], element: str,
                 strides: Optional[Sequence[int]] = None):
        shape = _shape("ir.memref", shape)
        if strides is not None:
            strides = tuple(strides)
            if len(strides) != len(shape) or not all(
                    isinstance(x, int) and not isinstance(x, bool) and x >= 0
                    for x in strides):
                raise IRTypeError(
                    f"ir.memref: strides must be one static int >= 0 per "
                    f"dimension of {len(shape)}, got {strides!r:.100}")
        self._set(shape=shape,
                  element=_element("ir.memref", "element", element),
                  strides=strides)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def _key(self) -> tuple:
        return ("memref", self.shape, self.element, self.strides)

    def _text(self) -> str:
        dims = "".join(f"{'?' if d is None else d}x" for d in self.shape)
        layout = "" if self.strides is None else \
            f", strided<[{', '.join(map(str, self.strides))}]>"
        return f"memref<{dims}{self.element}{layout}>"


@_rejects_bad_calls(IRTypeError, "ir.memref")
def memref(shape: Sequence[Optional[int]], element: str, *,
           strides: Optional[Sequence[int]] = None) -> MemRefType:
    """``memref<shape x element>``: ``memref([None, 32, 128], "f16")`` is
    ``memref<?x32x128xf16>``; with ``strides=[8192, 128, 1]`` it is
    ``memref<?x32x128xf16, strided<[8192, 128, 1]>>``."""
    return MemRefType(shape, element, strides)


class CacheType(Type):
    """``!pattn.cache<...>``, a paged K or V cache. Built by :func:`cache`.

    ``layout`` is the page layout in effect (``"nhd"`` unless given); it is
    printed only when it was given, since the dialect defaults it.
    """

    __slots__ = ("block_size", "kv_heads", "head_dim", "encoding", "scale",
                 "_layout")

    def __init__(self, block_size: int, kv_heads: int, head_dim: int,
                 encoding: str, scale: str, layout: Optional[str] = None):
        where = "ir.cache"
        self._set(block_size=_int(where, "block_size", block_size),
                  kv_heads=_int(where, "kv_heads", kv_heads),
                  head_dim=_int(where, "head_dim", head_dim),
                  encoding=_choice(where, "encoding", encoding, ENCODINGS),
                  scale=_choice(where, "scale", scale, SCALES),
                  _layout=None if layout is None else
                  _choice(where, "layout", layout, LAYOUTS))

    @property
    def layout(self) -> str:
        return self._layout or "nhd"

    @property
    def row_bytes(self) -> int:
        """Bytes of one head row in storage."""
        if self.encoding in ("f16", "bf16"):
            return 2 * self.head_dim
        if self.encoding in ("i4", "nvfp4"):
            return (self.head_dim + 1) // 2
        return self.head_dim

    def _paged(self, blocks: Optional[int], inner: int,
               element: str) -> MemRefType:
        if self.layout == "hnd":
            return memref((blocks, self.kv_heads, self.block_size, inner),
                          element)
        return memref((blocks, self.block_size, self.kv_heads, inner),
                      element)

    def storage_type(self, blocks: Optional[int] = None,
                     page_stride: Optional[int] = None) -> MemRefType:
        """The i8 page storage ``bind_cache`` takes, for ``blocks`` pages
        (dynamic by default). ``page_stride`` (bytes, at least one page, a
        multiple of 16) places the pages that far apart: K or V viewed out
        of an engine's ``[blocks, 2, ...]`` allocation has twice the page
        size (:meth:`page_bytes`)."""
        storage = self._paged(_blocks("CacheType.storage_type", blocks),
                              self.row_bytes, "i8")
        if page_stride is None:
            return storage
        page = self.page_bytes
        if (not isinstance(page_stride, int) or isinstance(page_stride, bool)
                or page_stride < page or page_stride % 16):
            raise IRError(
                f"CacheType.storage_type: page_stride must be an int of at "
                f"least one page ({page} bytes) and a multiple of 16, got "
                f"{page_stride!r:.60}")
        inner = [1]
        for size in reversed(storage.shape[2:]):
            inner.insert(0, inner[0] * size)
        return memref(storage.shape, "i8", strides=[page_stride, *inner])

    @property
    def page_bytes(self) -> int:
        """Bytes of one page of storage: block_size x kv_heads rows."""
        return self.block_size * self.kv_heads * self.row_bytes

    def group_scales_type(
            self, blocks: Optional[int] = None) -> Optional[MemRefType]:
        """The nvfp4 group scales' buffer (f8E4M3FN, one per 16 channels),
        or None for other encodings."""
        blocks = _blocks("CacheType.group_scales_type", blocks)
        if self.encoding != "nvfp4":
            return None
        return self._paged(blocks, self.head_dim // 16, "f8E4M3FN")

    def token_scales_type(
            self, blocks: Optional[int] = None) -> Optional[MemRefType]:
        """The per-token scales' buffer (f32 [blocks, block_size,
        kv_heads]) of a ``token`` cache, or None."""
        blocks = _blocks("CacheType.token_scales_type", blocks)
        if self.scale != "token":
            return None
        return memref((blocks, self.block_size, self.kv_heads), "f32")

    def scale_type(self) -> Optional[MemRefType]:
        """The scale operand of writes and attention: f32 [1] for
        ``tensor``, [kv_heads, head_dim] for ``channel``, else None."""
        if self.scale == "tensor":
            return memref((1,), "f32")
        if self.scale == "channel":
            return memref((self.kv_heads, self.head_dim), "f32")
        return None

    def replace(self, **changes: object) -> "CacheType":
        """A copy with some parameters changed: ``replace(scale="tensor")``."""
        fields = dict(block_size=self.block_size, kv_heads=self.kv_heads,
                      head_dim=self.head_dim, encoding=self.encoding,
                      scale=self.scale, layout=self._layout)
        unknown = sorted(set(changes) - set(fields))
        if unknown:
            raise IRTypeError(f"CacheType.replace: unknown parameter "
                              f"{unknown[0]!r}; expected one of "
                              f"{', '.join(fields)}")
        fields.update(changes)
        return CacheType(**fields)

    def _key(self) -> tuple:
        return ("cache", self.block_size, self.kv_heads, self.head_dim,
                self.encoding, self.scale, self.layout)

    def _text(self) -> str:
        layout = "" if self._layout is None else f", layout = {self._layout}"
        return (f"!pattn.cache<block_size = {self.block_size}, "
                f"kv_heads = {self.kv_heads}, head_dim = {self.head_dim}, "
                f"encoding = {self.encoding}, scale = {self.scale}{layout}>")


@_rejects_bad_calls(IRTypeError, "ir.cache")
def cache(*, block_size: int, kv_heads: int, head_dim: int, encoding: str,
          scale: str = "none", layout: Optional[str] = None) -> CacheType:
    """``!pattn.cache<...>``: ``encoding`` one of :data:`ENCODINGS`,
    ``scale`` one of :data:`SCALES`, ``layout`` ``"nhd"`` (the default,
    left out of the text unless given) or ``"hnd"``."""
    return CacheType(block_size, kv_heads, head_dim, encoding, scale, layout)


class Lane(_Frozen):
    """One field of a record: ``count`` elements of ``element`` at byte
    ``offset``, scaled by the lane named ``scaled_by`` (or None). Built by
    :func:`lane`."""

    __slots__ = ("name", "count", "element", "offset", "scaled_by")

    def __init__(self, name: str, count: int, element: str, offset: int,
                 scaled_by: Optional[str] = None):
        where = "ir.lane"
        for label, text in (("name", name), ("scaled_by", scaled_by)):
            if text is not None and not isinstance(text, str):
                raise IRTypeError(f"{where}: argument '{label}' must be a "
                                  f"str, got {_describe(text)}")
        self._set(name=name, count=_int(where, "count", count, _UINT32),
                  element=_element(where, "element", element, LANE_ELEMENTS),
                  offset=_int(where, "offset", offset, _UINT32),
                  scaled_by=scaled_by or None)

    def _key(self) -> tuple:
        return (self.name, self.count, self.element, self.offset,
                self.scaled_by)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lane) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        scaled = ("" if self.scaled_by is None else
                  f" scaled_by {_keyword_or_string(self.scaled_by)}")
        return (f"{_keyword_or_string(self.name)}: {self.count} x "
                f"{self.element} at {self.offset}{scaled}")

    def __repr__(self) -> str:
        return f"<ir.Lane {self}>"


@_rejects_bad_calls(IRTypeError, "ir.lane")
def lane(name: str, count: int, element: str, offset: int,
         scaled_by: Optional[str] = None) -> Lane:
    """A record lane, ``name: count x element at offset [scaled_by s]``;
    ``element`` one of :data:`LANE_ELEMENTS`."""
    return Lane(name, count, element, offset, scaled_by)


#: The record presets of SPEC §3: name -> (bytes, default mode, lanes).
PRESETS: Dict[str, Tuple[int, str, Tuple[Lane, ...]]] = {
    "fp8_ds_mla": (656, "none", (
        Lane("latent", 512, "f8E4M3FN", 0, "latent_scale"),
        Lane("latent_scale", 4, "f32", 512),
        Lane("rope", 64, "bf16", 528))),
    "nvfp4_ds_mla": (432, "tensor", (
        Lane("latent", 512, "f4E2M1FN", 0, "latent_scale"),
        Lane("latent_scale", 32, "f8E4M3FN", 256),
        Lane("rope", 64, "bf16", 304))),
    "nvfp4_ds_mla_fp8_rope": (368, "tensor", (
        Lane("latent", 512, "f4E2M1FN", 0, "latent_scale"),
        Lane("latent_scale", 32, "f8E4M3FN", 256),
        Lane("rope_scale", 1, "f32", 288),
        Lane("token_scale", 1, "f32", 292),
        Lane("rope", 64, "f8E4M3FN", 304, "rope_scale"))),
}


class RecordType(Type):
    """``!pattn.record<...>``: a preset by name, or ``bytes`` and ``lanes``
    written out. Built by :func:`record`. ``mode`` is the outer scale mode
    in effect; a preset's is printed only when given."""

    __slots__ = ("preset", "bytes", "lanes", "_mode")

    def __init__(self, preset: Optional[str] = None,
                 mode: Optional[str] = None, *, bytes: Optional[int] = None,
                 lanes: Optional[Sequence[Lane]] = None):
        where = "ir.record"
        if mode is not None:
            mode = _choice(where, "mode", mode, RECORD_MODES)
        if preset is not None:
            if bytes is not None or lanes is not None:
                raise IRTypeError(f"{where}: a preset ({preset!r:.60}) takes "
                                  "no 'bytes' or 'lanes'")
            preset = _choice(where, "preset", preset, tuple(PRESETS))
            size, _, preset_lanes = PRESETS[preset]
            self._set(preset=preset, bytes=size, lanes=preset_lanes,
                      _mode=mode)
            return
        if bytes is None or lanes is None:
            raise IRTypeError(f"{where}: give a preset ({', '.join(PRESETS)})"
                              ", or 'bytes' and 'lanes'")
        if mode is None:
            raise IRTypeError(f"{where}: a record written lane by lane needs "
                              f"its 'mode' ({', '.join(RECORD_MODES)})")
        if isinstance(lanes, str) or not isinstance(lanes, Iterable):
            raise IRTypeError(f"{where}: argument 'lanes' must be a sequence "
                              f"of ir.lane(...), got {_describe(lanes)}")
        lanes = tuple(lanes)
        for index, item in enumerate(lanes):
            if not isinstance(item, Lane):
                raise IRTypeError(f"{where}: lanes[{index}] must be an "
                                  f"ir.lane(...), got {_describe(item)}")
        self._set(preset=None, bytes=_int(where, "bytes", bytes, _UINT32),
                  lanes=lanes, _mode=mode)

    @property
    def mode(self) -> str:
        if self._mode is not None:
            return self._mode
        return PRESETS[self.preset][1] if self.preset else "none"

    def lane(self, name: str) -> Optional[Lane]:
        """The lane named ``name``, or None."""
        return next((item for item in self.lanes if item.name == name), None)

    def _key(self) -> tuple:
        return ("record", self.bytes, self.lanes, self.mode)

    def _text(self) -> str:
        if self.preset is not None:
            mode = "" if self._mode is None else f", {self._mode}"
            return f"!pattn.record<{self.preset}{mode}>"
        lanes = ", ".join(str(item) for item in self.lanes)
        return f"!pattn.record<{self.bytes} bytes, {self.mode}, {{{lanes}}}>"


@_rejects_bad_calls(IRTypeError, "ir.record")
def record(preset: Optional[str] = None, mode: Optional[str] = None, *,
           bytes: Optional[int] = None,
           lanes: Optional[Sequence[Lane]] = None) -> RecordType:
    """``!pattn.record<...>``: ``record("fp8_ds_mla")``,
    ``record("nvfp4_ds_mla_fp8_rope", "token")``, or
    ``record(bytes=32, mode="none", lanes=[lane(...), ...])``."""
    return RecordType(preset, mode, bytes=bytes, lanes=lanes)


class RecordCacheType(Type):
    """``!pattn.record_cache<block_size = N, record = ...>``. Built by
    :func:`record_cache`."""

    __slots__ = ("block_size", "record")

    def __init__(self, block_size: int, record: Type):
        where = "ir.record_cache"
        if not isinstance(record, Type) or not isinstance(record.resolved(),
                                                          RecordType):
            raise IRTypeError(f"{where}: argument 'record' must be an "
                              f"ir.record(...), got {_describe(record)}")
        self._set(block_size=_int(where, "block_size", block_size),
                  record=record)

    def storage_type(self, blocks: Optional[int] = None) -> MemRefType:
        """The i8 storage ``bind_cache`` takes: [blocks, block_size,
        record bytes]."""
        blocks = _blocks("RecordCacheType.storage_type", blocks)
        return memref((blocks, self.block_size, self.record.resolved().bytes),
                      "i8")

    def _key(self) -> tuple:
        return ("record_cache", self.block_size, self.record.resolved()._key())

    def _text(self) -> str:
        return (f"!pattn.record_cache<block_size = {self.block_size}, "
                f"record = {self.record}>")

    def _aliases(self) -> Tuple["Alias", ...]:
        return self.record._aliases()


@_rejects_bad_calls(IRTypeError, "ir.record_cache")
def record_cache(block_size: int, record: Type) -> RecordCacheType:
    """``!pattn.record_cache<...>`` of ``record`` (an :func:`record` type
    or an alias of one)."""
    return RecordCacheType(block_size, record)


class Alias(Type):
    """A type alias, ``!name = type``: prints as ``!name`` and otherwise
    stands for its type (``alias.storage_type()`` is the type's). Made by
    :meth:`Module.alias`; a module also defines the aliases its functions
    use without it."""

    __slots__ = ("name", "type")

    def __init__(self, name: str, type: Type):
        where = "ir.Alias"
        _identifier(where, "name", name, "type aliases are written !name")
        if not isinstance(type, Type) or isinstance(type, Alias):
            raise IRTypeError(f"{where}: argument 'type' must be a type "
                              f"(not an alias), got {_describe(type)}")
        self._set(name=name, type=type)

    def resolved(self) -> Type:
        return self.type.resolved()

    def definition(self) -> str:
        """``!name = type``, as the module prints it."""
        return f"!{self.name} = {self.type}"

    def _key(self) -> tuple:
        return self.type._key()

    def _text(self) -> str:
        return f"!{self.name}"

    def _aliases(self) -> Tuple["Alias", ...]:
        return self.type._aliases() + (self,)

    def __getattr__(self, name: str) -> object:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "type"), name)


# ---------------------------------------------------------------------------
# Decode plans
# ---------------------------------------------------------------------------


# The chips a plan may name (pattn-opt's, from the target table).
_PLAN_CHIPS = ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a",
               "sm_100", "sm_100a", "sm_120", "sm_120a")


def _chips(where: str, targets: object) -> Tuple[str, ...]:
    """``targets`` as a tuple of chip names: at least one, each once."""
    if isinstance(targets, str) or not isinstance(targets, Iterable):
        raise IRTypeError(f"{where}: argument 'targets' must be a list of "
                          f"chips, got {_describe(targets)}")
    chips = tuple(targets)
    for chip in chips:
        if chip not in _PLAN_CHIPS:
            raise IRError(f"{where}: target {chip!r} is not a chip "
                          f"({', '.join(_PLAN_CHIPS)})")
    if not chips or len(set(chips)) != len(chips):
        raise IRError(f"{where}: targets must name at least one chip, each "
                      f"once; got {list(chips)}")
    return chips


def _residency(where: str, resident_blocks: object,
               targets: Tuple[str, ...]) -> Tuple[int, ...]:
    """One count of resident blocks per target."""
    if not isinstance(resident_blocks, Iterable):
        raise IRTypeError(f"{where}: argument 'resident_blocks' must be a "
                          f"list of ints, got {_describe(resident_blocks)}")
    counts = tuple(_int(where, "resident_blocks", count, (1, 32))
                   for count in resident_blocks)
    if len(counts) != len(targets):
        raise IRError(f"{where}: resident_blocks has {len(counts)} counts "
                      f"for {len(targets)} targets (one per chip)")
    return counts


class _Plan(_Frozen):
    """A decode plan: its fields in the dialect's order, printed as
    pattn-opt prints them (fields at their default left out, lists in
    brackets)."""

    __slots__ = ()
    MNEMONIC = ""
    DEFAULTS: Dict[str, object] = {}

    def __str__(self) -> str:
        def text(value: object) -> str:
            if isinstance(value, tuple):
                return "[" + ", ".join(str(item) for item in value) + "]"
            return str(value)
        fields = ", ".join(
            f"{name} = {text(getattr(self, name))}" for name in self.__slots__
            if self.DEFAULTS.get(name, object()) != getattr(self, name))
        return f"#pattn.{self.MNEMONIC}<{fields}>"

    def __repr__(self) -> str:
        return f"<ir.{type(self).__name__} {self}>"


class XqaPlan(_Plan):
    """``#pattn.xqa_plan<...>``, the tiling and schedule
    ``--pattn-plan-decode`` writes for the XQA backend. Built by
    :func:`xqa_plan`."""

    __slots__ = ("operand", "rows", "keys_per_tile", "stages", "key_warps",
                 "value_warps", "keys_per_split", "shared_bytes",
                 "resident_blocks", "threads", "least_tiles_per_split",
                 "most_splits", "targets")
    MNEMONIC = "xqa_plan"
    DEFAULTS = {"threads": 128, "least_tiles_per_split": 4,
                "most_splits": 64}


class XqaMlaPlan(_Plan):
    """``#pattn.xqa_mla_plan<...>``, the tiling and schedule
    ``--pattn-plan-decode`` writes on ``pattn.mla_decode`` ops of the XQA
    backend (the tensor-core MLA kernel). Built by :func:`xqa_mla_plan`."""

    __slots__ = ("kernel", "heads_per_block", "keys_per_tile", "shared_bytes",
                 "resident_blocks", "threads", "least_tiles_per_split",
                 "most_splits", "targets")
    MNEMONIC = "xqa_mla_plan"
    DEFAULTS = {"kernel": "mma_sync", "threads": 128,
                "least_tiles_per_split": 2, "most_splits": 128}
    KERNELS = ("mma_sync", "wgmma")


class PortablePlan(_Plan):
    """``#pattn.portable_plan<...>``, the tiling of the portable backend.
    Built by :func:`portable_plan`."""

    __slots__ = ("heads_per_block", "keys_per_split", "threads", "targets")
    MNEMONIC = "portable_plan"
    DEFAULTS = {"threads": 128}


def _tensor_core_plan(plan: _Plan, where: str, ints: Dict[str, object],
                      resident_blocks: object, targets: object,
                      **fields: object) -> _Plan:
    """`plan` with its int fields checked, one count of resident blocks per
    chip of `targets`, and `fields` as given."""
    chips = _chips(where, targets)
    plan._set(resident_blocks=_residency(where, resident_blocks, chips),
              targets=chips, **fields,
              **{name: _int(where, name, value)
                 for name, value in ints.items()})
    return plan


@_rejects_bad_calls(IRTypeError, "ir.xqa_plan")
def xqa_plan(*, rows: int, keys_per_tile: int, stages: int, key_warps: int,
             value_warps: int, keys_per_split: int, shared_bytes: int,
             resident_blocks: Iterable[int], targets: Iterable[str],
             operand: str = "f16", threads: int = 128,
             least_tiles_per_split: int = 4,
             most_splits: int = 64) -> XqaPlan:
    """An XQA decode plan (``plan=`` of ``backend="xqa"`` ops) for the chips
    ``targets``, with ``resident_blocks`` blocks per SM on each."""
    where = "ir.xqa_plan"
    if operand not in ("f16", "bf16"):
        raise IRTypeError(f"{where}: operand must be f16 or bf16, got "
                          f"{operand!r}")
    ints = dict(rows=rows, keys_per_tile=keys_per_tile, stages=stages,
                key_warps=key_warps, value_warps=value_warps,
                keys_per_split=keys_per_split, shared_bytes=shared_bytes,
                threads=threads, least_tiles_per_split=least_tiles_per_split,
                most_splits=most_splits)
    return _tensor_core_plan(XqaPlan(), where, ints, resident_blocks,
                             targets, operand=operand)


@_rejects_bad_calls(IRTypeError, "ir.xqa_mla_plan")
def xqa_mla_plan(*, heads_per_block: int, keys_per_tile: int,
                 shared_bytes: int, resident_blocks: Iterable[int],
                 targets: Iterable[str], kernel: str = "mma_sync",
                 threads: Optional[int] = None,
                 least_tiles_per_split: int = 2,
                 most_splits: int = 128) -> XqaMlaPlan:
    """A tensor-core MLA decode plan (``plan=`` of ``pattn.mla_decode`` with
    ``backend="xqa"``): ``kernel="mma_sync"`` with 16 heads per block and
    128 threads, or ``kernel="wgmma"`` with 64 and 256."""
    where = "ir.xqa_mla_plan"
    if kernel not in XqaMlaPlan.KERNELS:
        raise IRTypeError(f"{where}: kernel must be one of "
                          f"{', '.join(XqaMlaPlan.KERNELS)}, got {kernel!r}")
    if threads is None:
        threads = 256 if kernel == "wgmma" else 128
    ints = dict(heads_per_block=heads_per_block, keys_per_tile=keys_per_tile,
                shared_bytes=shared_bytes, threads=threads,
                least_tiles_per_split=least_tiles_per_split,
                most_splits=most_splits)
    return _tensor_core_plan(XqaMlaPlan(), where, ints, resident_blocks,
                             targets, kernel=kernel)


@_rejects_bad_calls(IRTypeError, "ir.portable_plan")
def portable_plan(*, heads_per_block: int, keys_per_split: int,
                  targets: Iterable[str], threads: int = 128) -> PortablePlan:
    """A portable decode plan (``plan=`` of ``backend="portable"`` ops) for
    the chips ``targets``."""
    where = "ir.portable_plan"
    plan = PortablePlan()
    plan._set(heads_per_block=_int(where, "heads_per_block", heads_per_block),
              keys_per_split=_int(where, "keys_per_split", keys_per_split),
              threads=_int(where, "threads", threads),
              targets=_chips(where, targets))
    return plan


# ---------------------------------------------------------------------------
# Values, ops and functions
# ---------------------------------------------------------------------------


class Value(_Frozen):
    """An SSA value of one function: an argument or an op's result.
    ``str()`` is ``%name``."""

    __slots__ = ("name", "type", "function")

    def __init__(self, name: str, type: Type, function: "Function"):
        self._set(name=name, type=type, function=function)

    def __str__(self) -> str:
        return f"%{self.name}"

    def __repr__(self) -> str:
        return f"<ir.Value %{self.name}: {self.type} of @{self.function.name}>"


class Operation(_Frozen):
    """One op of a function body as it was built: ``name``
    (``"pattn.paged_attention"``), ``operands`` by argument name (those
    given), ``attributes`` (the values given, defaults left out) and
    ``results``. ``str()`` is its text."""

    __slots__ = ("name", "operands", "attributes", "results", "_text")

    def __init__(self, name: str, operands: Dict[str, Value],
                 attributes: Dict[str, object], results: Tuple[Value, ...],
                 text: str):
        self._set(name=name, operands=operands, attributes=attributes,
                  results=results, _text=text)

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<ir.Operation {self.name}>"


# Operand kinds: what resolved type an operand must have, as messages say it.
_KINDS = {"memref": (MemRefType, "memref"),
          "cache": (CacheType, "!pattn.cache"),
          "record_cache": (RecordCacheType, "!pattn.record_cache")}

# The operands ops may leave out (None); every other one is required.
# pattn.rotary's default norm_epsilon, 1e-6 as the f32 the op stores.
_F32_ONE_MILLIONTH = struct.unpack("<f", struct.pack("<f", 1e-6))[0]

_OPTIONAL_OPERANDS = frozenset((
    "group_scales", "token_scales", "scale", "outer_scale", "query_start",
    "k_scale", "v_scale", "sinks", "out_scale", "guard", "query_exponents",
    "positions", "norm_weight"))

# What ``values`` of a constant table may hold: struct format, and whether
# the values are ints.
_TABLE_ELEMENTS = {"f32": ("<f", False), "f16": ("<e", False),
                   "i8": ("<b", True), "i32": ("<i", True),
                   "i64": ("<q", True)}


def _flatten_table(where: str, values: object) -> Tuple[list, tuple]:
    """Nested sequences (or an array with ``tolist``) as a flat list and the
    shape of their nesting."""
    if hasattr(values, "tolist") and not isinstance(values, (list, tuple)):
        values = values.tolist()
    if not isinstance(values, (list, tuple)):
        raise IRTypeError(f"{where}: argument 'values' must be a sequence "
                          f"(nested for more dimensions) or an array, got "
                          f"{_describe(values)}")
    if not values:
        raise IRError(f"{where}: argument 'values' is empty")
    if all(isinstance(item, (list, tuple)) for item in values):
        parts = [_flatten_table(where, item) for item in values]
        shapes = {shape for _, shape in parts}
        if len(shapes) != 1:
            raise IRError(f"{where}: argument 'values' is ragged (rows of "
                          f"shapes {sorted(shapes)})")
        return ([v for flat, _ in parts for v in flat],
                (len(values),) + shapes.pop())
    if any(isinstance(item, (list, tuple)) for item in values):
        raise IRError(f"{where}: argument 'values' mixes rows and scalars")
    return list(values), (len(values),)


class Function:
    """A ``func.func`` with named arguments and a body of ops appended in
    call order; it ends in ``return``. ``str()`` is its text."""

    @_rejects_bad_calls(IRTypeError, "ir.Function")
    def __init__(self, name: str):
        self._name = _identifier("ir.Function", "name", name,
                                 "pattn-compile makes each function a C "
                                 "entry point of that name")
        self._args: List[Tuple[Value, bool]] = []
        self._ops: List[Operation] = []
        self._names: set = set()
        self._next_number = 0
        self._globals: Dict[str, str] = {}
        self._aliases: Dict[str, Alias] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def args(self) -> Tuple[Value, ...]:
        """The arguments in order."""
        return tuple(value for value, _ in self._args)

    @property
    def ops(self) -> Tuple[Operation, ...]:
        return tuple(self._ops)

    def __repr__(self) -> str:
        return f"<ir.Function @{self._name}: {len(self._args)} arguments, " \
               f"{len(self._ops)} ops>"

    # -- names and operands -------------------------------------------------

    def _value(self, where: str, name: str, type: Type) -> Value:
        """A new value ``%name`` of ``type``, if the name is free."""
        if name in self._names:
            raise IRError(f"{where}: function @{self._name} already has a "
                          f"value named %{name}")
        self._note(where, type)
        self._names.add(name)
        return Value(name, type, self)

    def _fresh(self) -> str:
        """The lowest unused number, as a value name (not yet taken)."""
        while str(self._next_number) in self._names:
            self._next_number += 1
        return str(self._next_number)

    def _result(self, where: str, name: Optional[str], type: Type) -> Value:
        """A new result value, named ``name`` or numbered."""
        if name is None:
            return self._value(where, self._fresh(), type)
        if not isinstance(name, str):
            raise IRTypeError(f"{where}: argument 'name' must be a str, got "
                              f"{_describe(name)}")
        if not _SUFFIX_ID.match(name):
            raise IRError(f"{where}: argument 'name' is {name!r:.60}, which "
                          "is not an SSA name (digits, or [A-Za-z_$.-] then "
                          "[A-Za-z0-9_$.-]*)")
        return self._value(where, name, type)

    def _note(self, where: str, type: Type) -> None:
        """Records the aliases ``type`` uses (the module defines them)."""
        aliases = type._aliases()
        for alias in aliases:
            existing = self._aliases.get(alias.name, alias)
            if existing.definition() != alias.definition():
                raise IRError(f"{where}: @{self._name} already uses "
                              f"{existing.definition()}, not "
                              f"{alias.definition()}")
        for alias in aliases:
            self._aliases.setdefault(alias.name, alias)

    def _use(self, where: str, argument: str, value: object,
             kind: str) -> Value:
        """``value`` as an operand that must be of ``kind``."""
        if not isinstance(value, Value):
            raise IRTypeError(f"{where}: argument '{argument}' must be an "
                              "ir.Value (a function argument or an op's "
                              f"result), got {_describe(value)}")
        if value.function is not self:
            raise IRError(f"{where}: argument '{argument}' is {value} of "
                          f"function @{value.function.name}, not of "
                          f"@{self._name}")
        expected, what = _KINDS[kind]
        if not isinstance(value.type.resolved(), expected):
            raise IRTypeError(f"{where}: argument '{argument}' must be a "
                              f"{what} value, got {value}: {value.type}")
        return value

    def _append(self, name: str, operands: Dict[str, Value],
                attributes: Dict[str, object], results: Tuple[Value, ...],
                text: str) -> None:
        self._ops.append(Operation(name, operands, attributes, results, text))

    def _emit(self, where: str, clauses: Sequence[tuple],
              attributes: Sequence[tuple] = (), result: Optional[Value] = None,
              suffix: str = "") -> None:
        """Appends the pattn op ``where`` with its operand clauses
        ``(argument, keyword, value, kind, on a new line)`` (an optional
        operand that is None is left out) and attributes ``(name, value,
        text)``; ``suffix`` follows the clauses on their last line."""
        text = f"  {'' if result is None else f'{result} = '}{where}"
        operands = {}
        for argument, keyword, value, kind, newline in clauses:
            if value is None and argument in _OPTIONAL_OPERANDS:
                continue
            operands[argument] = self._use(where, argument, value, kind)
            text += "\n      " if newline else " "
            text += f"{keyword}({value} : {value.type})"
        text += suffix
        if attributes:
            text += "\n      {" + ", ".join(
                f"{name} = {printed}" for name, _, printed in attributes) + "}"
        self._append(where, operands,
                     {name: value for name, value, _ in attributes},
                     () if result is None else (result,), text)

    # -- arguments -----------------------------------------------------------

    @_rejects_bad_calls(IRTypeError, "ir.Function.arg")
    def arg(self, name: str, type: Type, *, pattn_name: bool = False) -> Value:
        """Adds an argument ``%name: type`` and returns it. ``name`` is what
        pattn-compile's manifest and the loaded function call it, so it must
        be an identifier; ``pattn_name=True`` also writes
        ``{pattn.name = "name"}``, which survives re-printing."""
        where = "ir.Function.arg"
        _identifier(where, "name", name,
                    "pattn-compile's manifest and Python calls name the "
                    "argument by it")
        if not isinstance(type, Type):
            raise IRTypeError(f"{where}: argument 'type' must be an ir type "
                              f"(ir.memref(...), ...), got {_describe(type)}")
        if not isinstance(pattn_name, bool):
            raise IRTypeError(f"{where}: argument 'pattn_name' must be True "
                              f"or False, got {_describe(pattn_name)}")
        value = self._value(where, name, type)
        self._args.append((value, pattn_name))
        return value

    # -- constants -----------------------------------------------------------

    @_rejects_bad_calls(IRTypeError, "ir.Function.constant_table")
    def constant_table(self, name: str, values: object,
                       shape: Optional[Sequence[int]] = None, *,
                       element: str = "f32", symbol: Optional[str] = None,
                       form: str = "global") -> Value:
        """A memref ``%name`` holding ``values`` (nested sequences or an
        array; ``shape`` defaults to their nesting), known when compiling:
        with ``form="global"`` a ``memref.global "private" constant
        @symbol`` (``symbol`` defaults to ``name``; functions may share it)
        read with ``memref.get_global``, with ``form="tensor"`` a
        ``bufferization.to_buffer`` of an ``arith.constant``. The fold pass
        folds such K channel tables at compile time. Values are printed as
        little-endian hex, bit-exact; ``element`` is f32, f16, i8, i32 or
        i64."""
        where = "ir.Function.constant_table"
        element = _choice(where, "element", element, tuple(_TABLE_ELEMENTS))
        form = _choice(where, "form", form, ("global", "tensor"))
        flat, nested = _flatten_table(where, values)
        if shape is None:
            dims = nested
        else:
            dims = _shape(where, shape)
            if None in dims:
                raise IRError(f"{where}: a constant table has a static "
                              f"shape, got {list(shape)}")
            count = 1
            for dim in dims:
                count *= dim
            if count != len(flat):
                raise IRError(f"{where}: shape {list(dims)} holds {count} "
                              f"values, but 'values' has {len(flat)}")
        code, integral = _TABLE_ELEMENTS[element]
        packed = []
        for index, item in enumerate(flat):
            label = f"values[{index}]"  # named as an argument
            if integral:
                bits = 8 * struct.calcsize(code)
                item = _int(where, label, item,
                            (-(1 << (bits - 1)), (1 << (bits - 1)) - 1))
            elif isinstance(item, bool) or not isinstance(item, numbers.Real):
                raise IRTypeError(f"{where}: argument '{label}' must be a "
                                  f"float, got {_describe(item)}")
            try:
                packed.append(struct.pack(code, item))
            except (OverflowError, struct.error):
                raise IRError(f"{where}: argument '{label}' is {item!r}, "
                              f"which does not fit in {element}") from None
        payload = '"0x' + b"".join(packed).hex().upper() + '"'
        table = memref(dims, element)
        if form == "tensor":
            result = self._result(where, name, table)
            tensor = "%" + self._fresh()
            self._names.add(tensor[1:])
            tensor_type = f"tensor<{str(table)[len('memref<'):]}"
            text = (f"  {tensor} = arith.constant dense<{payload}> : "
                    f"{tensor_type}\n"
                    f"  {result} = bufferization.to_buffer {tensor} : "
                    f"{tensor_type} to {table}")
            self._append("bufferization.to_buffer", {}, {"values": flat},
                         (result,), text)
            return result
        symbol = _identifier(where, "symbol", name if symbol is None
                             else symbol, "it is the global's symbol")
        definition = (f'memref.global "private" constant @{symbol} : '
                      f"{table} = dense<{payload}>")
        if self._globals.get(symbol, definition) != definition:
            raise IRError(f"{where}: function @{self._name} already has a "
                          f"constant table @{symbol} with other values or "
                          "another shape")
        result = self._result(where, name, table)
        self._globals[symbol] = definition
        self._append("memref.get_global", {},
                     {"symbol": symbol, "values": flat}, (result,),
                     f"  {result} = memref.get_global @{symbol} : {table}")
        return result

    # -- temporaries ---------------------------------------------------------

    @_rejects_bad_calls(IRTypeError, "memref.alloc")
    def alloc(self, type: MemRefType, *, like: Optional[Value] = None,
              name: Optional[str] = None) -> Value:
        """``memref.alloc``: a temporary buffer of ``type`` (device memory,
        ordered on the call's stream once lowered); each dynamic dimension
        takes the size of the same dimension of ``like``. Free it with
        :meth:`dealloc` after its last use."""
        where = "memref.alloc"
        if not isinstance(type, MemRefType):
            raise IRTypeError(f"{where}: argument 'type' must be an "
                              f"ir.memref(...), got {_describe(type)}")
        dynamic = [i for i, d in enumerate(type.shape) if d is None]
        if dynamic:
            if like is None:
                raise IRError(f"{where}: argument 'like' is needed for the "
                              f"dynamic dimensions of {type}")
            like = self._use(where, "like", like, "memref")
            shape = like.type.resolved().shape
            if len(shape) < len(type.shape):
                raise IRError(f"{where}: argument 'like' ({like}: "
                              f"{like.type}) has no dimension "
                              f"{len(type.shape) - 1}")
        lines, sizes = [], []
        for i in dynamic:
            index, size = self._fresh(), None
            self._names.add(index)
            size = self._fresh()
            self._names.add(size)
            lines.append(f"  %{index} = arith.constant {i} : index")
            lines.append(f"  %{size} = memref.dim {like}, %{index} : "
                         f"{like.type}")
            sizes.append(f"%{size}")
        result = self._result(where, name, type)
        lines.append(f"  {result} = memref.alloc({', '.join(sizes)}) : "
                     f"{type}")
        operands = {"like": like} if dynamic else {}
        self._append(where, operands, {}, (result,), "\n".join(lines))
        return result

    @_rejects_bad_calls(IRTypeError, "memref.dealloc")
    def dealloc(self, buffer: Value) -> None:
        """``memref.dealloc`` of a buffer from :meth:`alloc`."""
        where = "memref.dealloc"
        buffer = self._use(where, "buffer", buffer, "memref")
        self._append(where, {"buffer": buffer}, {}, (),
                     f"  memref.dealloc {buffer} : {buffer.type}")

    # -- pattn ops -----------------------------------------------------------

    @_rejects_bad_calls(IRTypeError, "pattn.bind_cache")
    def bind_cache(self, storage: Value, cache_type: Type, *,
                   group_scales: Optional[Value] = None,
                   token_scales: Optional[Value] = None,
                   name: Optional[str] = None) -> Value:
        """``pattn.bind_cache``: views ``storage`` (and the nvfp4
        ``group_scales``, the ``token_scales`` of a ``token`` cache) as a
        cache of ``cache_type`` (a :func:`cache`, :func:`record_cache` or an
        alias of one). Returns the cache, named ``name`` or numbered."""
        where = "pattn.bind_cache"
        if not isinstance(cache_type, Type) or not isinstance(
                cache_type.resolved(), (CacheType, RecordCacheType)):
            raise IRTypeError(f"{where}: argument 'cache_type' must be an "
                              "ir.cache(...) or ir.record_cache(...) type, "
                              f"got {_describe(cache_type)}")
        clauses = [("storage", "storage", storage, "memref", False),
                   ("group_scales", "group_scales", group_scales, "memref",
                    False),
                   ("token_scales", "token_scales", token_scales, "memref",
                    False)]
        for argument, _, value, kind, _ in clauses:  # before naming a result
            if value is not None or argument not in _OPTIONAL_OPERANDS:
                self._use(where, argument, value, kind)
        result = self._result(where, name, cache_type)
        self._emit(where, clauses, result=result, suffix=f" : {cache_type}")
        return result

    @_rejects_bad_calls(IRTypeError, "pattn.write_cache")
    def write_cache(self, values: Value, into: Value, slots: Value, *,
                    scale: Optional[Value] = None,
                    first_head: int = 0) -> None:
        """``pattn.write_cache``: quantizes ``values`` [tokens, kv_heads,
        head_dim] into the cache ``into`` at ``slots``; ``scale`` for
        ``tensor``/``channel`` caches (and nvfp4's tensor scale);
        ``first_head`` > 0 takes heads first_head.. of wider ``values``
        (the V heads of a packed QKV buffer)."""
        where = "pattn.write_cache"
        self._emit(where, [
            ("values", "values", values, "memref", False),
            ("into", "into", into, "cache", False),
            ("slots", "slots", slots, "memref", True),
            ("scale", "scale", scale, "memref", False)],
            self._attributes(where, [("first_head", first_head, "i64", 0)]))

    @_rejects_bad_calls(IRTypeError, "pattn.write_record")
    def write_record(self, latent: Value, rope: Value, into: Value,
                     slots: Value, *,
                     outer_scale: Optional[Value] = None) -> None:
        """``pattn.write_record``: encodes ``latent`` and ``rope`` rows into
        the record cache ``into`` at ``slots``; ``outer_scale`` for records
        in ``tensor`` mode."""
        self._emit("pattn.write_record", [
            ("latent", "latent", latent, "memref", False),
            ("rope", "rope", rope, "memref", True),
            ("into", "into", into, "record_cache", False),
            ("slots", "slots", slots, "memref", True),
            ("outer_scale", "outer_scale", outer_scale, "memref", False)])

    @_rejects_bad_calls(IRTypeError, "pattn.rotary")
    def rotary(self, input: Value, cos: Value, sin: Value, out: Value, *,
               positions: Optional[Value] = None,
               seq_lens: Optional[Value] = None,
               query_start: Optional[Value] = None,
               norm_weight: Optional[Value] = None,
               interleaved: bool = False, first_head: int = 0,
               position_offset: int = 0,
               norm_epsilon: float = 1e-6) -> None:
        """``pattn.rotary``: heads ``first_head``.. of ``input`` [tokens,
        heads, D], RMS-normalized by ``norm_weight`` [D] when given, then
        rotated by the ``cos``/``sin`` [max_position, R/2] tables at each
        token's position, into ``out`` (printed ``outs``). The position is
        ``positions[t]`` or the token's appended kv position from
        ``seq_lens`` (and ``query_start``), plus ``position_offset``;
        exactly one of ``positions`` and ``seq_lens``. ``interleaved``
        rotates pairs (2i, 2i+1) instead of (i, i + R/2)."""
        where = "pattn.rotary"
        if (positions is None) == (seq_lens is None):
            raise IRError(f"{where}: exactly one of 'positions' (per token) "
                          "and 'seq_lens' (the appended tokens' positions) "
                          "is needed")
        attributes = self._attributes(where, [
            ("interleaved", interleaved, "bool", False),
            ("first_head", first_head, "i64", 0),
            ("position_offset", position_offset, "i64", 0),
            ("norm_epsilon", norm_epsilon, "f32", _F32_ONE_MILLIONTH)])
        clauses = [("input", "input", input, "memref", False),
                   ("cos", "cos", cos, "memref", True),
                   ("sin", "sin", sin, "memref", False),
                   ("positions", "positions", positions, "memref", True)]
        if seq_lens is not None:
            clauses.append(("seq_lens", "seq_lens", seq_lens, "memref", True))
        clauses += [
            ("query_start", "query_start", query_start, "memref", False),
            ("norm_weight", "norm_weight", norm_weight, "memref", False),
            ("out", "outs", out, "memref", True)]
        self._emit(where, clauses, attributes)

    def _num_heads(self, where: str, num_heads: Optional[int],
                   query: object) -> int:
        """``num_heads``, or the query's static head count."""
        if num_heads is not None:
            return _int(where, "num_heads", num_heads)
        query = self._use(where, "query", query, "memref")
        shape = query.type.resolved().shape
        if len(shape) < 2 or shape[1] is None:
            raise IRError(f"{where}: argument 'num_heads' is needed: the "
                          f"query ({query}: {query.type}) has no static head "
                          "count to take it from")
        return shape[1]

    @staticmethod
    def _attributes(where: str, specs: Sequence[tuple]) -> List[tuple]:
        """``(name, value, kind, default)`` as the attributes to print:
        checked, and without those left at their defaults (or None)."""
        printed = []
        for name, value, kind, default in specs:
            if value is None:
                continue
            if kind == "i64":
                value = _int(where, name, value)
                text = f"{value} : i64"
            elif kind == "i32":
                value = _int(where, name, value, _INT32)
                text = f"{value} : i32"
            elif kind == "f32":
                value = _f32(where, name, value)
                text = f"{f32_literal(value)} : f32"
            elif kind == "bool":
                if not isinstance(value, bool):
                    raise IRTypeError(f"{where}: argument {name!r} must be "
                                      f"True or False, got {_describe(value)}")
                text = "true" if value else "false"
            elif kind == "backend":
                value = _choice(where, name, value, BACKENDS)
                text = f"#pattn.backend<{value}>"
            else:  # a plan, checked by _check_plan
                text = str(value)
            if value != default:
                printed.append((name, value, text))
        return printed

    @staticmethod
    def _check_plan(where: str, backend: Optional[str],
                    plan: Optional[object], mla: bool = False) -> None:
        # MLA decode has its own tensor-core kernel and plan.
        xqa, xqa_name = (XqaMlaPlan, "xqa_mla_plan") if mla else \
            (XqaPlan, "xqa_plan")
        if plan is None:
            return
        if not isinstance(plan, (XqaPlan, XqaMlaPlan, PortablePlan)):
            raise IRTypeError(f"{where}: argument 'plan' must be an "
                              f"ir.{xqa_name}(...) or ir.portable_plan(...), "
                              f"got {_describe(plan)}")
        wanted = {"xqa": (xqa, xqa_name),
                  "portable": (PortablePlan, "portable_plan")}.get(backend)
        if wanted is None:
            raise IRError(f"{where}: argument 'plan' needs backend='xqa' or "
                          "'portable' (the backend it plans)")
        if not isinstance(plan, wanted[0]):
            raise IRError(f"{where}: backend {backend!r} needs an "
                          f"ir.{wanted[1]}(...), got {plan}")

    @_rejects_bad_calls(IRTypeError, "pattn.paged_attention")
    def paged_attention(self, query: Value, key: Value, value: Value,
                        block_table: Value, seq_lens: Value, out: Value, *,
                        num_heads: Optional[int] = None,
                        query_start: Optional[Value] = None,
                        k_scale: Optional[Value] = None,
                        v_scale: Optional[Value] = None,
                        sinks: Optional[Value] = None,
                        out_scale: Optional[Value] = None,
                        guard: Optional[Value] = None,
                        query_exponents: Optional[Value] = None,
                        softmax_scale: Optional[float] = None,
                        softcap: float = 0.0, window: int = -1,
                        max_query_len: int = 1,
                        guard_value: Optional[int] = None,
                        backend: Optional[str] = None,
                        plan: Optional[object] = None) -> None:
        """``pattn.paged_attention`` of ``query`` over the caches ``key``
        and ``value`` into ``out`` (printed ``outs``). ``num_heads``
        defaults to the query's static head count. ``query_start`` with
        ``max_query_len`` for several query tokens per sequence;
        ``k_scale``/``v_scale`` for ``tensor``/``channel`` caches;
        ``sinks``; ``softmax_scale`` (default 1/sqrt(head_dim)),
        ``softcap`` (0: off), ``window`` (-1: off). The forms the passes
        write: ``out_scale``, ``guard`` with ``guard_value``,
        ``query_exponents``, ``backend`` (``"xqa"``, ``"portable"``) and its
        ``plan``. Attributes print in this order: num_heads, max_query_len,
        softmax_scale, softcap, window, guard_value, backend, plan."""
        where = "pattn.paged_attention"
        heads = self._num_heads(where, num_heads, query)
        if (guard is None) != (guard_value is None):
            raise IRError(f"{where}: arguments 'guard' and 'guard_value' come "
                          "together (the op runs when guard[0] == "
                          "guard_value)")
        self._check_plan(where, backend, plan)
        attributes = self._attributes(where, [
            ("num_heads", heads, "i64", None),
            ("max_query_len", max_query_len, "i64", 1),
            ("softmax_scale", softmax_scale, "f32", None),
            ("softcap", softcap, "f32", 0.0),
            ("window", window, "i64", -1),
            ("guard_value", guard_value, "i32", None),
            ("backend", backend, "backend", None),
            ("plan", plan, "plan", None)])
        self._emit(where, [
            ("query", "query", query, "memref", False),
            ("key", "key", key, "cache", True),
            ("value", "value", value, "cache", False),
            ("block_table", "block_table", block_table, "memref", True),
            ("seq_lens", "seq_lens", seq_lens, "memref", True),
            ("query_start", "query_start", query_start, "memref", True),
            ("k_scale", "k_scale", k_scale, "memref", False),
            ("v_scale", "v_scale", v_scale, "memref", False),
            ("sinks", "sinks", sinks, "memref", False),
            ("out_scale", "out_scale", out_scale, "memref", False),
            ("guard", "guard", guard, "memref", False),
            ("query_exponents", "query_exponents", query_exponents, "memref",
             False),
            ("out", "outs", out, "memref", True)], attributes)

    @_rejects_bad_calls(IRTypeError, "pattn.mla_decode")
    def mla_decode(self, query: Value, cache: Value, block_table: Value,
                   seq_lens: Value, out: Value, *,
                   num_heads: Optional[int] = None,
                   query_start: Optional[Value] = None,
                   outer_scale: Optional[Value] = None,
                   softmax_scale: Optional[float] = None,
                   max_query_len: int = 1, backend: Optional[str] = None,
                   plan: Optional[object] = None) -> None:
        """``pattn.mla_decode`` of ``query`` [tokens, num_heads, L + R]
        over the record cache ``cache`` into ``out`` (printed ``outs``);
        ``outer_scale`` for records in ``tensor`` mode. Attributes print in
        the op's order: num_heads, softmax_scale, max_query_len, backend,
        plan."""
        where = "pattn.mla_decode"
        heads = self._num_heads(where, num_heads, query)
        self._check_plan(where, backend, plan, mla=True)
        attributes = self._attributes(where, [
            ("num_heads", heads, "i64", None),
            ("softmax_scale", softmax_scale, "f32", None),
            ("max_query_len", max_query_len, "i64", 1),
            ("backend", backend, "backend", None),
            ("plan", plan, "plan", None)])
        self._emit(where, [
            ("query", "query", query, "memref", False),
            ("cache", "cache", cache, "record_cache", False),
            ("block_table", "block_table", block_table, "memref", True),
            ("seq_lens", "seq_lens", seq_lens, "memref", True),
            ("query_start", "query_start", query_start, "memref", False),
            ("outer_scale", "outer_scale", outer_scale, "memref", False),
            ("out", "outs", out, "memref", True)], attributes)

    @_rejects_bad_calls(IRTypeError, "pattn.rescale_view")
    def rescale_view(self, source: Value, to: Union[Type, str], *,
                     name: Optional[str] = None) -> Value:
        """``pattn.rescale_view``: the channel-scaled cache ``source`` read
        at another granularity; ``to`` is the result's cache type or just
        its scale (``"tensor"``, ``"none"``)."""
        where = "pattn.rescale_view"
        self._use(where, "source", source, "cache")
        if isinstance(to, str):
            to = source.type.resolved().replace(
                scale=_choice(where, "to", to, SCALES))
        elif not isinstance(to, Type) or not isinstance(to.resolved(),
                                                        CacheType):
            raise IRTypeError(f"{where}: argument 'to' must be an "
                              "ir.cache(...) type or a scale granularity, "
                              f"got {_describe(to)}")
        result = self._result(where, name, to)
        self._append(where, {"source": source}, {}, (result,),
                     f"  {result} = {where} {source} : {source.type} to {to}")
        return result

    @_rejects_bad_calls(IRTypeError, "pattn.scale_normalizer")
    def scale_normalizer(self, scales: Value, out: Value, flag: Value, *,
                         softmax_scale: float) -> None:
        """``pattn.scale_normalizer``: the power-of-two normalizer of the
        channel table ``scales`` into ``out`` ([1], f32), ``flag`` ([1],
        i32) set to whether the table folds."""
        where = "pattn.scale_normalizer"
        self._emit(where, [
            ("scales", "scales", scales, "memref", False),
            ("out", "outs", out, "memref", True),
            ("flag", "flag", flag, "memref", False)],
            self._attributes(where, [
                ("softmax_scale", softmax_scale, "f32", None)]))

    @_rejects_bad_calls(IRTypeError, "pattn.fold_query")
    def fold_query(self, query: Value, scales: Value, normalizer: Value,
                   out: Value, exponents: Value, *,
                   num_heads: Optional[int] = None) -> None:
        """``pattn.fold_query``: ``query`` times the K channel ``scales``
        over ``normalizer``, row by row, into ``out`` with the row
        ``exponents``."""
        where = "pattn.fold_query"
        heads = self._num_heads(where, num_heads, query)
        self._emit(where, [
            ("query", "query", query, "memref", False),
            ("scales", "scales", scales, "memref", True),
            ("normalizer", "normalizer", normalizer, "memref", False),
            ("out", "outs", out, "memref", True),
            ("exponents", "exponents", exponents, "memref", False)],
            self._attributes(where, [("num_heads", heads, "i64", None)]))

    # -- printing ------------------------------------------------------------

    def __str__(self) -> str:
        args = []
        for value, pattn_name in self._args:
            attribute = (f' {{pattn.name = "{value.name}"}}' if pattn_name
                         else "")
            args.append(f"{value}: {value.type}{attribute}")
        head = (f"func.func @{self._name}(\n    " + ",\n    ".join(args) +
                ") {" if args else f"func.func @{self._name}() {{")
        return "\n".join([head] + [str(op) for op in self._ops] +
                         ["  return", "}"]) + "\n"


# ---------------------------------------------------------------------------
# Modules
# ---------------------------------------------------------------------------


class Module:
    """A module of functions. ``str()`` prints the ``comment`` (as ``//``
    lines), the type aliases (those made with :meth:`alias`, in order, then
    any other its functions use), the constant globals of
    :meth:`Function.constant_table`, and the functions, in order.
    ``pattn.compile(module, ...)`` compiles that text."""

    @_rejects_bad_calls(IRTypeError, "ir.Module")
    def __init__(self, comment: Optional[str] = None):
        if comment is not None and not isinstance(comment, str):
            raise IRTypeError(f"ir.Module: argument 'comment' must be a str, "
                              f"got {_describe(comment)}")
        self._comment = comment
        self._aliases: Dict[str, Alias] = {}
        self._functions: Dict[str, Function] = {}

    @property
    def functions(self) -> Tuple[Function, ...]:
        return tuple(self._functions.values())

    def __getitem__(self, name: str) -> Function:
        return self._functions[name]

    @_rejects_bad_calls(IRTypeError, "ir.Module.alias")
    def alias(self, name: str, type: Type) -> Alias:
        """Defines ``!name = type`` and returns the alias (which stands for
        ``type`` anywhere a type goes). Defining a name again with the same
        type returns the same alias."""
        aliases = Alias(name, type)._aliases()  # those inside ``type`` first
        for alias in aliases:
            existing = self._aliases.get(alias.name, alias)
            if existing.definition() != alias.definition():
                raise IRError(f"ir.Module.alias: !{alias.name} is already "
                              f"{existing.type}")
        for alias in aliases:
            self._aliases.setdefault(alias.name, alias)
        return self._aliases[name]

    @_rejects_bad_calls(IRTypeError, "ir.Module.function")
    def function(self, name: str) -> Function:
        """A new function ``@name``, added to the module."""
        return self.add(Function(name))

    @_rejects_bad_calls(IRTypeError, "ir.Module.add")
    def add(self, function: Function) -> Function:
        """Adds ``function`` (a :class:`Function`) and returns it."""
        if not isinstance(function, Function):
            raise IRTypeError("ir.Module.add: argument 'function' must be an "
                              f"ir.Function, got {_describe(function)}")
        if function.name in self._functions:
            raise IRError(f"ir.Module.add: the module already has a function "
                          f"@{function.name}")
        self._functions[function.name] = function
        return function

    @property
    def aliases(self) -> Tuple[Alias, ...]:
        """Every alias the text defines, in order."""
        aliases = dict(self._aliases)
        for function in self._functions.values():
            for alias in function._aliases.values():
                existing = aliases.setdefault(alias.name, alias)
                if existing.definition() != alias.definition():
                    raise IRError(f"ir.Module: @{function.name} uses "
                                  f"{alias.definition()}, but the module "
                                  f"has {existing.definition()}")
        return tuple(aliases.values())

    def _globals(self) -> List[str]:
        definitions: Dict[str, Tuple[str, str]] = {}
        for function in self._functions.values():
            for symbol, text in function._globals.items():
                owner, existing = definitions.setdefault(
                    symbol, (function.name, text))
                if existing != text:
                    raise IRError(f"ir.Module: @{owner} and @{function.name} "
                                  f"define the constant table @{symbol} "
                                  "differently")
        return [text for _, text in definitions.values()]

    def __str__(self) -> str:
        head = []
        if self._comment is not None:
            head += [f"// {line}".rstrip() for line in
                     self._comment.split("\n")]
        head += [alias.definition() for alias in self.aliases]
        text = "\n".join(head) + "\n\n" if head else ""
        definitions = self._globals()
        if definitions:
            text += "".join(line + "\n" for line in definitions) + "\n"
        return text + "\n".join(str(f) for f in self._functions.values())

    def __repr__(self) -> str:
        names = ", ".join(f"@{name}" for name in self._functions)
        return f"<ir.Module {names or '(empty)'}>"

    @_rejects_bad_calls(IRTypeError, "ir.Module.verify")
    def verify(self, opt: Optional[Union[str, "os.PathLike[str]"]] = None
               ) -> None:
        """Parses and verifies the module with ``pattn-opt`` (``opt``, else
        :func:`pattn.find_opt`'s); raises :class:`VerifyError` with its
        diagnostics if the dialect rejects it."""
        from ._compiler import find_opt
        executable = find_opt(opt)
        command = [executable, "-", "-o", os.devnull,
                   "--mlir-print-op-on-diagnostic=false"]
        try:
            result = subprocess.run(command, input=str(self),
                                    capture_output=True, text=True,
                                    check=False)
        except OSError as error:
            raise VerifyError(f"cannot run {executable}: {error}",
                              command=command) from None
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines()
                      if ": error: " in line]
            first = (errors[0] if errors else
                     f"exit status {result.returncode}")
            raise VerifyError(f"pattn-opt rejected the module: {first}\n"
                              f"{result.stderr.rstrip()}", command=command,
                              returncode=result.returncode,
                              stderr=result.stderr)
