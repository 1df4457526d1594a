"""CPU tests of the numpy reference (python/pattn/reference.py).

The reference is what the GPU suite compares pattn against, so it is tested
here against the same vectors as the C++ numerics library
(unittests/Numerics/*Test.cpp), exhaustively where the domain is small, and
its attention against a naive dense softmax written with scalar loops.
"""

import importlib.util
import math
import pathlib
import struct
import sys

import pytest

try:
    import numpy as np
except ImportError as error:  # CI images without numpy skip, loudly
    pytest.skip(f"numpy is not installed ({error}); the reference tests "
                "need it", allow_module_level=True)


def _load_reference():
    """Loads python/pattn/reference.py by path: the reference is pure numpy
    and must be testable without the package's runtime loader."""
    path = pathlib.Path(__file__).resolve().parents[1] / "pattn" / \
        "reference.py"
    spec = importlib.util.spec_from_file_location("pattn_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ref = _load_reference()

FLT_MAX = float(np.finfo(np.float32).max)


def f32(x):
    return np.float32(x)


def f32_bits(x) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def decoded(fmt, code) -> float:
    return float(ref.decode_minifloat(fmt, code))


def encoded(fmt, x) -> int:
    return int(ref.encode_minifloat(fmt, x))


def definition(code: int, e_bits: int, m_bits: int, bias: int) -> float:
    """A minifloat's value from its fields, written independently of the
    reference (finite codes only)."""
    sign = -1.0 if code >> (e_bits + m_bits) & 1 else 1.0
    exponent = code >> m_bits & ((1 << e_bits) - 1)
    mantissa = code & ((1 << m_bits) - 1)
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - m_bits)
    return sign * (1 + mantissa / 2 ** m_bits) * 2.0 ** (exponent - bias)


# ---------------------------------------------------------------------------
# Minifloats: exhaustive round trips and round-half-to-even
# ---------------------------------------------------------------------------


def test_e4m3_all_256_codes():
    for code in range(256):
        value = decoded(ref.E4M3, code)
        if code & 0x7F == 0x7F:
            assert math.isnan(value), hex(code)
            continue
        assert value == definition(code, 4, 3, 7), hex(code)
        assert encoded(ref.E4M3, value) == code, hex(code)
    assert decoded(ref.E4M3, 0x7E) == 448.0
    assert decoded(ref.E4M3, 0x01) == 2.0 ** -9
    assert math.copysign(1, decoded(ref.E4M3, 0x80)) == -1
    assert encoded(ref.E4M3, math.nan) == 0x7F


def test_e5m2_all_256_codes():
    for code in range(256):
        value = decoded(ref.E5M2, code)
        if code & 0x7F > 0x7C:
            assert math.isnan(value), hex(code)
        elif code & 0x7F == 0x7C:
            # Infinities decode, but the saturating encoder maps them to max.
            assert value == (-math.inf if code & 0x80 else math.inf)
            assert encoded(ref.E5M2, value) == (code & 0x80) | 0x7B
        else:
            assert value == definition(code, 5, 2, 15), hex(code)
            assert encoded(ref.E5M2, value) == code, hex(code)
    assert decoded(ref.E5M2, 0x7B) == 57344.0
    assert decoded(ref.E5M2, 0x01) == 2.0 ** -16


def test_e2m1_all_16_codes():
    magnitudes = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    for code in range(16):
        expected = -magnitudes[code & 7] if code & 8 else magnitudes[code & 7]
        assert decoded(ref.E2M1, code) == expected
        assert decoded(ref.E2M1, code) == definition(code, 2, 1, 1)
        # Only the low nibble is read.
        assert float(ref.decode_e2m1(code | 0xA0)) == expected
        assert int(ref.encode_e2m1(decoded(ref.E2M1, code))) == code  # -0 too
    assert int(ref.encode_e2m1(math.nan)) == 0


def test_f16_matches_numpy_half_on_every_bit_pattern():
    bits = np.arange(1 << 16, dtype=np.uint16)
    native = bits.view(np.float16).astype(np.float64)
    ours = ref.decode_f16(bits)
    assert np.array_equal(np.isnan(ours), np.isnan(native))
    finite = ~np.isnan(native)
    assert np.array_equal(ours[finite], native[finite])
    # Every finite pattern encodes back to itself; infinities saturate.
    real = finite & ~np.isinf(native)
    assert np.array_equal(ref.encode_f16(ours[real]), bits[real])
    assert np.array_equal(ref.encode_f16([math.inf, -math.inf]),
                          [0x7BFF, 0xFBFF])
    assert np.all(ref.encode_f16(ours[~finite]) == 0x7E00)


def test_f16_encoder_matches_numpy_on_random_float32():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(200_000) *
         np.exp2(rng.uniform(-30, 18, 200_000))).astype(np.float32)
    # The encoder saturates (SPEC §2); clipping first and then rounding is
    # the same as rounding and then saturating, as 65504 is representable.
    native = np.clip(x, -65504, 65504).astype(np.float16).view(np.uint16)
    assert np.array_equal(ref.encode_f16(x), native)


def test_bf16_every_bit_pattern_is_the_top_half_of_an_fp32():
    bits = np.arange(1 << 16, dtype=np.uint32)
    with np.errstate(invalid="ignore"):  # NaN patterns
        as_f32 = (bits << 16).astype(np.uint32).view(np.float32).astype(
            np.float64)
    ours = ref.decode_bf16(bits)
    assert np.array_equal(np.isnan(ours), np.isnan(as_f32))
    finite = ~np.isnan(as_f32)
    assert np.array_equal(ours[finite], as_f32[finite])
    real = finite & ~np.isinf(as_f32)
    assert np.array_equal(ref.encode_bf16(ours[real]), bits[real])
    assert np.array_equal(ref.encode_bf16([math.inf, -math.inf]),
                          [0x7F7F, 0xFF7F])


def test_bf16_encoder_matches_the_rounding_bit_trick_on_float32():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(200_000) *
         np.exp2(rng.uniform(-120, 120, 200_000))).astype(np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    trick = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    assert np.array_equal(ref.encode_bf16(x), trick)


@pytest.mark.parametrize("fmt, value, code", [
    # e4m3: 1.0 is 0x38, 1.125 is 0x39
    (ref.E4M3, 1.0625, 0x38), (ref.E4M3, 1.1875, 0x3A),
    (ref.E4M3, float.fromhex("0x1.100001p+0"), 0x39),
    (ref.E4M3, 2.0 ** -10, 0x00), (ref.E4M3, 1.5 * 2.0 ** -10, 0x01),
    (ref.E4M3, 1.5 * 2.0 ** -9, 0x02), (ref.E4M3, 2.5 * 2.0 ** -9, 0x02),
    (ref.E4M3, 7.5 * 2.0 ** -9, 0x08), (ref.E4M3, -(2.0 ** -12), 0x80),
    (ref.E4M3, 464.0, 0x7E), (ref.E4M3, 1e6, 0x7E), (ref.E4M3, -1e6, 0xFE),
    (ref.E4M3, math.inf, 0x7E), (ref.E4M3, -math.inf, 0xFE),
    # e5m2
    (ref.E5M2, 1.125, 0x3C), (ref.E5M2, 1.375, 0x3E), (ref.E5M2, 61440.0, 0x7B),
    (ref.E5M2, 2.0 ** -17, 0x00), (ref.E5M2, 1.5 * 2.0 ** -16, 0x02),
    (ref.E5M2, 3.5 * 2.0 ** -16, 0x04), (ref.E5M2, -1e9, 0xFB),
    # e2m1: ties go to the even code
    (ref.E2M1, 0.25, 0x0), (ref.E2M1, 0.75, 0x2), (ref.E2M1, 1.25, 0x2),
    (ref.E2M1, 1.75, 0x4), (ref.E2M1, 2.5, 0x4), (ref.E2M1, 3.5, 0x6),
    (ref.E2M1, 5.0, 0x6), (ref.E2M1, -5.0, 0xE), (ref.E2M1, 7.0, 0x7),
    (ref.E2M1, -math.inf, 0xF),
    # f16: ties and the overflow boundary (max + half an ulp saturates, as
    # do infinities: a cache never stores one, SPEC §2)
    (ref.F16, 1 + 2.0 ** -11, 0x3C00), (ref.F16, 1 + 3 * 2.0 ** -11, 0x3C02),
    (ref.F16, 65504.0, 0x7BFF), (ref.F16, 65519.99, 0x7BFF),
    (ref.F16, 65520.0, 0x7BFF), (ref.F16, -1e30, 0xFBFF),
    (ref.F16, math.inf, 0x7BFF), (ref.BF16, 1e39, 0x7F7F),
    (ref.BF16, -math.inf, 0xFF7F), (ref.F16, 2.0 ** -25, 0x0000),
    (ref.F16, 3 * 2.0 ** -25, 0x0002),
])
def test_round_half_to_even_and_saturation(fmt, value, code):
    assert encoded(fmt, value) == code


def test_every_tie_between_neighbouring_codes_goes_to_the_even_one():
    for fmt, top in ((ref.E4M3, 0x7E), (ref.E5M2, 0x7B), (ref.E2M1, 0x7)):
        for code in range(top):
            low, high = decoded(fmt, code), decoded(fmt, code + 1)
            tie = (low + high) / 2
            expected = code if code % 2 == 0 else code + 1
            assert encoded(fmt, tie) == expected, (fmt.name, code)
            assert encoded(fmt, -tie) == expected | fmt.sign_bit


# ---------------------------------------------------------------------------
# Integer codes and int4 packing
# ---------------------------------------------------------------------------


def test_int8_clamps_and_rounds_half_to_even():
    cases = [(1000, 127), (-1000, -128), (127.5, 127), (-128.5, -128),
             (0.5, 0), (-0.5, 0), (1.5, 2), (2.5, 2), (-2.5, -2),
             (float.fromhex("0x1.000002p-1"), 1)]
    for x, code in cases:
        assert int(ref.quantize_i8(x, 1.0)) == code, x
    assert int(ref.quantize_i8(3.0, 0.5)) == 6
    assert int(ref.quantize_i8(1e30, 0.0)) == 0


def test_int8_rounds_the_fp32_quotient():
    # x / s in fp32 is exactly 1.5 (the exact quotient is just below): 2.
    x = f32(float.fromhex("0x1.800008p+0"))
    s = f32(float.fromhex("0x1.000006p+0"))
    assert float(x) / float(s) < 1.5 and x / s == f32(1.5)
    assert int(ref.quantize_i8(x, s)) == 2


def test_int4_packing_pattern():
    # -9..8 at scale 1: the ends clamp; biased nibbles 0 0 1 2 ... 15 15.
    row = ref.encode_row("i4", np.arange(-9, 9, dtype=np.float32), 1.0)
    assert row.tolist() == [0x00, 0x21, 0x43, 0x65, 0x87, 0xA9, 0xCB, 0xED,
                            0xFF]
    # Ties: codes 0 0 2 -2 2 -2, biased 8 8 10 6 10 6.
    ties = ref.encode_row("i4", [0.5, -0.5, 1.5, -1.5, 2.5, -2.5], 1.0)
    assert ties.tolist() == [0x88, 0x6A, 0x6A]
    # An odd count pads the high nibble with the biased zero.
    assert ref.encode_row("i4", [1, 2, 3], 1.0).tolist() == [0xA9, 0x8B]
    assert ref.pack_i4([0, 0]).tolist() == [ref.I4_EMPTY_BYTE]
    for x, code in [(-9, -8), (8, 7), (7.5, 7), (-8.5, -8)]:
        assert int(ref.quantize_i4(x, 1.0)) == code
    assert int(ref.quantize_i4(1.0, float.fromhex("0x1p-149"))) == 7  # t = inf


def test_int4_unpack_inverts_pack_for_every_byte():
    everything = np.arange(256, dtype=np.uint8)[:, None]
    codes = ref.unpack_i4(everything, 2)
    assert codes[:, 0].tolist() == [(b & 0xF) - 8 for b in range(256)]
    assert codes[:, 1].tolist() == [(b >> 4) - 8 for b in range(256)]
    assert np.array_equal(ref.pack_i4(codes), everything)


def test_every_8bit_code_round_trips_through_a_scaled_row():
    for encoding, fmt in (("f8e4m3", ref.E4M3), ("f8e5m2", ref.E5M2)):
        codes = np.array([c for c in range(256) if math.isfinite(
            decoded(fmt, c))], dtype=np.uint8)
        x = ref.decode_row(encoding, codes, codes.size, 0.25)
        assert np.array_equal(ref.encode_row(encoding, x, 0.25), codes)
    codes = np.arange(256, dtype=np.uint8)
    x = ref.decode_row("i8", codes, 256, 0.5)
    assert np.array_equal(ref.encode_row("i8", x, 0.5), codes)


def test_rejected_rows():
    with pytest.raises(ValueError):
        ref.encode_row("i8", [1.0, math.nan], 1.0)
    with pytest.raises(ValueError):
        ref.encode_row("i8", [1.0, 2.0], -1.0)
    with pytest.raises(ValueError):
        ref.encode_row_nvfp4(np.ones(16), math.inf)


# ---------------------------------------------------------------------------
# Token scales and nvfp4
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("encoding, max_code", [
    ("i8", 127), ("i4", 7), ("f8e4m3", 448), ("f8e5m2", 57344), ("nvfp4", 2688),
    ("f16", None), ("bf16", None)])
def test_token_scale_is_amax_over_max_code(encoding, max_code):
    x = np.array([0.5, -3.0, 2.0], np.float32)
    expected = f32(0) if max_code is None else f32(3.0) / f32(max_code)
    assert ref.token_scale(encoding, x) == expected
    assert ref.token_scale(encoding, np.zeros(8, np.float32)) == 0


# amax 10 at outer 0.5: sf = e4m3(10 / 6 / 0.5) = 3.25 (0x45), divisor 1.625.
HAND_GROUP = [10.0, -10.0, 1.625, 0.8125, 0.4, 2.4375, 4.0625, 5.6875, 8.125,
              -2.4375, 0.0, -0.8125, 3.25, 6.5, 9.75, -4.875]
HAND_CODES = [0xF7, 0x12, 0x30, 0x64, 0xB6, 0x90, 0x64, 0xD7]


def test_nvfp4_hand_computed_group():
    x = np.array(HAND_GROUP + [0.0] * 16, np.float32)
    codes, scales = ref.encode_row_nvfp4(x, 0.5)
    assert scales.tolist() == [0x45, 0x00]
    assert codes.tolist() == HAND_CODES + [0] * 8
    y = ref.decode_row_nvfp4(codes, scales, 0.5)
    multiples = [6, -6, 1, 0.5, 0, 1.5, 2, 4, 4, -1.5, 0, -0.5, 2, 4, 6, -3]
    assert y.tolist() == [m * 1.625 for m in multiples] + [0.0] * 16


def test_nvfp4_zero_groups_and_scales():
    x = np.array(HAND_GROUP, np.float32)
    codes, scales = ref.encode_row_nvfp4(x, 0.0)
    assert codes.tolist() == [0] * 8 and scales.tolist() == [0]
    # amax / 6 / outer = 2^-10 ties down to a zero group scale: zero group.
    x = np.zeros(16, np.float32)
    x[3], x[5] = 6 * 2.0 ** -10, -(2.0 ** -11)
    codes, scales = ref.encode_row_nvfp4(x, 1.0)
    assert codes.tolist() == [0] * 8 and scales.tolist() == [0]
    x[3] = 6 * 2.0 ** -9  # the smallest subnormal scale is kept
    codes, scales = ref.encode_row_nvfp4(x, 1.0)
    assert scales.tolist() == [0x01] and codes[1] == 0x70


def test_nvfp4_saturates_and_follows_the_fp32_operation_order():
    codes, scales = ref.encode_row_nvfp4(np.full(16, 6000.0, np.float32), 1.0)
    assert scales.tolist() == [0x7E] and codes.tolist() == [0x77] * 8
    # amax / 6 / outer is exactly the e4m3 tie 3.125 -> 3 (0x44); computing
    # amax / (6 * outer) would land above the tie.
    x = np.zeros(16, np.float32)
    x[0] = 1.125
    _, scales = ref.encode_row_nvfp4(x, 0.06)
    assert scales.tolist() == [0x44]
    # Decoding multiplies (e2m1 * sf) first, then the outer scale.
    y = ref.decode_row_nvfp4(np.array([0x03] + [0] * 7, np.uint8),
                             np.array([0x03], np.uint8), 0.001)
    assert y[0] == float.fromhex("0x1.26e97ap-17")


def test_nvfp4_token_outer_scale():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((5, 64)) * 3).astype(np.float32)
    outer = ref.token_scale("nvfp4", x)
    assert np.array_equal(outer, np.max(np.abs(x), -1) / f32(2688))
    codes, scales = ref.encode_row_nvfp4(x, outer[:, None])
    for row in range(5):  # same as encoding each row alone
        c, s = ref.encode_row_nvfp4(x[row], outer[row])
        assert np.array_equal(codes[row], c) and np.array_equal(scales[row], s)


# ---------------------------------------------------------------------------
# Paged caches: layouts, granularities, write_cache semantics
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["nhd", "hnd"])
@pytest.mark.parametrize("encoding, scale", [
    ("f16", "none"), ("bf16", "none"), ("i8", "tensor"), ("f8e4m3", "channel"),
    ("f8e5m2", "token"), ("i4", "channel"), ("i4", "token"),
    ("nvfp4", "tensor"), ("nvfp4", "token")])
def test_cache_write_places_rows_by_slot_and_layout(encoding, scale, layout):
    rng = np.random.default_rng(4)
    blocks, block_size, heads, dim = 3, 16, 2, 32
    cache = ref.PagedCache.allocate(encoding, scale, layout, blocks, block_size,
                                    heads, dim, rng)
    before = cache.copy()
    values = rng.uniform(-2, 2, (3, heads, dim)).astype(np.float32)
    slots = np.array([37, -1, 5])  # block 2 offset 5, skipped, block 0 offset 5
    table = {"tensor": np.array([0.02], np.float32),
             "channel": rng.uniform(0.01, 0.03, (heads, dim)).astype(
                 np.float32)}
    operand = table.get(scale)
    cache.write(values, slots, operand)

    for token, slot in ((0, 37), (2, 5)):
        block, offset = divmod(slot, block_size)
        for head in range(heads):
            x = values[token, head]
            if scale == "token":
                s = ref.token_scale(encoding, x)
                assert cache.token_scales[block, offset, head] == s
            elif scale == "channel":
                s = operand[head]
            elif scale == "tensor":
                s = operand[0]
            index = (block, offset, head) if layout == "nhd" else (
                block, head, offset)
            if encoding == "nvfp4":
                codes, groups = ref.encode_row_nvfp4(x, s)
                assert np.array_equal(cache.group_scales[index], groups)
            else:
                codes = ref.encode_row(encoding, x,
                                       None if scale == "none" else s)
            assert np.array_equal(cache.storage[index], codes)

    # Nothing else changed: the skipped token wrote nothing.
    touched = np.zeros((blocks, block_size), bool)
    touched[2, 5] = touched[0, 5] = True
    storage = cache._nhd(cache.storage)
    untouched = before._nhd(before.storage)
    assert np.array_equal(storage[~touched], untouched[~touched])

    # Dequantization reads the same slots back.
    dense = cache.dequantize(operand)
    assert dense.shape == (blocks, block_size, heads, dim)
    if encoding in ("f16", "bf16"):
        expected = ref.decode_row(encoding, ref.encode_row(encoding, values[0]),
                                  dim)
        assert np.array_equal(dense[2, 5], expected)


def test_cache_shapes_follow_the_verifier():
    cache = ref.PagedCache.allocate("nvfp4", "token", "hnd", 7, 32, 8, 64)
    assert cache.storage.shape == (7, 8, 32, 32)
    assert cache.group_scales.shape == (7, 8, 32, 4)
    assert cache.token_scales.shape == (7, 32, 8)
    cache = ref.PagedCache.allocate("i4", "channel", "nhd", 2, 16, 8, 128)
    assert cache.storage.shape == (2, 16, 8, 64)
    assert cache.group_scales is None and cache.token_scales is None
    assert [ref.row_bytes(e, 128) for e in ref.ENCODINGS] == [
        256, 256, 128, 128, 128, 64, 64]


# ---------------------------------------------------------------------------
# MLA records
# ---------------------------------------------------------------------------


def _token(seed=0):
    rng = np.random.default_rng(seed)
    latent = (rng.standard_normal(512) *
              np.exp2(np.repeat(np.arange(4) * 3 - 4, 128))).astype(np.float32)
    rope = (rng.standard_normal(64) * 8).astype(np.float32)
    return latent, rope


def _f32_at(record, offset):
    return np.frombuffer(record[offset:offset + 4].tobytes(), "<f4")[0]


def test_record_presets_have_the_spec_layouts():
    sizes = {name: layout.nbytes for name, layout in ref.RECORD_PRESETS.items()}
    assert sizes == {"fp8_ds_mla": 656, "nvfp4_ds_mla": 432,
                     "nvfp4_ds_mla_fp8_rope": 368}
    for layout in ref.RECORD_PRESETS.values():
        end = 0
        for lane in layout.lanes:  # sorted, disjoint, aligned, in bounds
            assert lane.offset >= end
            assert lane.offset % max(1, lane.nbytes // lane.count) == 0
            end = lane.offset + lane.nbytes
        assert end <= layout.nbytes and layout.nbytes % 16 == 0


def test_fp8_ds_mla_record_bytes():
    latent, rope = _token(1)
    record = ref.encode_record("fp8_ds_mla", "none", latent, rope)
    assert record.shape == (656,)
    for tile in range(4):
        values = latent[tile * 128:(tile + 1) * 128]
        scale = np.max(np.abs(values)) / f32(448)
        assert _f32_at(record, 512 + 4 * tile) == scale
        assert np.array_equal(record[tile * 128:(tile + 1) * 128],
                              ref.quantize_e4m3(values, scale))
    assert np.array_equal(record[528:656].view("<u2"), ref.encode_bf16(rope))
    y_latent, y_rope = ref.decode_record("fp8_ds_mla", "none", record)
    assert np.array_equal(y_rope, ref.decode_bf16(ref.encode_bf16(rope)))
    assert np.allclose(y_latent, latent, rtol=2 ** -3, atol=1e-6)


@pytest.mark.parametrize("mode", ["tensor", "token"])
def test_nvfp4_records_bytes(mode):
    latent, rope = _token(2)
    outer = f32(0.01)
    # nvfp4_ds_mla (tensor only): pad [288, 304) is zero, bf16 rope at 304.
    if mode == "tensor":
        record = ref.encode_record("nvfp4_ds_mla", "tensor", latent, rope,
                                   outer)
        codes, groups = ref.encode_row_nvfp4(latent, outer)
        assert np.array_equal(record[:256], codes)
        assert np.array_equal(record[256:288], groups)
        assert not record[288:304].any()
        assert np.array_equal(record[304:432].view("<u2"),
                              ref.encode_bf16(rope))

    record = ref.encode_record("nvfp4_ds_mla_fp8_rope", mode, latent, rope,
                               outer if mode == "tensor" else None)
    assert record.shape == (368,)
    rope_scale = np.max(np.abs(rope)) / f32(448)
    assert _f32_at(record, 288) == rope_scale
    s_t = np.max(np.abs(latent)) / f32(2688) if mode == "token" else f32(0)
    assert _f32_at(record, 292) == s_t
    assert not record[296:304].any()
    assert np.array_equal(record[304:368], ref.quantize_e4m3(rope, rope_scale))
    # Group scales are relative to the outer scale of the mode.
    mode_outer = outer if mode == "tensor" else s_t
    codes, groups = ref.encode_row_nvfp4(latent, mode_outer)
    assert np.array_equal(record[:256], codes)
    assert np.array_equal(record[256:288], groups)
    y_latent, _ = ref.decode_record("nvfp4_ds_mla_fp8_rope", mode, record,
                                    outer if mode == "tensor" else None)
    assert np.array_equal(y_latent,
                          ref.decode_row_nvfp4(codes, groups, mode_outer))


def test_record_modes_are_part_of_the_type():
    latent, rope = _token(3)
    with pytest.raises(ValueError):
        ref.encode_record("nvfp4_ds_mla", "token", latent, rope)
    with pytest.raises(ValueError):
        ref.encode_record("fp8_ds_mla", "tensor", latent, rope, 1.0)


def test_record_cache_write_skips_minus_one():
    rng = np.random.default_rng(5)
    cache = ref.RecordCache.allocate("nvfp4_ds_mla_fp8_rope", "token", 2, 64,
                                     rng)
    before = cache.storage.copy()
    latent = rng.standard_normal((2, 512)).astype(np.float32)
    rope = rng.standard_normal((2, 64)).astype(np.float32)
    cache.write(latent, rope, [-1, 70])
    assert np.array_equal(cache.storage[1, 6], ref.encode_record(
        "nvfp4_ds_mla_fp8_rope", "token", latent[1], rope[1]))
    cache.storage[1, 6] = before[1, 6]
    assert np.array_equal(cache.storage, before)


# ---------------------------------------------------------------------------
# Fold arithmetic
# ---------------------------------------------------------------------------


def test_fold_seed_example():
    exponent, n = ref.fold_normalizer([1000.0], 1.0)
    assert (exponent, n) == (10, 1024.0)
    # 100 * 1000 / 1024 = 97.65625 = 1.52587890625 * 2^6: row exponent 6,
    # the folded value the fp16 tie 1.525390625 (even mantissa 0x21A).
    bits, e = ref.fold_query_row([100.0], [1000.0], n, "f16")
    assert e == 6 and int(bits[0]) == 0x3E1A
    assert math.ldexp(float(ref.decode_f16(bits[0])), e) * float(n) == 99968.0
    # Unnormalized, 100 * 1000 overflows fp16: an IEEE conversion gives inf
    # and a zero code then NaN. The row exponent takes the magnitude out
    # even with N = 1.
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(100.0 * 1000.0))
    bits, e = ref.fold_query_row([100.0], [1000.0], 1.0, "f16")
    assert e == 16 and float(ref.decode_f16(bits[0])) == 1.525390625


def test_fold_normalizer_clamps_and_legality():
    assert ref.fold_normalizer([FLT_MAX], 2.0)[0] == 125
    assert ref.fold_normalizer([FLT_MAX], 1.0)[0] == 126
    assert ref.fold_normalizer([1e-40, -3e-41], 1.0)[0] == -126
    assert ref.fold_normalizer([0.0, -0.0], 1.0) == (0, 1.0)
    assert ref.fold_normalizer([8.0, 4.0], 1.0)[0] == 4
    # A clamped normalizer folds; more than 24 binades do not.
    assert ref.fold_legality([FLT_MAX, 1e38], 2.0) == "legal"
    assert ref.fold_legality([1.0, 2.0 ** -24, 0.0], 1.0) == "legal"
    assert ref.fold_legality([1.0, float.fromhex("0x1.fffffep-25")], 1.0) \
        == "too_wide"
    assert ref.fold_legality([1.0, 1e-40, 1e30], 1.0) == "too_wide"
    assert ref.fold_legality([1.0, math.nan], 1.0) == "nonfinite"
    assert ref.binade_span([1e-40, 1.0]) == 133
    assert ref.binade_span([0.0, math.inf]) is None
    assert ref.fold_legality([1.0, math.inf], 1.0) == "nonfinite"


def test_fold_query_row_rounds_once():
    scale, n = float.fromhex("0x1.55d554p-3"), 0.5
    bits, e = ref.fold_query_row([3.0], [scale], n, "f16")
    assert (int(bits[0]), e) == (0x3C01, 0)
    scale = float.fromhex("0x1.595554p-3")
    bits, e = ref.fold_query_row([3.0], [scale], n, "bf16")
    assert (int(bits[0]), e) == (0x3F81, 0)
    # The exponent is that of the product rounded to 24 bits: 2 - 2^-32
    # rounds to 2.
    bits, e = ref.fold_query_row([2.0 - 2.0 ** -10], [8392706 * 2.0 ** -23],
                                 1.0, "f16")
    assert e == 1 and float(ref.decode_f16(bits[0])) == 1.0


def test_fold_query_row_is_independent_of_query_magnitude():
    rng = np.random.default_rng(3)
    scales = np.ldexp(1.0, np.arange(128) % 61 - 40).astype(np.float32)
    _, n = ref.fold_normalizer(scales, 0.125)
    q = np.ldexp(rng.uniform(1.0, 2.0, 128), -2)
    base, e0 = ref.fold_query_row(q, scales, n, "f16")
    for k in (-12, -1, 5, 12):
        bits, e = ref.fold_query_row(np.ldexp(q, k), scales, n, "f16")
        assert e == e0 + k and np.array_equal(bits, base)
    largest = np.max(np.abs(ref.decode_f16(base)))
    assert 1.0 <= largest <= 2.0


def test_fold_query_row_signs_zeros_flushes():
    bits, e = ref.fold_query_row([-2.0, 5.0, -0.0, 7.0],
                                 [0.75, -3.0, 0.75, 0.0], 4.0, "f16")
    assert e == 1
    assert [int(b) for b in bits] == [int(ref.encode_f16(-0.1875)),
                                      int(ref.encode_f16(-1.875)),
                                      0x8000, 0x0000]
    bits, e = ref.fold_query_row([0.0, -0.0], [1.0, 1.0], 1.0, "f16")
    assert e == 0 and [int(b) for b in bits] == [0x0000, 0x8000]
    bits, e = ref.fold_query_row([1.0, 2.0 ** -126, -(2.0 ** -127)],
                                 [1.0, 1.0, 1.0], 1.0, "bf16")
    assert e == 0 and int(bits[1]) == int(ref.encode_bf16(2.0 ** -126))
    assert int(bits[2]) == 0x8000


# ---------------------------------------------------------------------------
# Attention vs a naive dense softmax
# ---------------------------------------------------------------------------


def naive_attention(q, keys, values, lengths, n_query, scale, softcap, window,
                    sinks, masked_positions):
    """Scalar-loop attention over dense per-sequence K/V lists. keys[b] is
    [L_b, kv_heads, D]; masked_positions[b] is a set of positions whose
    page is unmapped."""
    tokens, heads, dim = q.shape
    g = heads // keys[0].shape[1]
    out = np.zeros((tokens, heads, values[0].shape[-1]))
    t = 0
    for b, length in enumerate(lengths):
        for i in range(n_query[b]):
            qpos = length - n_query[b] + i
            for h in range(heads):
                kvh = h // g
                logits, rows = [], []
                for pos in range(length):
                    if pos in masked_positions[b] or pos > qpos:
                        continue
                    if window > 0 and pos <= qpos - window:
                        continue
                    dot = sum(float(q[t, h, d]) * float(keys[b][pos, kvh, d])
                              for d in range(dim))
                    logit = scale * dot
                    if softcap > 0:
                        logit = softcap * math.tanh(logit / softcap)
                    logits.append(logit)
                    rows.append(values[b][pos, kvh])
                if not logits:
                    continue
                top = max(logits + ([sinks[h]] if sinks is not None else []))
                weights = [math.exp(x - top) for x in logits]
                total = sum(weights) + (math.exp(sinks[h] - top)
                                        if sinks is not None else 0.0)
                out[t, h] = sum(w * r for w, r in zip(weights, rows)) / total
            t += 1
    return out


@pytest.mark.parametrize("n_query, softcap, window, sinks, holes", [
    (1, 0.0, -1, False, False),
    (1, 1.5, -1, True, True),
    (3, 0.0, -1, False, False),
    (3, 0.0, 5, True, False),
    (4, 2.0, 9, False, True),
])
def test_paged_attention_matches_naive_dense_softmax(n_query, softcap, window,
                                                     sinks, holes):
    rng = np.random.default_rng(6 + n_query)
    kv_heads, g, dim, block_size = 2, 3, 8, 4
    heads = kv_heads * g
    lengths = [0 if n_query == 1 else n_query, 1, 7, 13]
    if n_query > 1:
        lengths[1] = n_query  # L >= n for speculative decode
    batch = len(lengths)
    max_blocks = max(-(-length // block_size) for length in lengths) + 1
    num_blocks = sum(-(-length // block_size) for length in lengths) + 2
    K = rng.standard_normal((num_blocks, block_size, kv_heads, dim))
    V = rng.standard_normal((num_blocks, block_size, kv_heads, dim))
    pages = list(rng.permutation(num_blocks))
    block_table = np.full((batch, max_blocks), -1, np.int32)
    masked = [set() for _ in range(batch)]
    for b, length in enumerate(lengths):
        for j in range(-(-length // block_size)):
            block_table[b, j] = pages.pop()
        if holes and length > block_size:  # unmap the first page
            block_table[b, 0] = -1
            masked[b] = set(range(block_size))
    n_query_per_seq = [n_query] * batch
    tokens = sum(n_query_per_seq)
    q = rng.standard_normal((tokens, heads, dim))
    query_start = np.concatenate([[0], np.cumsum(n_query_per_seq)]) \
        if n_query > 1 else None
    sink_values = rng.uniform(-1, 2, heads) if sinks else None
    scale = ref.default_softmax_scale(dim)

    got = ref.paged_attention_ref(q, K, V, block_table, lengths, query_start,
                                  num_heads=heads, softmax_scale=scale,
                                  softcap=softcap, window=window,
                                  sinks=sink_values)
    dense_k = [ref.gather_sequence(K, np.maximum(block_table[b], 0), length)
               for b, length in enumerate(lengths)]
    dense_v = [ref.gather_sequence(V, np.maximum(block_table[b], 0), length)
               for b, length in enumerate(lengths)]
    want = naive_attention(q, dense_k, dense_v, lengths, n_query_per_seq, scale,
                           softcap, window, sink_values, masked)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-14)
    if n_query == 1:
        assert not got[0].any()  # the zero-length sequence gives zeros


def test_fully_masked_rows_give_zeros():
    K = np.ones((2, 16, 1, 8))
    q = np.ones((2, 2, 8))
    out = ref.paged_attention_ref(q, K, K, np.full((2, 1), -1), [5, 0],
                                  sinks=[1.0, 2.0])
    assert out.shape == (2, 2, 8) and not out.any()


def test_out_scale_and_mla_reference():
    rng = np.random.default_rng(7)
    latent = rng.standard_normal((2, 16, 512))
    rope = rng.standard_normal((2, 16, 64))
    q = rng.standard_normal((1, 4, 576))
    bt = np.array([[1, 0]])
    got = ref.mla_attention_ref(q, latent, rope, bt, [20], num_heads=4,
                                softmax_scale=0.05)
    keys = np.concatenate([latent, rope], -1)[:, :, None]
    want = ref.paged_attention_ref(q, keys, latent[:, :, None], bt, [20],
                                   softmax_scale=0.05)
    assert got.shape == (1, 4, 512) and np.array_equal(got, want)
    out_scale = rng.uniform(0.5, 2, (1, 512))
    scaled = ref.paged_attention_ref(q, keys, latent[:, :, None], bt, [20],
                                     softmax_scale=0.05, out_scale=out_scale)
    assert np.allclose(scaled, want * out_scale[None], rtol=1e-14)


def _softmax_out(logits, values):
    w = np.exp(logits - logits.max())
    return (w / w.sum()) @ values


@pytest.mark.parametrize("magnitude", [1e-4, 2e-2, 1.0, 1e4])
def test_row_fold_meets_tolerance_where_the_plain_fold_fails(magnitude):
    """Issue 8's report, on the CPU: whether the plain fold T(q * s / N)
    meets SPEC §8 depended on |q|. Half the channels have the table's top
    scale and zero codes, the other half sit 12 binades lower and carry the
    logit (a legal table, well within the budget). At |q| = 1e-4 the plain
    fold flushes the low half (q * s / N ~ 2^-25) and the softmax goes
    uniform; the row-renormalized fold (what the kernels compute) gives the
    same folded row for every |q| and meets the tolerance."""
    rng = np.random.default_rng(21)
    d, keys = 128, 64
    top = 3.0 * 2.0 ** 12 / (magnitude * 100.0 * 8.0)
    scales = np.full(d, top, np.float32)
    scales[d // 2:] = np.float32(top * 2.0 ** -12)
    codes = rng.integers(-100, 101, (keys, d)).astype(np.float64)
    codes[:, :d // 2] = 0.0
    values = rng.uniform(-1, 1, (keys, d))
    q = rng.uniform(0.5, 1.0, d) * rng.choice([-1.0, 1.0], d) * magnitude
    q = ref.decode_f16(ref.encode_f16(q)).astype(np.float64)
    softmax_scale = 1.0
    assert ref.fold_legality(scales, softmax_scale) == "legal"
    _, n = ref.fold_normalizer(scales, softmax_scale)
    want = _softmax_out(softmax_scale * (codes * scales) @ q, values)

    plain = ref.decode_f16(ref.encode_f16(
        q * (scales / np.float32(n)).astype(np.float64)))
    got_plain = _softmax_out(softmax_scale * float(n) * (codes @ plain),
                             values)
    bits, e = ref.fold_query_row(q, scales, n, "f16")
    folded = ref.decode_f16(bits).astype(np.float64)
    got_row = _softmax_out(
        softmax_scale * math.ldexp(float(n), e) * (codes @ folded), values)

    atol, rtol = 8e-4 * max(1.0, np.abs(values).max()), 5e-3
    def ratio(got):
        return np.max(np.abs(got - want) / (atol + rtol * np.abs(want)))
    assert ratio(got_row) <= 1.0
    if magnitude <= 1e-4:
        assert ratio(got_plain) > 1.0  # the bug the row exponent removes


# ---------------------------------------------------------------------------
# Rotary embedding (pattn.rotary)
# ---------------------------------------------------------------------------


def _rope_tables(positions: int, half: int):
    angles = np.arange(positions)[:, None] * 10000.0 ** (
        -np.arange(half)[None, :] / half)
    return np.cos(angles), np.sin(angles)


def test_rotary_positions_follow_the_appended_slots():
    assert list(ref.rotary_positions(3, seq_lens=[5, 9, 1])) == [4, 8, 0]
    assert list(ref.rotary_positions(
        5, seq_lens=[5, 9], query_start=[0, 2, 5], offset=10)) == [
            13, 14, 16, 17, 18]
    assert list(ref.rotary_positions(2, positions=[7, 0], offset=-1)) == [6,
                                                                         -1]


def test_rotary_ref_rotates_pairs_and_passes_the_rest():
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, size=(4, 3, 96))
    cos, sin = _rope_tables(64, 16)  # R = 32 of 96 channels
    pos = np.array([0, 5, 17, 63])
    for interleaved in (False, True):
        y = ref.rotary_ref(x, cos, sin, pos, interleaved=interleaved)
        np.testing.assert_array_equal(y[..., 32:], x[..., 32:])
        if interleaved:
            a, b = (slice(0, 32, 2), slice(1, 32, 2))
        else:
            a, b = (slice(0, 16), slice(16, 32))
        # A rotation keeps each pair's length; position 0 is the identity.
        np.testing.assert_allclose(y[..., a] ** 2 + y[..., b] ** 2,
                                   x[..., a] ** 2 + x[..., b] ** 2)
        np.testing.assert_allclose(y[0], x[0])
        # Rotating by p then by -p (sin negated) gives x back.
        back = ref.rotary_ref(y, cos, -sin, pos, interleaved=interleaved)
        np.testing.assert_allclose(back, x, atol=1e-12)
    # neox on x equals interleaved on x with its pair halves interleaved.
    order = np.concatenate([np.stack([np.arange(16), np.arange(16) + 16],
                                     axis=1).reshape(-1), np.arange(32, 96)])
    neox = ref.rotary_ref(x, cos, sin, pos)
    inter = ref.rotary_ref(x[..., order], cos, sin, pos, interleaved=True)
    np.testing.assert_allclose(inter, neox[..., order])


def test_rotary_ref_norm_heads_and_epsilon():
    rng = np.random.default_rng(4)
    x = rng.uniform(-3, 3, size=(2, 6, 64))
    w = rng.uniform(0.5, 1.5, size=64)
    cos, sin = _rope_tables(8, 32)
    pos = np.array([0, 0])  # the identity rotation: only the norm remains
    y = ref.rotary_ref(x, cos, sin, pos, norm_weight=w, norm_epsilon=1e-6,
                       first_head=4, heads=2)
    assert y.shape == (2, 2, 64)
    rows = x[:, 4:6]
    eps = float(np.float32(1e-6))
    want = rows / np.sqrt(np.mean(rows ** 2, axis=-1, keepdims=True) + eps) * w
    np.testing.assert_allclose(y, want)
    zero = ref.rotary_ref(np.zeros((1, 1, 64)), cos, sin, [3], norm_weight=w)
    assert (zero == 0).all()  # epsilon keeps 0/0 away
