"""GPU tests of pattn.rotary: RMS QK-norm and rotary embedding.

Every case is built with :mod:`pattn.ir`, compiled for the device's chip and
run on random, never-zero inputs into a NaN-poisoned output. The result must
be the float64 reference (``pattn.reference.rotary_ref``) rounded once to the
output type: within one unit in the last place of the output type, plus the
fp32 evaluation's own error (2^-20 of the terms' magnitude, for the
rotation's cancellation), finite everywhere, and for f16/bf16 outputs more
than 95% of the elements exactly the correctly rounded value. Cases cover neox and
interleaved pairs, partial rotary dims, cos/sin tables in f16, bf16 and f32,
positions given per token or derived from seq_lens (with and without
query_start) plus an offset, QK-norm, the K heads of a packed QKV buffer,
in-place rotation, inputs whose squares overflow fp32, and a bad position
(the whole call is rejected, nothing written).
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Optional

import pytest

from gpu_required import torch  # skips the module without a CUDA device

import numpy as np  # noqa: E402

import pattn  # noqa: E402
from pattn import ir  # noqa: E402
from pattn import reference as ref  # noqa: E402


def device_chip() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}{'a' if major in (9, 10, 12) else ''}"


CHIP = device_chip()
TORCH = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
#: Mantissa bits and the smallest subnormal exponent of each output type.
FORMATS = {"f16": (10, -24), "bf16": (7, -133), "f32": (23, -149)}


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    dtype: str = "f16"           # input and output
    table: str = "f16"           # cos / sin
    heads: int = 8               # input heads
    out_heads: Optional[int] = None
    first_head: int = 0
    head_dim: int = 128
    rotary_dim: Optional[int] = None  # default: head_dim
    interleaved: bool = False
    norm: Optional[str] = None   # weight type
    epsilon: float = 1e-6
    mode: str = "seq_lens"       # "positions" (i32/i64), "seq_lens", "query_start"
    positions_type: str = "i32"
    offset: int = 0
    query_tokens: tuple = (1, 1, 1)
    max_position: int = 4096
    in_place: bool = False
    magnitude: float = 1.0

    @property
    def tokens(self) -> int:
        return sum(self.query_tokens)

    @property
    def outputs(self) -> int:
        return self.out_heads or self.heads - self.first_head


CASES = [
    Case("llama3_neox_f16_seq_lens", heads=32),
    Case("qwen3_norm_bf16_query_start", dtype="bf16", table="f32",
         norm="bf16", mode="query_start", query_tokens=(2, 1, 3)),
    Case("phi3_interleaved_partial_f32_positions", dtype="f32", table="bf16",
         heads=4, head_dim=96, rotary_dim=64, interleaved=True,
         mode="positions", positions_type="i64", offset=5),
    Case("packed_qkv_k_heads_norm", heads=48, out_heads=8, first_head=32,
         norm="f16", epsilon=1e-5, mode="query_start", query_tokens=(4, 4)),
    Case("in_place_norm_neox_partial", dtype="bf16", table="bf16", heads=4,
         head_dim=64, rotary_dim=32, norm="f32", in_place=True),
    Case("odd_pairs_head_dim_80", heads=3, head_dim=80, rotary_dim=40,
         mode="positions", offset=-2, table="f32"),
    # Squares of 1e30 overflow fp32; the f64 sum does not.
    Case("bf16_huge_values_norm", dtype="bf16", table="f32", heads=2,
         head_dim=64, norm="bf16", magnitude=1e30),
    Case("f32_tiny_values_norm", dtype="f32", table="f32", heads=2,
         head_dim=64, norm="f32", epsilon=1e-30, magnitude=1e-20),
]


def _module(case: Case) -> tuple:
    """The IR of one case and its argument names."""
    module = ir.Module()
    f = module.function("rotary")
    tokens = None
    x = f.arg("x", ir.memref([tokens, case.heads, case.head_dim], case.dtype))
    half = (case.rotary_dim or case.head_dim) // 2
    cos = f.arg("cos", ir.memref([None, half], case.table))
    sin = f.arg("sin", ir.memref([None, half], case.table))
    kwargs = {}
    if case.mode == "positions":
        kwargs["positions"] = f.arg("positions",
                                    ir.memref([tokens], case.positions_type))
    else:
        kwargs["seq_lens"] = f.arg("seq_lens", ir.memref([None], "i32"))
        if case.mode == "query_start":
            kwargs["query_start"] = f.arg("query_start",
                                          ir.memref([None], "i32"))
    if case.norm:
        kwargs["norm_weight"] = f.arg("weight",
                                      ir.memref([case.head_dim], case.norm))
    out = x if case.in_place else f.arg(
        "out", ir.memref([tokens, case.outputs, case.head_dim], case.dtype))
    f.rotary(x, cos, sin, out, interleaved=case.interleaved,
             first_head=case.first_head, position_offset=case.offset,
             norm_epsilon=case.epsilon, **kwargs)
    return str(module), [a.name for a in f.args]


def _round(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 -> the output type (round to nearest even), as float64."""
    if dtype == "f32":
        return values.astype(np.float32).astype(np.float64)
    bits = ref.encode_f16(values) if dtype == "f16" else ref.encode_bf16(values)
    return (ref.decode_f16(bits) if dtype == "f16" else
            ref.decode_bf16(bits)).astype(np.float64)


def _ulp(values: np.ndarray, dtype: str) -> np.ndarray:
    mantissa, smallest = FORMATS[dtype]
    magnitude = np.maximum(np.abs(values), 2.0 ** (smallest + mantissa))
    return 2.0 ** (np.floor(np.log2(magnitude)) - mantissa)


@dataclasses.dataclass
class Inputs:
    tensors: dict
    x: np.ndarray
    cos: np.ndarray
    sin: np.ndarray
    positions: np.ndarray
    weight: Optional[np.ndarray]


def _inputs(case: Case, seed: int) -> Inputs:
    rng = np.random.default_rng(seed)
    dtype = TORCH[case.dtype]
    shape = (case.tokens, case.heads, case.head_dim)
    signs = rng.choice([-1.0, 1.0], size=shape)
    x = torch.from_numpy(signs * rng.uniform(0.1, 2.0, size=shape) *
                         case.magnitude).to(dtype).cuda()
    half = (case.rotary_dim or case.head_dim) // 2
    angles = (np.arange(case.max_position)[:, None] *
              10000.0 ** (-np.arange(half)[None, :] / half))
    cos = torch.from_numpy(np.cos(angles)).to(TORCH[case.table]).cuda()
    sin = torch.from_numpy(np.sin(angles)).to(TORCH[case.table]).cuda()
    tensors = {"x": x, "cos": cos, "sin": sin}
    batch = len(case.query_tokens)
    lengths = rng.integers(8, case.max_position - 8, size=batch)
    starts = np.concatenate([[0], np.cumsum(case.query_tokens)])
    if case.mode == "positions":
        positions = rng.integers(max(0, -case.offset),
                                 case.max_position - max(0, case.offset),
                                 size=case.tokens)
        tensors["positions"] = torch.from_numpy(positions).to(
            torch.int32 if case.positions_type == "i32" else
            torch.int64).cuda()
        used = ref.rotary_positions(case.tokens, positions=positions,
                                    offset=case.offset)
    else:
        tensors["seq_lens"] = torch.from_numpy(lengths).to(torch.int32).cuda()
        query_start = None
        if case.mode == "query_start":
            query_start = starts
            tensors["query_start"] = torch.from_numpy(starts).to(
                torch.int32).cuda()
        used = ref.rotary_positions(case.tokens, seq_lens=lengths,
                                    query_start=query_start,
                                    offset=case.offset)
    weight = None
    if case.norm:
        w = torch.from_numpy(rng.uniform(0.5, 1.5, size=case.head_dim)).to(
            TORCH[case.norm]).cuda()
        tensors["weight"] = w
        weight = w.double().cpu().numpy()
    if not case.in_place:
        tensors["out"] = torch.full((case.tokens, case.outputs, case.head_dim),
                                    float("nan"), dtype=dtype, device="cuda")
    return Inputs(tensors, x.double().cpu().numpy(), cos.double().cpu().numpy(),
                  sin.double().cpu().numpy(), used, weight)


_LOADED: dict = {}


def _load(case: Case):
    text, names = _module(case)
    if text not in _LOADED:
        _LOADED[text] = pattn.load(pattn.compile(text, chips=[CHIP]))
    return _LOADED[text], names


def _run(case: Case, inputs: Inputs):
    module, names = _load(case)
    module.rotary(*[inputs.tensors[n] for n in names])
    torch.cuda.synchronize()
    return module


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_rotary_matches_float64_reference(case):
    inputs = _inputs(case, seed=zlib.crc32(case.name.encode()))
    module = _run(case, inputs)
    module.check_device_errors()
    out = inputs.tensors["x" if case.in_place else "out"]
    got = out.double().cpu().numpy()
    want = ref.rotary_ref(inputs.x, inputs.cos, inputs.sin, inputs.positions,
                          norm_weight=inputs.weight,
                          norm_epsilon=case.epsilon,
                          interleaved=case.interleaved,
                          first_head=case.first_head, heads=case.outputs)
    assert np.isfinite(got).all(), f"{case.name}: non-finite output"
    # The terms' magnitude: |a cos| + |b sin| on rotated channels.
    rows = ref.rotary_ref(inputs.x, np.ones_like(inputs.cos),
                          np.zeros_like(inputs.sin), inputs.positions,
                          norm_weight=inputs.weight,
                          norm_epsilon=case.epsilon, first_head=case.first_head,
                          heads=case.outputs)
    magnitude = np.abs(rows) + np.abs(rows[..., _partner(case)])
    tolerance = _ulp(want, case.dtype) + 2.0 ** -20 * magnitude
    error = np.abs(got - want)
    worst = np.unravel_index(np.argmax(error / tolerance), error.shape)
    assert (error <= tolerance).all(), (
        f"{case.name}: |pattn - f64| = {error[worst]:.3g} at {worst} "
        f"(tolerance {tolerance[worst]:.3g}; got {got[worst]!r}, want "
        f"{want[worst]!r})")
    # f16/bf16: fp32 keeps 13/16 bits more, so nearly every element is the
    # correctly rounded value itself (an f32 output's own rounding is as
    # small as the fp32 arithmetic's error: the bound above is the claim).
    if case.dtype != "f32":
        exact = np.mean(got == _round(want, case.dtype))
        assert exact > 0.95, f"{case.name}: only {exact:.1%} correctly rounded"


def _partner(case: Case) -> np.ndarray:
    """For each channel, the other channel of its rotation pair (itself past
    the rotary dim)."""
    d = case.head_dim
    r = case.rotary_dim or d
    partner = np.arange(d)
    if case.interleaved:
        partner[:r] = np.arange(r) ^ 1
    else:
        partner[:r // 2] += r // 2
        partner[r // 2:r] -= r // 2
    return partner


@pytest.mark.parametrize("bad", ["past_the_table", "negative"])
def test_out_of_range_position_rejects_the_whole_call(bad):
    """A position outside the tables fails the call after a sync with a
    DeviceError and writes nothing (no token's output, no stray read)."""
    case = CASES[2] if bad == "past_the_table" else CASES[5]
    inputs = _inputs(case, seed=7)
    module, names = _load(case)
    module.take_device_errors()
    positions = inputs.tensors["positions"].clone()
    positions[-1] = case.max_position - case.offset if bad == \
        "past_the_table" else -case.offset - 1
    inputs.tensors["positions"] = positions
    module.rotary(*[inputs.tensors[n] for n in names])
    torch.cuda.synchronize()
    with pytest.raises(pattn.DeviceError, match="position was below 0"):
        module.check_device_errors()
    assert torch.isnan(inputs.tensors["out"]).all(), "nothing is written"


#: test_decode_positions_from_seq_lens_and_offset's pair.
DERIVED = dataclasses.replace(CASES[1], name="derived", offset=3)
EXPLICIT = dataclasses.replace(DERIVED, name="explicit", mode="positions",
                               offset=0)


def module_texts() -> list:
    """Every module this file compiles (python/tests/gpu/precompile.py)."""
    return [_module(case)[0] for case in CASES + [DERIVED, EXPLICIT]] + [
        _fused_module(*case[1:]) for case in FUSED]


def test_decode_positions_from_seq_lens_and_offset():
    """seq_lens mode rotates each appended token at seq_lens[b] - n_b + i
    (+ offset): compared with the same op given those positions."""
    derived, explicit = DERIVED, EXPLICIT
    inputs = _inputs(derived, seed=11)
    _run(derived, inputs)
    again = _inputs(explicit, seed=11)
    again.tensors["x"] = inputs.tensors["x"]
    again.tensors["weight"] = inputs.tensors["weight"]
    again.tensors["positions"] = torch.from_numpy(inputs.positions).to(
        torch.int32).cuda()
    _run(explicit, again)
    assert torch.equal(inputs.tensors["out"].view(torch.int16),
                       again.tensors["out"].view(torch.int16))


# ---------------------------------------------------------------------------
# Rotary fused into the cache write
# ---------------------------------------------------------------------------

#: (name, cache encoding, scale, norm): K rotated into a temporary that only
#: the cache write reads, which pattn-compile fuses into the write kernel.
FUSED = [("f16_cache", "f16", "none", False),
         ("i8_tensor_norm", "i8", "tensor", True),
         ("i4_channel", "i4", "channel", False)]
FUSED_HEADS, FUSED_DIM, FUSED_BLOCK, FUSED_PAGES = 4, 64, 16, 12


def _fused_module(encoding: str, scale: str, norm: bool) -> str:
    """@fused: rotary into an alloc, then write_cache of it (fused);
    @unfused: the same two ops through an argument buffer (not fused)."""
    module = ir.Module()
    cache = ir.cache(block_size=FUSED_BLOCK, kv_heads=FUSED_HEADS,
                     head_dim=FUSED_DIM, encoding=encoding, scale=scale)
    for name in ("fused", "unfused"):
        f = module.function(name)
        k = f.arg("k", ir.memref([None, FUSED_HEADS, FUSED_DIM], "f16"))
        cos = f.arg("cos", ir.memref([None, FUSED_DIM // 2], "f32"))
        sin = f.arg("sin", ir.memref([None, FUSED_DIM // 2], "f32"))
        seq_lens = f.arg("seq_lens", ir.memref([None], "i32"))
        weight = f.arg("weight", ir.memref([FUSED_DIM], "f16")) \
            if norm else None
        pages = f.arg("pages", cache.storage_type())
        slots = f.arg("slots", ir.memref([None], "i32"))
        table = f.arg("scale", cache.scale_type()) if scale != "none" \
            else None
        rotated = (f.alloc(ir.memref([None, FUSED_HEADS, FUSED_DIM], "f16"),
                           like=k) if name == "fused" else
                   f.arg("rotated", ir.memref([None, FUSED_HEADS, FUSED_DIM],
                                              "f16")))
        bound = f.bind_cache(pages, cache)
        f.rotary(k, cos, sin, rotated, seq_lens=seq_lens, norm_weight=weight)
        f.write_cache(rotated, bound, slots, scale=table)
        if name == "fused":
            f.dealloc(rotated)
    return str(module)


def _fused_inputs(encoding: str, scale: str, norm: bool, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    tokens, positions = 3, 512
    half = FUSED_DIM // 2
    angles = np.arange(positions)[:, None] * 10000.0 ** (
        -np.arange(half)[None, :] / half)
    row = FUSED_DIM // 2 if encoding == "i4" else (
        2 * FUSED_DIM if encoding == "f16" else FUSED_DIM)
    tensors = {
        "k": torch.from_numpy(rng.uniform(-2, 2, (tokens, FUSED_HEADS,
                                                   FUSED_DIM))).to(
            torch.float16).cuda(),
        "cos": torch.from_numpy(np.cos(angles)).float().cuda(),
        "sin": torch.from_numpy(np.sin(angles)).float().cuda(),
        "seq_lens": torch.tensor([5, 300, 511], dtype=torch.int32,
                                 device="cuda"),
        # Random bytes everywhere (stale pages may hold anything).
        "pages": torch.from_numpy(rng.integers(
            0, 256, (FUSED_PAGES, FUSED_BLOCK, FUSED_HEADS, row),
            dtype=np.uint8)).view(torch.int8).cuda(),
        "slots": torch.tensor([3, 17, 130], dtype=torch.int32, device="cuda"),
        "rotated": torch.full((tokens, FUSED_HEADS, FUSED_DIM), float("nan"),
                              dtype=torch.float16, device="cuda"),
    }
    if norm:
        tensors["weight"] = torch.from_numpy(rng.uniform(
            0.5, 1.5, FUSED_DIM)).to(torch.float16).cuda()
    if scale == "tensor":
        tensors["scale"] = torch.tensor([0.02], device="cuda")
    elif scale == "channel":
        tensors["scale"] = torch.from_numpy(rng.uniform(
            0.2, 0.5, (FUSED_HEADS, FUSED_DIM))).float().cuda()
    return tensors


def _call(function, tensors: dict, names) -> None:
    function(*[tensors[n] for n in names])


@pytest.mark.parametrize("name,encoding,scale,norm", FUSED,
                         ids=[c[0] for c in FUSED])
def test_fused_rotary_write_is_the_unfused_write(name, encoding, scale,
                                                 norm):
    """The fused kernel's cache bytes equal those of pattn.rotary followed
    by write_cache, bit for bit (every page: the untouched ones too), and a
    bad position writes nothing at all."""
    text = _fused_module(encoding, scale, norm)
    if text not in _LOADED:
        _LOADED[text] = pattn.load(pattn.compile(text, chips=[CHIP]))
    module = _LOADED[text]
    fused = _fused_inputs(encoding, scale, norm, seed=5)
    unfused = {k: v.clone() for k, v in fused.items()}
    names = {f: [a.name for a in getattr(module, f).args]
             for f in ("fused", "unfused")}
    _call(module.fused, fused, names["fused"])
    _call(module.unfused, unfused, names["unfused"])
    torch.cuda.synchronize()
    module.check_device_errors()
    assert torch.equal(fused["pages"], unfused["pages"])
    assert not torch.equal(fused["pages"], _fused_inputs(
        encoding, scale, norm, seed=5)["pages"]), "the write happened"
    # A position past the tables: the whole call is rejected.
    bad = _fused_inputs(encoding, scale, norm, seed=6)
    before = bad["pages"].clone()
    bad["seq_lens"][1] = 513
    module.take_device_errors()
    _call(module.fused, bad, names["fused"])
    torch.cuda.synchronize()
    with pytest.raises(pattn.DeviceError, match="position was below 0"):
        module.check_device_errors()
    assert torch.equal(bad["pages"], before), "nothing written"
