"""Pure-numpy reference of pattn's numerics and attention (SPEC §2-5).

This module is the yardstick the GPU tests and the benchmark measure pattn
against. It has two halves:

* **Bit-exact encoders** that reproduce ``pattn::numerics``
  (include/pattn/Numerics/Numerics.h, lib/Numerics/*.cpp) byte for byte:
  the minifloat codecs, every cache encoding in nhd and hnd page layouts,
  per-token scale derivation, the three MLA record presets and the fold
  arithmetic. Where the C++ library computes in fp32, so does this module
  (``np.float32``); minifloat rounding is done once, half to even, on the
  exact value, exactly like lib/Numerics/Minifloat.cpp.
* **float64 attention** over dequantized caches, following SPEC §4:
  ``paged_attention_ref`` and ``mla_attention_ref``, and the float64
  rotary embedding with RMS QK-norm (``rotary_ref``, ``rotary_positions``).

It depends on numpy only, so CPU-only CI can test it, and it never imports
the rest of the ``pattn`` package.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np

__all__ = [
    # rotary embedding
    "rotary_positions", "rotary_ref",
    # minifloats
    "Minifloat", "F16", "BF16", "E4M3", "E5M2", "E2M1",
    "encode_minifloat", "decode_minifloat",
    "encode_f16", "decode_f16", "encode_bf16", "decode_bf16",
    "encode_e4m3", "decode_e4m3", "encode_e5m2", "decode_e5m2",
    "encode_e2m1", "decode_e2m1",
    # cache encodings
    "ENCODINGS", "GRANULARITIES", "MAX_CODE", "I4_EMPTY_BYTE", "row_bytes",
    "quantize_i8", "quantize_i4", "quantize_e4m3", "quantize_e5m2",
    "pack_i4", "unpack_i4", "token_scale",
    "encode_row", "decode_row", "encode_row_nvfp4", "decode_row_nvfp4",
    "PagedCache",
    # records
    "Lane", "RecordLayout", "RECORD_PRESETS", "RECORD_MODES",
    "encode_record", "decode_record", "RecordCache",
    # fold
    "ilogb", "fold_normalizer", "binade_span", "fold_legality",
    "fold_query_row", "FOLD_BINADE_BUDGET", "FOLD_ROW_FLUSH_BINADES",
    # attention
    "default_softmax_scale", "paged_attention_ref", "mla_attention_ref",
]

# ---------------------------------------------------------------------------
# Minifloat codecs (lib/Numerics/Minifloat.cpp)
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Minifloat:
    """A sign-magnitude binary float of 1 + exponent_bits + mantissa_bits bits.

    ``specials`` says how codes with an all-ones exponent field are spent:
    ``"ieee"`` (infinity and NaN: f16, bf16, e5m2), ``"all_ones_nan"`` (only
    the all-ones magnitude is NaN: e4m3fn) or ``"none"`` (every code is
    finite: e2m1). ``saturate`` selects what an overflow encodes to: the
    largest finite value (fp8/fp4 "satfinite") or infinity (IEEE).
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    specials: str
    saturate: bool
    max_finite_bits: int
    nan_bits: int

    @property
    def bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def sign_bit(self) -> int:
        return 1 << (self.exponent_bits + self.mantissa_bits)

    @property
    def max_finite(self) -> float:
        return float(decode_minifloat(self, self.max_finite_bits))


F16 = Minifloat("f16", 5, 10, 15, "ieee", True, 0x7BFF, 0x7E00)
BF16 = Minifloat("bf16", 8, 7, 127, "ieee", True, 0x7F7F, 0x7FC0)
E4M3 = Minifloat("e4m3", 4, 3, 7, "all_ones_nan", True, 0x7E, 0x7F)
E5M2 = Minifloat("e5m2", 5, 2, 15, "ieee", True, 0x7B, 0x7F)
# e2m1 has no NaN; a NaN input encodes as +0 (callers reject them earlier).
E2M1 = Minifloat("e2m1", 2, 1, 1, "none", True, 0x7, 0x0)


def decode_minifloat(fmt: Minifloat, bits) -> np.ndarray:
    """Decodes codes of ``fmt`` (any integer array) to float64, exactly."""
    bits = np.asarray(bits).astype(np.int64)
    exponent_mask = (1 << fmt.exponent_bits) - 1
    mantissa_mask = (1 << fmt.mantissa_bits) - 1
    negative = ((bits >> (fmt.exponent_bits + fmt.mantissa_bits)) & 1) != 0
    exponent_field = (bits >> fmt.mantissa_bits) & exponent_mask
    mantissa = bits & mantissa_mask

    subnormal = np.ldexp(mantissa.astype(np.float64),
                         np.int32(1 - fmt.bias - fmt.mantissa_bits))
    significand = (mantissa | (1 << fmt.mantissa_bits)).astype(np.float64)
    normal = np.ldexp(significand, (exponent_field - fmt.bias
                                    - fmt.mantissa_bits).astype(np.int32))
    magnitude = np.where(exponent_field == 0, subnormal, normal)
    if fmt.specials == "ieee":
        special = np.where(mantissa == 0, np.inf, np.nan)
        magnitude = np.where(exponent_field == exponent_mask, special,
                             magnitude)
    elif fmt.specials == "all_ones_nan":
        is_nan = (exponent_field == exponent_mask) & (mantissa == mantissa_mask)
        magnitude = np.where(is_nan, np.nan, magnitude)
    return np.where(negative, -magnitude, magnitude)


def encode_minifloat(fmt: Minifloat, x) -> np.ndarray:
    """Encodes ``x`` (converted to float64) to codes of ``fmt`` (uint32 array).

    One rounding, half to even, from the exact float64 value: the magnitude
    is counted in quanta of its binade (of the subnormals below the normal
    range), which is an exact power-of-two scaling, then rounded by
    ``np.rint``. Overflow is decided on the rounded value, as IEEE says.
    """
    x = np.asarray(x, dtype=np.float64)
    mbits = fmt.mantissa_bits
    min_exponent = 1 - fmt.bias
    sign = np.where(np.signbit(x), fmt.sign_bit, 0).astype(np.int64)
    magnitude = np.abs(x)
    finite_nonzero = np.isfinite(magnitude) & (magnitude != 0)
    safe = np.where(finite_nonzero, magnitude, 1.0)

    exponent = np.maximum(ilogb(safe), min_exponent).astype(np.int32)
    quanta = np.rint(np.ldexp(safe, mbits - exponent))
    rounded = np.ldexp(quanta, exponent - mbits)

    infinity_bits = ((1 << fmt.exponent_bits) - 1) << mbits
    overflow_bits = fmt.max_finite_bits if fmt.saturate else infinity_bits
    # `quanta` carries the implicit bit, so adding it to the exponent steps
    # counted from the subnormals covers subnormals, normals and a round-up
    # into the next binade alike.
    steps = (exponent.astype(np.int64) - min_exponent) << mbits
    code = sign | (steps + quanta.astype(np.int64))
    code = np.where(rounded > fmt.max_finite, sign | overflow_bits, code)
    code = np.where(magnitude == 0, sign, code)
    code = np.where(np.isinf(magnitude), sign | overflow_bits, code)
    code = np.where(np.isnan(x), fmt.nan_bits, code)
    return code.astype(np.uint32)


def ilogb(x) -> np.ndarray:
    """std::ilogb for finite nonzero values (float32 or float64), as int64."""
    _, exponent = np.frexp(np.asarray(x, dtype=np.float64))
    return exponent.astype(np.int64) - 1


def encode_f16(x) -> np.ndarray:
    return encode_minifloat(F16, x).astype(np.uint16)


def decode_f16(bits) -> np.ndarray:
    return decode_minifloat(F16, bits)


def encode_bf16(x) -> np.ndarray:
    return encode_minifloat(BF16, x).astype(np.uint16)


def decode_bf16(bits) -> np.ndarray:
    return decode_minifloat(BF16, bits)


def encode_e4m3(x) -> np.ndarray:
    return encode_minifloat(E4M3, x).astype(np.uint8)


def decode_e4m3(bits) -> np.ndarray:
    return decode_minifloat(E4M3, bits)


def encode_e5m2(x) -> np.ndarray:
    return encode_minifloat(E5M2, x).astype(np.uint8)


def decode_e5m2(bits) -> np.ndarray:
    return decode_minifloat(E5M2, bits)


def encode_e2m1(x) -> np.ndarray:
    """E2M1 codes in the low 4 bits (bit 3 is the sign)."""
    return encode_minifloat(E2M1, x).astype(np.uint8)


def decode_e2m1(bits) -> np.ndarray:
    """Reads the low 4 bits only, so packed bytes can be passed as they are."""
    return decode_minifloat(E2M1, np.asarray(bits).astype(np.int64) & 0xF)


# ---------------------------------------------------------------------------
# Element quantizers and rows (lib/Numerics/Encodings.cpp)
# ---------------------------------------------------------------------------

ENCODINGS = ("f16", "bf16", "i8", "f8e4m3", "f8e5m2", "i4", "nvfp4")
GRANULARITIES = ("none", "tensor", "channel", "token")

#: The largest code magnitude; a per-token scale is amax / MAX_CODE. For
#: nvfp4 it is 6 * 448: the outer scale maps amax onto the largest e4m3
#: group scale times the largest e2m1 code.
MAX_CODE = {"i8": 127.0, "i4": 7.0, "f8e4m3": 448.0, "f8e5m2": 57344.0,
            "nvfp4": 2688.0}

#: What a fresh, empty int4 page holds: two biased zeros.
I4_EMPTY_BYTE = 0x88
_I4_BIAS = 8
_NVFP4_GROUP = 16


def row_bytes(encoding: str, head_dim: int) -> int:
    """Bytes of one head row: D*2, D, or (D+1)/2 for packed 4-bit codes."""
    if encoding in ("f16", "bf16"):
        return head_dim * 2
    if encoding in ("i8", "f8e4m3", "f8e5m2"):
        return head_dim
    if encoding in ("i4", "nvfp4"):
        return (head_dim + 1) // 2
    raise ValueError(f"unknown encoding {encoding!r}")


def _f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def _quotient(x, scale) -> tuple[np.ndarray, np.ndarray]:
    """t = x / s in fp32, and where s == 0 (those codes are 0)."""
    x, scale = np.broadcast_arrays(_f32(x), _f32(scale))
    zero_scale = scale == 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = x / np.where(zero_scale, np.float32(1), scale)
    return t, zero_scale


def _quantize_integer(x, scale, lowest: float, highest: float) -> np.ndarray:
    # Clamping before rounding is equivalent (the bounds are integers) and
    # keeps an infinite t, from a tiny scale, in range.
    t, zero_scale = _quotient(x, scale)
    t = np.clip(t, np.float32(lowest), np.float32(highest))
    code = np.rint(t)  # float32 rint: round half to even
    code = np.where(zero_scale | np.isnan(t), 0, code)
    return code.astype(np.int8)


def quantize_i8(x, scale) -> np.ndarray:
    """clamp(x / s, -128, 127), RNE; s == 0 gives 0."""
    return _quantize_integer(x, scale, -128.0, 127.0)


def quantize_i4(x, scale) -> np.ndarray:
    """clamp(x / s, -8, 7), RNE, as signed codes (not yet biased)."""
    return _quantize_integer(x, scale, -8.0, 7.0)


def _quantize_minifloat(fmt: Minifloat, x, scale) -> np.ndarray:
    # The fp32 quotient widens to float64 exactly, so the encoder rounds once
    # more and only once; the saturating encoder is the clamp.
    t, zero_scale = _quotient(x, scale)
    return np.where(zero_scale, 0, encode_minifloat(fmt, t)).astype(np.uint8)


def quantize_e4m3(x, scale) -> np.ndarray:
    return _quantize_minifloat(E4M3, x, scale)


def quantize_e5m2(x, scale) -> np.ndarray:
    return _quantize_minifloat(E5M2, x, scale)


def pack_i4(codes) -> np.ndarray:
    """Packs signed int4 codes along the last axis, two per byte.

    Element 2i goes to the low nibble, each stored biased by +8; an odd count
    pads the last high nibble with 8 (the biased zero).
    """
    codes = np.asarray(codes).astype(np.int64)
    count = codes.shape[-1]
    biased = (codes + _I4_BIAS) & 0xF
    if count % 2:
        pad = np.full(codes.shape[:-1] + (1,), _I4_BIAS, dtype=np.int64)
        biased = np.concatenate([biased, pad], axis=-1)
    return (biased[..., 0::2] | (biased[..., 1::2] << 4)).astype(np.uint8)


def unpack_i4(packed, count: int) -> np.ndarray:
    """The inverse of pack_i4 for ``count`` elements: signed int8 codes."""
    packed = np.asarray(packed).astype(np.int64)
    nibbles = np.stack([packed & 0xF, packed >> 4], axis=-1)
    nibbles = nibbles.reshape(packed.shape[:-1] + (2 * packed.shape[-1],))
    return (nibbles[..., :count] - _I4_BIAS).astype(np.int8)


def token_scale(encoding: str, x) -> np.ndarray:
    """amax(|x|) / max_code over the last axis, in fp32 (0 for f16/bf16)."""
    amax = np.max(np.abs(_f32(x)), axis=-1, initial=np.float32(0))
    if encoding not in MAX_CODE:
        return np.zeros_like(amax)
    return (amax / np.float32(MAX_CODE[encoding])).astype(np.float32)


def _check_finite(x, what: str) -> None:
    if not np.all(np.isfinite(x)):
        raise ValueError(f"non-finite {what}")


def _check_scales(scale) -> None:
    scale = _f32(scale)
    if not np.all(np.isfinite(scale) & (scale >= 0)):
        raise ValueError("non-finite or negative scale")


def encode_row(encoding: str, x, scale=None) -> np.ndarray:
    """Encodes head rows (last axis = head_dim) of any non-nvfp4 encoding.

    ``scale`` broadcasts against ``x``: a scalar (tensor granularity), a
    [..., 1] column (token), or a [.., head_dim] table (channel). It is
    ignored for f16/bf16. Returns uint8 rows of ``row_bytes`` bytes (f16 and
    bf16 little-endian). Raises ValueError on non-finite input or scales,
    like the C++ encoder's error statuses.
    """
    x = _f32(x)
    _check_finite(x, "input")
    if encoding in ("f16", "bf16"):
        bits = encode_f16(x) if encoding == "f16" else encode_bf16(x)
        return bits.astype("<u2").view(np.uint8).reshape(
            x.shape[:-1] + (2 * x.shape[-1],))
    if scale is None:
        raise ValueError(f"{encoding} rows need a scale")
    _check_scales(scale)
    if encoding == "i8":
        return quantize_i8(x, scale).view(np.uint8)
    if encoding == "f8e4m3":
        return quantize_e4m3(x, scale)
    if encoding == "f8e5m2":
        return quantize_e5m2(x, scale)
    if encoding == "i4":
        return pack_i4(quantize_i4(x, scale))
    raise ValueError(f"encode_row does not take {encoding!r} (nvfp4 has "
                     "encode_row_nvfp4)")


def decode_row(encoding: str, row, head_dim: int, scale=None) -> np.ndarray:
    """Dequantizes rows: code * s computed in fp32, returned as float64."""
    row = np.asarray(row, dtype=np.uint8)
    if encoding in ("f16", "bf16"):
        bits = np.ascontiguousarray(row).view("<u2")
        return decode_f16(bits) if encoding == "f16" else decode_bf16(bits)
    if encoding == "i8":
        codes = row.view(np.int8).astype(np.float32)
    elif encoding == "f8e4m3":
        codes = decode_e4m3(row).astype(np.float32)
    elif encoding == "f8e5m2":
        codes = decode_e5m2(row).astype(np.float32)
    elif encoding == "i4":
        codes = unpack_i4(row, head_dim).astype(np.float32)
    else:
        raise ValueError(f"decode_row does not take {encoding!r}")
    with np.errstate(invalid="ignore", over="ignore"):
        return (codes * _f32(scale)).astype(np.float64)


def encode_row_nvfp4(x, outer) -> tuple[np.ndarray, np.ndarray]:
    """NVFP4 rows: per 16 elements sf = e4m3(amax_g / 6 / outer) (two fp32
    divisions in this order), codes = e2m1(x / (decode(sf) * outer)).

    ``outer`` is a scalar (tensor) or broadcasts against x[..., :1] (token).
    A zero group, a zero outer scale or a group scale that rounds to zero
    writes an all-zero group (codes and scale). Returns (codes [..., D/2],
    group_scales [..., D/16]) as uint8.
    """
    x = _f32(x)
    _check_finite(x, "input")
    _check_scales(outer)
    head_dim = x.shape[-1]
    if head_dim % _NVFP4_GROUP:
        raise ValueError("nvfp4 rows need a multiple of 16 elements")
    groups = x.reshape(x.shape[:-1] + (head_dim // _NVFP4_GROUP, _NVFP4_GROUP))
    outer = _f32(outer)
    # A per-row outer scale [..., 1] broadcasts against [..., groups, 16].
    outer_g = outer[..., None] if outer.ndim else outer
    amax = np.max(np.abs(groups), axis=-1, keepdims=True)
    live = (amax != 0) & (outer_g != 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        wanted = amax / np.float32(6) / np.where(live, outer_g, np.float32(1))
    scale_code = np.where(live, encode_e4m3(wanted), 0).astype(np.uint8)
    denominator = decode_e4m3(scale_code).astype(np.float32) * outer_g
    live &= denominator != 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = groups / np.where(live, denominator, np.float32(1))
    codes = np.where(live, encode_e2m1(t), 0).astype(np.int64)
    codes = codes.reshape(x.shape)
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    group_scales = np.where(live[..., 0], scale_code[..., 0], 0).astype(
        np.uint8)
    return packed, group_scales


def decode_row_nvfp4(codes, group_scales, outer) -> np.ndarray:
    """x = (e2m1 * e4m3(sf)) * outer in fp32, as float64."""
    codes = np.asarray(codes, dtype=np.uint8).astype(np.int64)
    nibbles = np.stack([codes & 0xF, codes >> 4], axis=-1).reshape(
        codes.shape[:-1] + (2 * codes.shape[-1],))
    values = decode_e2m1(nibbles).astype(np.float32)
    sf = decode_e4m3(np.asarray(group_scales, np.uint8)).astype(np.float32)
    sf = np.repeat(sf, _NVFP4_GROUP, axis=-1)
    outer = _f32(outer)
    with np.errstate(invalid="ignore", over="ignore"):
        return ((values * sf) * outer).astype(np.float64)


# ---------------------------------------------------------------------------
# Paged caches (SPEC §2-4: storage, write_cache, dequantization)
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class PagedCache:
    """The host mirror of one bound ``!pattn.cache``: its raw buffers.

    ``storage`` is uint8 with the shape the verifier derives from the type
    ([blocks, block_size, kv_heads, row] for nhd, [blocks, kv_heads,
    block_size, row] for hnd). ``group_scales`` (nvfp4 only) are raw e4m3
    bytes laid out like the storage with D/16 per row; ``token_scales``
    (``token`` granularity only) are f32 [blocks, block_size, kv_heads] in
    either layout.
    """

    encoding: str
    scale: str
    layout: str
    num_blocks: int
    block_size: int
    kv_heads: int
    head_dim: int
    storage: np.ndarray
    group_scales: Optional[np.ndarray] = None
    token_scales: Optional[np.ndarray] = None

    # -- shapes -----------------------------------------------------------

    def _paged_shape(self, last: int) -> tuple[int, ...]:
        if self.layout == "nhd":
            return (self.num_blocks, self.block_size, self.kv_heads, last)
        return (self.num_blocks, self.kv_heads, self.block_size, last)

    @property
    def storage_shape(self) -> tuple[int, ...]:
        return self._paged_shape(row_bytes(self.encoding, self.head_dim))

    @property
    def group_scale_shape(self) -> Optional[tuple[int, ...]]:
        if self.encoding != "nvfp4":
            return None
        return self._paged_shape(self.head_dim // _NVFP4_GROUP)

    @property
    def token_scale_shape(self) -> Optional[tuple[int, ...]]:
        if self.scale != "token":
            return None
        return (self.num_blocks, self.block_size, self.kv_heads)

    @classmethod
    def allocate(cls, encoding: str, scale: str, layout: str, num_blocks: int,
                 block_size: int, kv_heads: int, head_dim: int,
                 rng: Optional[np.random.Generator] = None) -> "PagedCache":
        """A cache whose buffers hold random bytes (stale pages may hold
        anything), or zeros when ``rng`` is None."""
        cache = cls(encoding, scale, layout, num_blocks, block_size, kv_heads,
                    head_dim, storage=np.empty(0, np.uint8))

        def fill(shape):
            if rng is None:
                return np.zeros(shape, np.uint8)
            return rng.integers(0, 256, size=shape, dtype=np.uint8)

        cache.storage = fill(cache.storage_shape)
        if cache.group_scale_shape is not None:
            cache.group_scales = fill(cache.group_scale_shape)
        if cache.token_scale_shape is not None:
            cache.token_scales = fill(
                cache.token_scale_shape + (4,)).view(np.float32)[..., 0]
        return cache

    def copy(self) -> "PagedCache":
        return dataclasses.replace(
            self, storage=self.storage.copy(),
            group_scales=None if self.group_scales is None
            else self.group_scales.copy(),
            token_scales=None if self.token_scales is None
            else self.token_scales.copy())

    def _nhd(self, buffer: np.ndarray) -> np.ndarray:
        """A [blocks, block_size, kv_heads, X] view of a paged buffer."""
        return buffer if self.layout == "nhd" else buffer.transpose(0, 2, 1, 3)

    # -- write_cache ------------------------------------------------------

    def write(self, values, slots, scale=None) -> None:
        """``pattn.write_cache``: quantizes values [tokens, kv_heads, D] into
        the slots (block * block_size + offset; -1 skips the token).

        ``scale`` is the [1] tensor scale, the [kv_heads, D] channel table,
        or nvfp4's tensor outer scale; ``token`` granularity derives
        s = amax / max_code per (token, kv_head) and stores it. Nothing is
        written if any row is rejected.
        """
        values = _f32(values)
        slots = np.asarray(slots).astype(np.int64).reshape(-1)
        if values.shape != (slots.size, self.kv_heads, self.head_dim):
            raise ValueError(
                f"values shape {values.shape} does not match "
                f"[{slots.size}, {self.kv_heads}, {self.head_dim}]")
        capacity = self.num_blocks * self.block_size
        if np.any((slots < -1) | (slots >= capacity)):
            raise ValueError("slot out of range")
        keep = slots >= 0
        x = values[keep]
        blocks, offsets = np.divmod(slots[keep], self.block_size)

        if self.scale == "token":
            s = token_scale(self.encoding, x)  # [tokens, kv_heads]
            row_scale = s[..., None]
        elif self.scale in ("tensor", "channel"):
            if scale is None:
                raise ValueError(f"{self.scale} scales need a scale operand")
            table = _f32(scale)
            row_scale = table.reshape(()) if self.scale == "tensor" else \
                table.reshape(self.kv_heads, self.head_dim)
        else:  # `none`: codes at unit scale (f16/bf16 take no scale)
            row_scale = None if self.encoding in ("f16", "bf16") else \
                np.float32(1)

        # Encode everything first: a rejected row raises before any write.
        if self.encoding == "nvfp4":
            codes, groups = encode_row_nvfp4(x, row_scale)
            self._nhd(self.group_scales)[blocks, offsets] = groups
        else:
            codes = encode_row(self.encoding, x, row_scale)
        self._nhd(self.storage)[blocks, offsets] = codes
        if self.scale == "token":
            self.token_scales[blocks, offsets] = s

    # -- dequantization ---------------------------------------------------

    def dequantize(self, scale=None) -> np.ndarray:
        """Every slot dequantized as float64 [blocks, block_size, kv_heads, D]
        (x = code * s in fp32). Stale bytes decode to whatever they mean,
        NaN included; attention only reads the slots it visits."""
        rows = self._nhd(self.storage)
        if self.scale == "token":
            s = self.token_scales[..., None]
        elif self.scale == "tensor":
            s = _f32(scale).reshape(())
        elif self.scale == "channel":
            s = _f32(scale).reshape(self.kv_heads, self.head_dim)
        else:
            s = np.float32(1)
        if self.encoding == "nvfp4":
            return decode_row_nvfp4(rows, self._nhd(self.group_scales), s)
        return decode_row(self.encoding, rows, self.head_dim, s)


# ---------------------------------------------------------------------------
# MLA records (lib/Numerics/Records.cpp)
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Lane:
    name: str
    element: str  # f32, bf16, e4m3, e2m1
    count: int
    offset: int
    scale_lane: str = ""

    @property
    def nbytes(self) -> int:
        bits = {"f32": 32, "f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8,
                "i8": 8, "e2m1": 4}[self.element]
        return self.count * bits // 8


@dataclasses.dataclass(frozen=True)
class RecordLayout:
    name: str
    nbytes: int
    lanes: tuple[Lane, ...]

    def lane(self, name: str) -> Optional[Lane]:
        return next((lane for lane in self.lanes if lane.name == name), None)


RECORD_PRESETS = {
    # [0,512) latent, [512,528) one scale per 128 values, [528,656) rope.
    "fp8_ds_mla": RecordLayout("fp8_ds_mla", 656, (
        Lane("latent", "e4m3", 512, 0, "latent_scale"),
        Lane("latent_scale", "f32", 4, 512),
        Lane("rope", "bf16", 64, 528),
    )),
    # [0,256) latent, [256,288) group scales, [288,304) pad, [304,432) rope.
    "nvfp4_ds_mla": RecordLayout("nvfp4_ds_mla", 432, (
        Lane("latent", "e2m1", 512, 0, "latent_scale"),
        Lane("latent_scale", "e4m3", 32, 256),
        Lane("rope", "bf16", 64, 304),
    )),
    # As above to 288, rope scale, token scale, [296,304) pad, e4m3 rope.
    "nvfp4_ds_mla_fp8_rope": RecordLayout("nvfp4_ds_mla_fp8_rope", 368, (
        Lane("latent", "e2m1", 512, 0, "latent_scale"),
        Lane("latent_scale", "e4m3", 32, 256),
        Lane("rope_scale", "f32", 1, 288),
        Lane("token_scale", "f32", 1, 292),
        Lane("rope", "e4m3", 64, 304, "rope_scale"),
    )),
}

#: The scale modes each preset may be written in (the mode is in the type).
RECORD_MODES = {
    "fp8_ds_mla": ("none",),
    "nvfp4_ds_mla": ("tensor",),
    "nvfp4_ds_mla_fp8_rope": ("tensor", "token"),
}

_LATENT, _ROPE = 512, 64


def _lane_bytes(layout: RecordLayout, records: np.ndarray, name: str):
    lane = layout.lane(name)
    return records[..., lane.offset:lane.offset + lane.nbytes]


def _f32_bytes(values) -> np.ndarray:
    values = _f32(values)
    return np.ascontiguousarray(values.astype("<f4")).view(np.uint8).reshape(
        values.shape[:-1] + (4 * values.shape[-1],))


def _bytes_f32(raw) -> np.ndarray:
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    return raw.view("<f4").astype(np.float32)


def _check_record_call(preset: str, mode: str) -> RecordLayout:
    if preset not in RECORD_PRESETS:
        raise ValueError(f"unknown record preset {preset!r}")
    if mode not in RECORD_MODES[preset]:
        raise ValueError(f"{preset} cannot be written in {mode!r} mode")
    return RECORD_PRESETS[preset]


def encode_record(preset: str, mode: str, latent, rope,
                  outer_scale=None) -> np.ndarray:
    """Encodes tokens' latent [..., 512] and rope [..., 64] into records
    [..., bytes]. Every byte is written (pads are zero).

    * fp8_ds_mla: latent tile i (128 values) has scale amax_i / 448 (fp32)
      at 512 + 4i and e4m3 codes of x / scale; the rope is bf16.
    * nvfp4 presets: the latent is an nvfp4 row with the tensor outer scale
      ``outer_scale`` (tensor mode) or s_t = token_amax / 2688 stored at
      [292, 296) (token mode); nvfp4_ds_mla keeps a bf16 rope, while
      nvfp4_ds_mla_fp8_rope stores rope_amax / 448 at [288, 292) and e4m3
      rope codes of v / rope_scale.
    """
    layout = _check_record_call(preset, mode)
    latent, rope = _f32(latent), _f32(rope)
    if latent.shape[-1] != _LATENT or rope.shape[-1] != _ROPE or \
            latent.shape[:-1] != rope.shape[:-1]:
        raise ValueError("records take latent [..., 512] and rope [..., 64]")
    _check_finite(latent, "latent")
    _check_finite(rope, "rope")
    records = np.zeros(latent.shape[:-1] + (layout.nbytes,), np.uint8)

    # Rope lane: bf16 as is, or e4m3 with its own amax / 448 scale.
    if layout.lane("rope").element == "bf16":
        _lane_bytes(layout, records, "rope")[...] = encode_row("bf16", rope)
    else:
        rope_scale = token_scale("f8e4m3", rope)[..., None]
        _lane_bytes(layout, records, "rope_scale")[...] = _f32_bytes(rope_scale)
        _lane_bytes(layout, records, "rope")[...] = encode_row(
            "f8e4m3", rope, rope_scale)

    if preset == "fp8_ds_mla":
        tiles = latent.reshape(latent.shape[:-1] + (4, 128))
        tile_scales = token_scale("f8e4m3", tiles)  # [..., 4]
        _lane_bytes(layout, records, "latent_scale")[...] = _f32_bytes(
            tile_scales)
        codes = encode_row("f8e4m3", tiles, tile_scales[..., None])
        _lane_bytes(layout, records, "latent")[...] = codes.reshape(
            latent.shape[:-1] + (_LATENT,))
        return records

    if mode == "token":
        outer = token_scale("nvfp4", latent)[..., None]
        _lane_bytes(layout, records, "token_scale")[...] = _f32_bytes(outer)
    else:
        if outer_scale is None:
            raise ValueError("tensor-mode records need an outer scale")
        outer = _f32(outer_scale).reshape(())
    codes, groups = encode_row_nvfp4(latent, outer)
    _lane_bytes(layout, records, "latent")[...] = codes
    _lane_bytes(layout, records, "latent_scale")[...] = groups
    return records


def decode_record(preset: str, mode: str, records,
                  outer_scale=None) -> tuple[np.ndarray, np.ndarray]:
    """Decodes records [..., bytes] written with the same preset and mode
    into float64 (latent [..., 512], rope [..., 64])."""
    layout = _check_record_call(preset, mode)
    records = np.asarray(records, dtype=np.uint8)
    if layout.lane("rope").element == "bf16":
        rope = decode_row("bf16", _lane_bytes(layout, records, "rope"), _ROPE)
    else:
        rope_scale = _bytes_f32(_lane_bytes(layout, records, "rope_scale"))
        rope = decode_row("f8e4m3", _lane_bytes(layout, records, "rope"), _ROPE,
                          rope_scale)

    if preset == "fp8_ds_mla":
        scales = _bytes_f32(_lane_bytes(layout, records, "latent_scale"))
        codes = _lane_bytes(layout, records, "latent").reshape(
            records.shape[:-1] + (4, 128))
        latent = decode_row("f8e4m3", codes, 128, scales[..., None])
        return latent.reshape(records.shape[:-1] + (_LATENT,)), rope

    if mode == "token":
        outer = _bytes_f32(_lane_bytes(layout, records, "token_scale"))
    else:
        outer = _f32(outer_scale).reshape(())
    latent = decode_row_nvfp4(_lane_bytes(layout, records, "latent"),
                              _lane_bytes(layout, records, "latent_scale"),
                              outer)
    return latent, rope


@dataclasses.dataclass
class RecordCache:
    """The host mirror of a ``!pattn.record_cache``: storage [blocks,
    block_size, record_bytes] of uint8."""

    preset: str
    mode: str
    num_blocks: int
    block_size: int
    storage: np.ndarray

    @property
    def layout(self) -> RecordLayout:
        return RECORD_PRESETS[self.preset]

    @classmethod
    def allocate(cls, preset: str, mode: str, num_blocks: int,
                 block_size: int,
                 rng: Optional[np.random.Generator] = None) -> "RecordCache":
        _check_record_call(preset, mode)
        shape = (num_blocks, block_size, RECORD_PRESETS[preset].nbytes)
        storage = np.zeros(shape, np.uint8) if rng is None else rng.integers(
            0, 256, size=shape, dtype=np.uint8)
        return cls(preset, mode, num_blocks, block_size, storage)

    def copy(self) -> "RecordCache":
        return dataclasses.replace(self, storage=self.storage.copy())

    def write(self, latent, rope, slots, outer_scale=None) -> None:
        """``pattn.write_record``: a record per token at slots[t] (-1 skips)."""
        slots = np.asarray(slots).astype(np.int64).reshape(-1)
        if np.any((slots < -1) | (slots >= self.num_blocks * self.block_size)):
            raise ValueError("slot out of range")
        keep = slots >= 0
        records = encode_record(self.preset, self.mode, _f32(latent)[keep],
                                _f32(rope)[keep], outer_scale)
        blocks, offsets = np.divmod(slots[keep], self.block_size)
        self.storage[blocks, offsets] = records

    def dequantize(self, outer_scale=None) -> tuple[np.ndarray, np.ndarray]:
        """(latent [blocks, bs, 512], rope [blocks, bs, 64]) as float64."""
        with np.errstate(all="ignore"):
            return decode_record(self.preset, self.mode, self.storage,
                                 outer_scale)


# ---------------------------------------------------------------------------
# Fold arithmetic (lib/Numerics/Fold.cpp, SPEC §5)
# ---------------------------------------------------------------------------

_MIN_FOLD_EXPONENT = -126


def _max_fold_exponent(softmax_scale: float) -> int:
    bound = 126 - int(ilogb(max(np.float32(softmax_scale), np.float32(1.0))))
    return max(bound, _MIN_FOLD_EXPONENT)


def fold_normalizer(scales, softmax_scale: float) -> tuple[int, np.float32]:
    """(exponent, N): N = 2^(ilogb(m)+1) with m = max |s| over the finite
    entries (N = 1 when m = 0), the exponent clamped to
    [-126, 126 - ilogb(max(softmax_scale, 1))]. Raises on a non-finite
    entry (the C++ library then reports NonFiniteScale and N = 1)."""
    scales = _f32(scales).reshape(-1)
    if not np.all(np.isfinite(scales)):
        raise ValueError("non-finite entry in a channel scale table")
    m = np.max(np.abs(scales)) if scales.size else np.float32(0)
    if m == 0:
        return 0, np.float32(1)
    exponent = int(np.clip(int(ilogb(m)) + 1, _MIN_FOLD_EXPONENT,
                           _max_fold_exponent(softmax_scale)))
    return exponent, np.float32(math.ldexp(1.0, exponent))


FOLD_BINADE_BUDGET = 24


def binade_span(scales) -> Optional[int]:
    """ilogb(max |s|) - ilogb(min nonzero |s|) over finite entries."""
    scales = _f32(scales).reshape(-1)
    live = scales[np.isfinite(scales) & (scales != 0)]
    if live.size == 0:
        return None
    binades = ilogb(np.abs(live))
    return int(binades.max() - binades.min())


def fold_legality(scales, softmax_scale: float) -> str:
    """'legal', 'nonfinite' or 'too_wide' (> 24 binades): the predicate of
    a static fold and of the device-side guard of a dynamic one. A clamped
    normalizer folds (the row exponents absorb |s / N| > 1)."""
    scales = _f32(scales).reshape(-1)
    if not np.all(np.isfinite(scales)):
        return "nonfinite"
    if (binade_span(scales) or 0) > FOLD_BINADE_BUDGET:
        return "too_wide"
    return "legal"


FOLD_ROW_FLUSH_BINADES = 126


def _rounded_binade(x: float) -> int:
    """The binade of nonzero x rounded to 24 significant bits (RN)."""
    binade = math.frexp(abs(x))[1] - 1
    mantissa = round(math.ldexp(abs(x), 23 - binade))  # ties to even
    return binade + 1 if mantissa == 1 << 24 else binade


def fold_query_row(q, scales, normalizer, dtype: str = "f16"):
    """One folded query row (lib/Numerics/Fold.cpp foldQueryRow): with p =
    q * s / N (exact in float64), e = the largest binade of the nonzero p
    rounded to 24 bits (0 if none), returns (bits of T(p * 2^-e) rounded
    once, e); products more than 126 binades below the largest are zeros
    of their sign. The logits of the row are multiplied by 2^e."""
    q = np.asarray(q, dtype=np.float64).reshape(-1)
    scales = _f32(scales).astype(np.float64).reshape(-1)
    n_exp = math.frexp(float(_f32(normalizer)))[1] - 1
    products = [math.ldexp(float(a) * float(b), -n_exp)
                for a, b in zip(q, scales)]
    binades = [_rounded_binade(p) if p != 0 else None for p in products]
    live = [b for b in binades if b is not None]
    e = max(live) if live else 0
    folded = np.array([
        math.ldexp(p, -e) if b is not None and b - e >= -FOLD_ROW_FLUSH_BINADES
        else math.copysign(0.0, p)
        for p, b in zip(products, binades)], dtype=np.float64)
    bits = encode_f16(folded) if dtype == "f16" else encode_bf16(folded)
    return bits, e


# ---------------------------------------------------------------------------
# Attention (SPEC §4), float64
# ---------------------------------------------------------------------------


def default_softmax_scale(head_dim: int) -> float:
    """1 / sqrt(head_dim) computed in fp32, as the compiler does."""
    return float(np.float32(1.0) / np.sqrt(np.float32(head_dim)))


#: Query rows the reference scores at once (bounds its memory on prompts).
_QUERY_ROWS_PER_CHUNK = 64


def paged_attention_ref(q, K, V, block_table, seq_lens, query_start=None,
                        num_heads: Optional[int] = None,
                        softmax_scale: Optional[float] = None,
                        softcap: float = 0.0, window: int = -1,
                        sinks=None, out_scale=None) -> np.ndarray:
    """``pattn.paged_attention`` in float64.

    q: [tokens, num_heads, D]; K: [blocks, block_size, kv_heads, D] and
    V: [blocks, block_size, kv_heads, Dv] (dequantized, logical nhd order);
    block_table: [batch, max_blocks] (-1 = unmapped: those keys are masked);
    seq_lens: [batch] kv lengths including the new tokens; query_start:
    [batch + 1] or None (one query token per sequence).

    Query token i of a sequence with n query tokens and kv length L sits at
    position L - n + i and sees keys at positions <= its own (causal among
    the new tokens); a window W keeps keys at positions > qpos - W. Logits
    are softmax_scale * q.k, then softcap * tanh(logits / softcap) when
    softcap > 0. A sink adds exp(sink - max) to the denominator. Rows with
    no visible key (zero length, fully masked) are zeros. ``out_scale``
    [kv_heads, Dv] multiplies the output (a V channel scale moved there).
    """
    q = np.asarray(q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    V = np.asarray(V, dtype=np.float64)
    block_table = np.asarray(block_table).astype(np.int64)
    seq_lens = np.asarray(seq_lens).astype(np.int64).reshape(-1)
    tokens, heads, head_dim = q.shape
    if num_heads is not None and num_heads != heads:
        raise ValueError(f"query has {heads} heads, num_heads is {num_heads}")
    _, block_size, kv_heads, _ = K.shape
    if heads % kv_heads:
        raise ValueError("num_heads must be a multiple of kv_heads")
    g = heads // kv_heads
    batch = seq_lens.size
    if query_start is None:
        if tokens != batch:
            raise ValueError("without query_start each sequence has one token")
        starts = np.arange(batch + 1)
    else:
        starts = np.asarray(query_start).astype(np.int64).reshape(-1)
    scale = float(softmax_scale if softmax_scale is not None
                  else default_softmax_scale(head_dim))
    sink = None if sinks is None else np.asarray(sinks, np.float64).reshape(
        kv_heads, g, 1)

    out = np.zeros((tokens, heads, V.shape[-1]))
    for b in range(batch):
        first, n, length = int(starts[b]), int(starts[b + 1] - starts[b]), \
            int(seq_lens[b])
        if n <= 0 or length <= 0:
            continue
        positions = np.arange(length)
        blocks = block_table[b, positions // block_size]
        mapped = blocks >= 0
        key_pos = positions[mapped]
        rows = (blocks[mapped], key_pos % block_size)
        keys, values = K[rows], V[rows]  # [keys, kv_heads, D]
        # Query rows in chunks (a prompt has thousands): row i sits at
        # position length - n + i.
        for low in range(0, n, _QUERY_ROWS_PER_CHUNK):
            high = min(n, low + _QUERY_ROWS_PER_CHUNK)
            query_pos = length - n + np.arange(low, high)
            visible = key_pos[None, :] <= query_pos[:, None]
            if window > 0:
                visible &= key_pos[None, :] > (query_pos - window)[:, None]
            qi = q[first + low:first + high].reshape(-1, kv_heads, g,
                                                     head_dim)
            logits = scale * np.einsum("thgd,khd->thgk", qi, keys)
            if softcap > 0:
                logits = softcap * np.tanh(logits / softcap)
            mask = visible[:, None, None, :]
            logits = np.where(mask, logits, -np.inf)
            m = logits.max(axis=-1, keepdims=True, initial=-np.inf)
            if sink is not None:
                m = np.maximum(m, sink[None])
            # A row with no visible key (and no sink) has m = -inf: it gives
            # zeros, as do all fully masked rows.
            safe = np.where(np.isfinite(m), m, 0.0)
            p = np.where(mask, np.exp(logits - safe), 0.0)
            denominator = p.sum(axis=-1, keepdims=True)
            if sink is not None:
                denominator = denominator + np.exp(sink[None] - safe)
            o = np.einsum("thgk,khd->thgd", p, values)
            o = np.divide(o, denominator, out=np.zeros_like(o),
                          where=denominator > 0)
            o[~visible.any(axis=1)] = 0.0
            if out_scale is not None:
                o = o * np.asarray(out_scale, np.float64).reshape(
                    kv_heads, 1, -1)
            out[first + low:first + high] = o.reshape(high - low, heads, -1)
    return out


def mla_attention_ref(q, latent, rope, block_table, seq_lens,
                      query_start=None, num_heads: Optional[int] = None,
                      softmax_scale: Optional[float] = None) -> np.ndarray:
    """``pattn.mla_decode`` in float64: one shared KV head whose key is
    latent ‖ rope and whose value is the latent.

    q: [tokens, num_heads, L + R]; latent: [blocks, bs, L]; rope: [blocks,
    bs, R] (dequantized records). Returns [tokens, num_heads, L]. Without a
    softmax_scale it defaults to 1/sqrt(L + R), the key width.
    """
    latent = np.asarray(latent, np.float64)
    rope = np.asarray(rope, np.float64)
    keys = np.concatenate([latent, rope], axis=-1)[:, :, None, :]
    return paged_attention_ref(q, keys, latent[:, :, None, :], block_table,
                               seq_lens, query_start, num_heads=num_heads,
                               softmax_scale=softmax_scale)


def gather_sequence(cache_rows: np.ndarray, block_table_row: Sequence[int],
                    length: int) -> np.ndarray:
    """The rows of one sequence's first ``length`` positions, [length, ...]
    (helper for tests that compare against dense attention)."""
    block_size = cache_rows.shape[1]
    positions = np.arange(length)
    blocks = np.asarray(block_table_row)[positions // block_size]
    return cache_rows[blocks, positions % block_size]


# ---------------------------------------------------------------------------
# Rotary embedding and RMS QK-norm (pattn.rotary)
# ---------------------------------------------------------------------------


def rotary_positions(tokens: int, seq_lens=None, query_start=None,
                     positions=None, offset: int = 0) -> np.ndarray:
    """Each token's position as ``pattn.rotary`` takes it: ``positions[t]``,
    or the kv position it is appended at, ``seq_lens[b] - n_b + i``, plus
    ``offset`` (int64)."""
    if positions is not None:
        return np.asarray(positions, dtype=np.int64).reshape(tokens) + offset
    lengths = np.asarray(seq_lens, dtype=np.int64)
    if query_start is None:
        starts = np.arange(len(lengths) + 1, dtype=np.int64)
    else:
        starts = np.asarray(query_start, dtype=np.int64)
    out = np.empty(tokens, dtype=np.int64)
    for b in range(len(lengths)):
        n = starts[b + 1] - starts[b]
        out[starts[b]:starts[b + 1]] = lengths[b] - n + np.arange(n)
    return out + offset


def rotary_ref(x, cos, sin, positions, *, norm_weight=None,
               norm_epsilon: float = 1e-6, interleaved: bool = False,
               first_head: int = 0, heads: Optional[int] = None) -> np.ndarray:
    """``pattn.rotary`` in float64: heads ``first_head`` .. ``first_head +
    heads`` of ``x`` [tokens, H, D], RMS-normalized (``norm_weight`` [D],
    ``norm_epsilon`` as the op's f32), then the first R = 2 * cos.shape[1]
    channels rotated by ``cos``/``sin`` [max_position, R/2] at each token's
    position (neox pairs (i, i + R/2), or (2i, 2i + 1) when
    ``interleaved``). Returns [tokens, heads, D] float64, before the op's
    single rounding."""
    x = np.asarray(x, dtype=np.float64)
    heads = x.shape[1] - first_head if heads is None else heads
    rows = x[:, first_head:first_head + heads, :].copy()
    if norm_weight is not None:
        epsilon = float(np.float32(norm_epsilon))
        mean = np.mean(rows * rows, axis=-1, keepdims=True)
        rows = rows / np.sqrt(mean + epsilon) * np.asarray(
            norm_weight, dtype=np.float64)
    cos = np.asarray(cos, dtype=np.float64)
    sin = np.asarray(sin, dtype=np.float64)
    half = cos.shape[1]
    pos = np.asarray(positions, dtype=np.int64)
    c = cos[pos][:, None, :]
    s = sin[pos][:, None, :]
    if interleaved:
        a, b = rows[..., 0:2 * half:2].copy(), rows[..., 1:2 * half:2].copy()
        rows[..., 0:2 * half:2] = a * c - b * s
        rows[..., 1:2 * half:2] = b * c + a * s
    else:
        a, b = rows[..., :half].copy(), rows[..., half:2 * half].copy()
        rows[..., :half] = a * c - b * s
        rows[..., half:2 * half] = b * c + a * s
    return rows
