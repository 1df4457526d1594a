"""GPU tests of pattn: cache writes and attention against the reference.

Every case is compiled for the device's chip with ``pattn.compile`` and run
through ``pattn.load``. Its cache pages start as random bytes (stale pages
may hold anything, NaN patterns included), history rows are written on the
host with the reference quantizers, and the newest rows go through pattn's
``@write_k``/``@write_v``; the device's cache bytes must then equal the
reference quantizers' bit for bit (SPEC §8). ``@decode`` runs on random,
never-zero inputs into a NaN-poisoned output and is compared with the
float64 reference on the dequantized cache the device actually holds:
fp16 atol 8e-4 / rtol 5e-3, bf16 atol 6e-3 / rtol 5e-3, and no NaN or inf.

The grid (ir.paged_grid) is a deterministic pairwise-covering sample of
encodings x granularities x head_dim x block_size x g x query tokens x
kv_heads x layout x dtype x softcap/window/sinks x static/dynamic tables;
named cases cover the fold's extremes, skipped slots, CUDA graph replay,
empty and masked rows, and the MLA presets.

Environment: PATTN_GPU_GRID_LIMIT=N keeps the first N grid rows;
PATTN_GPU_COMPILE_JOBS=N compiles N modules at a time (default 8, 1 to
compile serially); PATTN_GPU_RESULTS=path writes the results table.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import zlib
from typing import Callable, Optional

import pytest

from gpu_required import torch  # skips the module without a CUDA device

import numpy as np  # noqa: E402  (after the skip: CPU-only CI may lack it)

import ir  # noqa: E402
import pattn  # noqa: E402
from pattn import reference as ref  # noqa: E402

# ---------------------------------------------------------------------------
# Device, tolerances, compilation
# ---------------------------------------------------------------------------


def device_chip() -> str:
    """The pattn chip name of the current device: sm_80, sm_86, sm_89,
    sm_90a, sm_100a, sm_120a (the arch-specific variant where one exists)."""
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}{'a' if major in (9, 10, 12) else ''}"


CHIP = device_chip()
# The backend every case is compiled for: auto (XQA where eligible, as the
# compiler chooses by default) or portable; run the suite once per backend.
BACKEND = os.environ.get("PATTN_TEST_BACKEND", "auto")
#: The backend each decode is also compared with, on the same cache bytes.
OTHER_BACKEND = "portable" if BACKEND != "portable" else "auto"

#: SPEC §8: (atol, rtol) by activation type.
TOLERANCE = {"f16": (8e-4, 5e-3), "bf16": (6e-3, 5e-3)}

TORCH_DTYPES = {
    "i8": torch.uint8, "f8E4M3FN": torch.float8_e4m3fn, "f32": torch.float32,
    "i32": torch.int32, "i64": torch.int64, "f16": torch.float16,
    "bf16": torch.bfloat16,
}


class Compiler:
    """Compiles every module once, several at a time (pattn.compile runs the
    pattn-compile driver, so threads overlap its processes)."""

    def __init__(self) -> None:
        self.jobs = max(1, int(os.environ.get("PATTN_GPU_COMPILE_JOBS", "8")))
        self.paths: dict[str, concurrent.futures.Future] = {}
        self.pool = concurrent.futures.ThreadPoolExecutor(self.jobs)
        self.modules: dict[str, object] = {}

    def prefetch(self, texts) -> None:
        for text in texts:
            if text not in self.paths:
                self.paths[text] = self.pool.submit(
                    pattn.compile, text, chips=[CHIP], backend=BACKEND)

    def load(self, text: str):
        if text not in self.modules:
            self.prefetch([text])
            # A compile error is raised by every test that needs the module.
            self.modules[text] = pattn.load(self.paths[text].result())
        return self.modules[text]

    def close(self) -> None:
        """Stops pending compiles and deletes the artifacts (temporary files
        owned by the caller of pattn.compile; loaded ones stay mapped),
        except those of an artifact cache ($PATTN_ARTIFACT_DIR)."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        if os.environ.get("PATTN_ARTIFACT_DIR"):
            return
        for future in self.paths.values():
            if future.done() and not future.cancelled() and \
                    future.exception() is None:
                with contextlib.suppress(OSError):
                    os.unlink(future.result())


COMPILER = Compiler()


def invoke(module, name: str, signature, tensors: dict) -> None:
    """Calls function ``name`` with the tensors named by its signature, in
    the IR's argument order, checking dtypes and static dims first."""
    args = []
    for arg in signature:
        tensor = tensors[arg.name]
        assert tensor.dtype == TORCH_DTYPES[arg.element], (arg, tensor.dtype)
        assert tensor.dim() == len(arg.shape) and all(
            d is None or d == t for d, t in zip(arg.shape, tensor.shape)), (
            arg, tuple(tensor.shape))
        args.append(tensor)
    function = getattr(module, name)
    manifest = getattr(function, "args", None)  # the loader's ArgSpecs
    assert manifest is None or len(manifest) == len(args), (
        f"@{name} takes {len(manifest)} arguments, the IR says {len(args)}")
    function(*args)


# ---------------------------------------------------------------------------
# Host <-> device, bit-exact
# ---------------------------------------------------------------------------


def upload(array: np.ndarray, element: str) -> torch.Tensor:
    """A host array (raw bits for f16/bf16/f8) as a device tensor of the
    memref's element type."""
    if element in ("i8", "f8E4M3FN"):
        tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=np.uint8))
        if element == "f8E4M3FN":
            tensor = tensor.view(torch.float8_e4m3fn)
    elif element in ("f16", "bf16"):
        bits = np.ascontiguousarray(array, dtype=np.uint16).view(np.int16)
        tensor = torch.from_numpy(bits).view(TORCH_DTYPES[element])
    else:
        numpy_type = {"f32": np.float32, "i32": np.int32, "i64": np.int64}
        tensor = torch.from_numpy(np.ascontiguousarray(
            array, dtype=numpy_type[element]))
    return tensor.to("cuda")


def download(tensor: torch.Tensor) -> np.ndarray:
    """Device tensor -> host array; f16/bf16 as uint16 bits, fp8 as bytes."""
    if tensor.dtype in (torch.float16, torch.bfloat16):
        return tensor.view(torch.int16).cpu().numpy().view(np.uint16)
    if tensor.dtype == torch.float8_e4m3fn:
        return tensor.view(torch.uint8).cpu().numpy()
    return tensor.cpu().numpy()


def poisoned(shape, element: str) -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=TORCH_DTYPES[element],
                      device="cuda")


def activation_bits(x, dtype: str) -> np.ndarray:
    return ref.encode_f16(x) if dtype == "f16" else ref.encode_bf16(x)


def activation_values(bits, dtype: str) -> np.ndarray:
    return ref.decode_f16(bits) if dtype == "f16" else ref.decode_bf16(bits)


def attended_value_scale(values, block_table, seq_lens, block_size,
                         query_start, tokens: int) -> np.ndarray:
    """max(1, max |V|) over the keys each query token attends (every key of
    its sequence), per token: values [blocks, block_size, ..., D] gives
    [tokens, ...] (max over D). SPEC §8 scales atol by it."""
    per_sequence = np.ones((len(seq_lens),) + values.shape[2:-1])
    for b, length in enumerate(seq_lens):
        for key in range(length):
            page = block_table[b, key // block_size]
            if page >= 0:
                row = np.abs(values[page, key % block_size]).max(axis=-1)
                per_sequence[b] = np.maximum(per_sequence[b], row)
    sequence = (np.searchsorted(query_start, np.arange(tokens),
                                side="right") - 1
                if query_start is not None else np.arange(tokens))
    return per_sequence[sequence]


def signed_uniform(rng, shape, low=0.1, high=1.0) -> np.ndarray:
    """Random magnitudes in [low, high) with random signs: never zero."""
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


# ---------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------


def assert_bytes_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if np.array_equal(got, want):
        return
    bad = np.argwhere(got != want)
    first = [f"{tuple(i)}: got {got[tuple(i)]:#x} want {want[tuple(i)]:#x}"
             for i in bad[:6]]
    pytest.fail(f"{what}: {len(bad)} of {got.size} bytes differ "
                f"(index [block, ...]):\n  " + "\n  ".join(first))


def assert_cache_equal(got: ref.PagedCache, want: ref.PagedCache,
                       what: str) -> None:
    assert_bytes_equal(got.storage, want.storage, f"{what} pages")
    if want.group_scales is not None:
        assert_bytes_equal(got.group_scales, want.group_scales,
                           f"{what} group scales")
    if want.token_scales is not None:
        assert_bytes_equal(got.token_scales.view(np.uint32),
                           want.token_scales.view(np.uint32),
                           f"{what} token scales (f32 bits)")


def assert_close(got: np.ndarray, want: np.ndarray, dtype: str, what: str,
                 results, families, value_scale=1.0) -> None:
    """SPEC §8 tolerance, no NaN/inf, and error statistics for the table.
    ``value_scale`` ([tokens, heads, 1] or a scalar) is max(1, max |V|)
    over each row's values, which scales atol (SPEC §8)."""
    bad = ~np.isfinite(got)
    if bad.any():
        first = tuple(np.argwhere(bad)[0])
        pytest.fail(f"{what}: {bad.sum()} non-finite outputs, first at "
                    f"[token, head, channel] = {first} ({got[first]})")
    atol, rtol = TOLERANCE[dtype]
    atol = atol * np.asarray(value_scale, np.float64)
    error = np.abs(got - want)
    ratio = error / (atol + rtol * np.abs(want))
    large = np.abs(want) >= 1e-2
    max_rel = float((error[large] / np.abs(want[large])).max()) \
        if large.any() else 0.0
    for family in families:
        results.record(family, float(error.max(initial=0.0)), max_rel,
                       float(ratio.max(initial=0.0)))
    if ratio.size and ratio.max() > 1:
        worst = np.unravel_index(np.argmax(ratio), ratio.shape)
        # Which (token, head) rows fail says more than one element does:
        # a masking bug shows as whole rows, a decode bug as channels.
        bad_rows = np.argwhere((ratio > 1).any(axis=-1))
        rows = ", ".join(f"({t}, {h})" for t, h in bad_rows[:12])
        pytest.fail(
            f"{what}: {(ratio > 1).sum()} of {ratio.size} outputs outside "
            f"atol {atol} + rtol {rtol}; worst at [token, head, channel] = "
            f"{tuple(int(i) for i in worst)}: got {got[worst]:.6g}, want "
            f"{want[worst]:.6g} (max abs err {error.max():.3g}); "
            f"{len(bad_rows)} of {ratio.shape[0] * ratio.shape[1]} [token, "
            f"head] rows fail: {rows}")


# ---------------------------------------------------------------------------
# Paged attention: plans (host) and runs (device)
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class PagedPlan:
    """Everything about a case that is decided on the host, deterministically
    from its config: the IR, the block table, the caches before and after
    the device's writes, and the decode inputs."""

    config: ir.Config
    module: ir.Module
    block_table: np.ndarray  # int32 [batch, max_blocks]
    k_initial: ref.PagedCache  # what the device cache starts from
    v_initial: ref.PagedCache
    k_expected: ref.PagedCache  # ... and must hold after write_k / write_v
    v_expected: ref.PagedCache
    k_operand: Optional[np.ndarray]  # tensor [1] / channel [H, D] scales
    v_operand: Optional[np.ndarray]
    k_new: np.ndarray  # activation bits [write tokens, H, D]
    v_new: np.ndarray
    slots: np.ndarray  # int64 [write tokens], -1 = skip
    query: np.ndarray  # activation bits [tokens, num_heads, D]
    query_start: Optional[np.ndarray]
    sinks: Optional[np.ndarray]
    softmax_scale: float  # the fp32 value the kernel uses

    @property
    def dtype(self) -> str:
        return self.config.dtype


def scale_operand(encoding: str, scale: str, values: np.ndarray,
                  table: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """The tensor ([1]) or channel ([H, D]) scale a serving stack would
    calibrate from the data: amax / max_code in fp32."""
    if scale not in ("tensor", "channel"):
        return None
    if table is not None:
        return np.asarray(table, np.float32).reshape(
            (1,) if scale == "tensor" else values.shape[1:])
    max_code = np.float32(ref.MAX_CODE[encoding])
    magnitude = np.abs(values).astype(np.float32)
    if scale == "tensor":
        amax = magnitude.max(initial=np.float32(0))
        return np.array([amax / max_code if amax else 0.01], np.float32)
    amax = magnitude.max(axis=0, initial=np.float32(0))
    return np.where(amax > 0, amax / max_code, np.float32(0.01)).astype(
        np.float32)


def build_block_table(config: ir.Config, rng, holes: bool,
                      unmap_all: bool) -> tuple[np.ndarray, int]:
    """Random physical pages per sequence, -1 past each sequence's end. With
    a window, every other page that no query token can see is freed (-1),
    as serving stacks do; ``holes`` unmaps the second page of longer
    sequences; two spare pages stay stale."""
    bs, n = config.block_size, config.query_tokens
    used = [-(-length // bs) for length in config.seq_lens]
    num_blocks = sum(used) + 2
    pages = rng.permutation(num_blocks)
    table = np.full((config.batch, config.max_blocks), -1, np.int32)
    start = 0
    for b, (length, count) in enumerate(zip(config.seq_lens, used)):
        table[b, :count] = pages[start:start + count]
        start += count
        if config.window > 0:
            first_query = length - min(config.counts[b], length)
            for j in range(0, count, 2):
                if (j + 1) * bs - 1 <= first_query - config.window:
                    table[b, j] = -1
        if holes and count >= 3:
            table[b, 1] = -1
    if unmap_all:
        table[:] = -1
    return table, num_blocks


def plan_paged(config: ir.Config, *, k_table=None, k_magnitude=None,
               query: Optional[Callable] = None, holes: bool = False,
               unmap_all: bool = False, skip_every: int = 0) -> PagedPlan:
    """Builds a case. Overrides: ``k_table`` fixes the K scale operand,
    ``k_magnitude`` [H, D] the per-channel size of K values, ``query(rng,
    shape)`` the query values; ``skip_every`` gives every k-th written token
    slot -1 (besides the one padding token every write batch has)."""
    rng = np.random.default_rng(zlib.crc32(config.id.encode()))
    H, D, bs, n = config.kv_heads, config.head_dim, config.block_size, \
        config.query_tokens
    table, num_blocks = build_block_table(config, rng, holes, unmap_all)

    # K and V values of every position, rounded to the activation type.
    if k_magnitude is None:
        k_magnitude = np.exp2(rng.uniform(-1, 1, (H, D)))
    v_magnitude = np.exp2(rng.uniform(-1, 0.25, (H, D)))

    def rows(magnitude, length):
        bits = activation_bits(signed_uniform(rng, (length, H, D)) * magnitude,
                               config.dtype)
        return activation_values(bits, config.dtype)

    k_all = [rows(k_magnitude, length) for length in config.seq_lens]
    v_all = [rows(v_magnitude, length) for length in config.seq_lens]
    k_operand = scale_operand(config.k_encoding, config.k_scale,
                              np.concatenate(k_all), k_table)
    v_operand = scale_operand(config.v_encoding, config.v_scale,
                              np.concatenate(v_all), None)

    # History rows are written on the host; the newest min(n, L) rows of
    # each sequence go through the device's write kernels.
    history_k, history_v, history_slots = [], [], []
    new_k, new_v, new_slots = [], [], []
    for b, length in enumerate(config.seq_lens):
        first_new = length - min(config.counts[b], length)
        for pos in range(length):
            block = table[b, pos // bs]
            slot = -1 if block < 0 else int(block) * bs + pos % bs
            if pos >= first_new:
                new_k.append(k_all[b][pos])
                new_v.append(v_all[b][pos])
                new_slots.append(slot)
            elif slot >= 0:
                history_k.append(k_all[b][pos])
                history_v.append(v_all[b][pos])
                history_slots.append(slot)
    # Every write batch carries one padding token with slot -1.
    pad = int(rng.integers(0, len(new_slots) + 1))
    new_k.insert(pad, rows(k_magnitude, 1)[0])
    new_v.insert(pad, rows(v_magnitude, 1)[0])
    new_slots.insert(pad, -1)
    slots = np.array(new_slots, np.int64)
    if skip_every:
        slots[::skip_every] = -1
    k_rows, v_rows = np.stack(new_k), np.stack(new_v)

    def caches(encoding, scale, operand, history_rows, new_rows):
        initial = ref.PagedCache.allocate(encoding, scale, config.layout,
                                          num_blocks, bs, H, D, rng)
        if history_rows:
            initial.write(np.stack(history_rows), history_slots, operand)
        expected = initial.copy()
        expected.write(new_rows, slots, operand)
        return initial, expected

    k_initial, k_expected = caches(config.k_encoding, config.k_scale,
                                   k_operand, history_k, k_rows)
    v_initial, v_expected = caches(config.v_encoding, config.v_scale,
                                   v_operand, history_v, v_rows)

    tokens = sum(config.counts)
    shape = (tokens, config.num_heads, D)
    q = query(rng, shape) if query else signed_uniform(rng, shape)
    static = config.static_tables
    module = ir.emit_paged(
        config,
        k_operand if static and config.k_scale == "channel" else None,
        v_operand if static and config.v_scale == "channel" else None)
    return PagedPlan(
        config=config, module=module, block_table=table,
        k_initial=k_initial, v_initial=v_initial, k_expected=k_expected,
        v_expected=v_expected, k_operand=k_operand, v_operand=v_operand,
        k_new=activation_bits(k_rows, config.dtype),
        v_new=activation_bits(v_rows, config.dtype), slots=slots,
        query=activation_bits(q, config.dtype),
        query_start=np.concatenate([[0], np.cumsum(config.counts)]).astype(
            np.int32) if n > 1 else None,
        sinks=rng.uniform(-1, 2, config.num_heads).astype(np.float32)
        if config.sinks else None,
        softmax_scale=float(np.float32(config.softmax_scale))
        if config.softmax_scale is not None
        else ref.default_softmax_scale(D))


def paged_cache_tensors(plan: PagedPlan) -> dict:
    """Both sides' cache buffers on the device, from the plan's initial
    bytes; with ``engine_pages`` the K and V pages are the halves of one
    [blocks, 2, ...] allocation (views, as an engine passes them)."""
    tensors = {**cache_tensors("k", plan.k_initial),
               **cache_tensors("v", plan.v_initial)}
    if plan.config.engine_pages:
        k, v = tensors["k_pages"], tensors["v_pages"]
        both = torch.stack([k, v], dim=1)  # a copy: [blocks, 2, ...]
        tensors["k_pages"], tensors["v_pages"] = both[:, 0], both[:, 1]
    return tensors


def cache_tensors(prefix: str, cache: ref.PagedCache) -> dict:
    tensors = {f"{prefix}_pages": upload(cache.storage, "i8")}
    if cache.group_scales is not None:
        tensors[f"{prefix}_groups"] = upload(cache.group_scales, "f8E4M3FN")
    if cache.token_scales is not None:
        tensors[f"{prefix}_tokens"] = upload(cache.token_scales, "f32")
    return tensors


def downloaded_cache(prefix: str, like: ref.PagedCache,
                     tensors: dict) -> ref.PagedCache:
    cache = like.copy()
    cache.storage = download(tensors[f"{prefix}_pages"])
    if like.group_scales is not None:
        cache.group_scales = download(tensors[f"{prefix}_groups"])
    if like.token_scales is not None:
        cache.token_scales = download(tensors[f"{prefix}_tokens"])
    return cache


@dataclasses.dataclass
class PagedRun:
    """A plan on the device after write_k and write_v."""

    plan: PagedPlan
    module: object
    tensors: dict
    k_cache: ref.PagedCache  # the bytes the device holds after the writes
    v_cache: ref.PagedCache

    def decode(self) -> np.ndarray:
        """Runs @decode into a poisoned output; float64 [tokens, heads, D]."""
        self.tensors["out"] = poisoned(self.plan.query.shape, self.plan.dtype)
        invoke(self.module, "decode", self.plan.module.functions["decode"],
               self.tensors)
        torch.cuda.synchronize()
        return activation_values(download(self.tensors["out"]),
                                 self.plan.dtype)

    def reference(self, k_operand=None) -> np.ndarray:
        """float64 attention over the dequantized device cache."""
        plan, config = self.plan, self.plan.config
        with np.errstate(all="ignore"):  # stale pages decode to anything
            keys = self.k_cache.dequantize(
                plan.k_operand if k_operand is None else k_operand)
            values = self.v_cache.dequantize(plan.v_operand)
        return ref.paged_attention_ref(
            activation_values(plan.query, plan.dtype), keys, values,
            plan.block_table, config.seq_lens, plan.query_start,
            num_heads=config.num_heads, softmax_scale=plan.softmax_scale,
            softcap=float(np.float32(config.softcap)), window=config.window,
            sinks=plan.sinks)

    def value_scale(self) -> np.ndarray:
        """max(1, max |V|) over the values each (token, head) row attends
        (all keys of its sequence, for its kv head), [tokens, heads, 1]:
        SPEC §8 scales atol by it."""
        plan, config = self.plan, self.plan.config
        with np.errstate(all="ignore"):
            values = self.v_cache.dequantize(plan.v_operand)
        per_token = attended_value_scale(
            values, plan.block_table, config.seq_lens, config.block_size,
            plan.query_start, plan.query.shape[0])  # [tokens, kv_heads]
        kv_head = np.arange(config.num_heads) // (config.num_heads //
                                                  config.kv_heads)
        return per_token[:, kv_head][..., None]

    def families(self) -> tuple[str, ...]:
        """The results-table rows this case counts in: its cache encodings."""
        config = self.plan.config
        families = tuple(f"{encoding} cache" for encoding in
                         sorted({config.k_encoding, config.v_encoding}))
        if config.query_tokens > 8:
            families += ("prompts (> 8 query tokens)",)
        return families


def run_paged(plan: PagedPlan) -> PagedRun:
    module = COMPILER.load(plan.module.text)
    tensors = {**paged_cache_tensors(plan),
               "k_new": upload(plan.k_new, plan.dtype),
               "v_new": upload(plan.v_new, plan.dtype),
               "slots": upload(plan.slots, "i64"),
               "query": upload(plan.query, plan.dtype),
               "block_table": upload(plan.block_table, "i32"),
               "seq_lens": upload(np.array(plan.config.seq_lens), "i32")}
    for prefix, operand in (("k", plan.k_operand), ("v", plan.v_operand)):
        if operand is not None:
            tensors[f"{prefix}_scale"] = upload(operand, "f32")
    if plan.query_start is not None:
        tensors["query_start"] = upload(plan.query_start, "i32")
    if plan.sinks is not None:
        tensors["sinks"] = upload(plan.sinks, "f32")

    functions = plan.module.functions
    module.take_device_errors()
    invoke(module, "write_k", functions["write_k"], tensors)
    invoke(module, "write_v", functions["write_v"], tensors)
    torch.cuda.synchronize()
    module.check_device_errors()  # valid slots and -1 raise nothing
    return PagedRun(plan, module, tensors,
                    downloaded_cache("k", plan.k_initial, tensors),
                    downloaded_cache("v", plan.v_initial, tensors))


def visible_tokens(plan: PagedPlan) -> np.ndarray:
    """Per query token: does it see at least one mapped key?"""
    config = plan.config
    bs = config.block_size
    visible = []
    for b, (length, n) in enumerate(zip(config.seq_lens, config.counts)):
        positions = np.arange(length)
        mapped = plan.block_table[b, positions // bs] >= 0
        # Mapped keys at positions < p: before[p].
        before = np.concatenate([[0], np.cumsum(mapped)])
        query_pos = length - n + np.arange(n)
        high = np.clip(query_pos + 1, 0, length)
        low = (np.clip(query_pos - config.window + 1, 0, length)
               if config.window > 0 else np.zeros(n, np.int64))
        low = np.minimum(low, high)
        visible.append(before[high] - before[low] > 0)
    return np.concatenate(visible) if visible else np.zeros(0, bool)


# ---------------------------------------------------------------------------
# Cases: a config plus host-side overrides, planned and run once each
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    """A config and the overrides of plan_paged (tables, magnitudes, query
    values, masks). Plans and runs are cached by id: the write test and the
    decode test of a case share one compilation and one write."""

    config: ir.Config
    overrides: dict = dataclasses.field(default_factory=dict)
    label: str = ""

    @property
    def id(self) -> str:
        return self.config.id + (f",{self.label}" if self.label else "")

    def plan(self) -> PagedPlan:
        if self.id not in _PLANS:
            _PLANS[self.id] = plan_paged(self.config, **self.overrides)
        return _PLANS[self.id]

    def run(self) -> PagedRun:
        # A failure (compile error, bad launch) is kept and re-raised by
        # every test of the case instead of being retried.
        if self.id not in _RUNS:
            try:
                _RUNS[self.id] = run_paged(self.plan())
            except Exception as error:  # noqa: BLE001 - re-raised below
                _RUNS[self.id] = error
        if isinstance(_RUNS[self.id], Exception):
            raise _RUNS[self.id]
        return _RUNS[self.id]


_PLANS: dict[str, PagedPlan] = {}
_RUNS: dict[str, object] = {}


def _grid_limit() -> Optional[int]:
    limit = os.environ.get("PATTN_GPU_GRID_LIMIT")
    return int(limit) if limit else None


GRID = [Case(config) for config in ir.paged_grid(_grid_limit())]

#: Deployments people run, symmetric K/V, next to the sampled grid.
NAMED = [Case(config) for config in [
    ir.Config(name="llama-int8", k_encoding="i8", k_scale="tensor",
              v_encoding="i8", v_scale="tensor", kv_heads=8, g=4,
              seq_lens=(0, 33, 200, 17)),
    ir.Config(name="fp8-e4m3", k_encoding="f8e4m3", k_scale="tensor",
              v_encoding="f8e4m3", v_scale="tensor", block_size=32, g=8,
              dtype="bf16", seq_lens=(100, 1, 65)),
    ir.Config(name="ort-int4", k_encoding="i4", k_scale="channel",
              v_encoding="i4", v_scale="channel", head_dim=256, g=6,
              block_size=128, static_tables=True, seq_lens=(300, 129, 2)),
    ir.Config(name="nvfp4-spec", k_encoding="nvfp4", k_scale="token",
              v_encoding="nvfp4", v_scale="token", layout="hnd",
              query_tokens=3, seq_lens=(40, 3, 77)),
    ir.Config(name="gpt-oss", k_encoding="f8e5m2", k_scale="token",
              v_encoding="bf16", v_scale="none", dtype="bf16", head_dim=64,
              g=8, sinks=True, window=128, seq_lens=(300, 129, 5)),
    ir.Config(name="window1-spec", k_encoding="i8", k_scale="token",
              v_encoding="f16", v_scale="none", query_tokens=8, g=4,
              window=1, seq_lens=(8, 30, 19)),
    ir.Config(name="gemma-softcap", k_encoding="bf16", k_scale="none",
              v_encoding="bf16", v_scale="none", dtype="bf16", head_dim=256,
              g=2, softcap=30.0, softmax_scale=0.0625, seq_lens=(45, 120)),
    # An engine's allocation ([blocks, 2, ...], K and V as views): vLLM's
    # NHD f16 cache, the serving int4 preset in HND with speculative
    # tokens, nvfp4 with its separate scale buffers.
    ir.Config(name="engine-f16", kv_heads=8, g=4, engine_pages=True,
              seq_lens=(0, 33, 200, 17)),
    ir.Config(name="engine-i4-hnd", k_encoding="i4", k_scale="channel",
              v_encoding="i4", v_scale="token", layout="hnd", g=4,
              query_tokens=3, engine_pages=True, seq_lens=(5, 300, 17)),
    ir.Config(name="engine-nvfp4", k_encoding="nvfp4", k_scale="token",
              v_encoding="nvfp4", v_scale="token", block_size=32,
              engine_pages=True, seq_lens=(77, 1, 40)),
]]

# Masks: empty sequences, unmapped pages (SPEC §7: zeros, never NaN).
_MASK = ir.Config(name="masks", k_encoding="i4", k_scale="token",
                  v_encoding="f8e4m3", v_scale="tensor", g=4, query_tokens=3,
                  seq_lens=(3, 50, 70, 33), sinks=True)
MASK_CASES = [
    Case(dataclasses.replace(_MASK, name="all-empty", query_tokens=1,
                             seq_lens=(0, 0, 0))),
    Case(_MASK, dict(unmap_all=True), "all-unmapped"),
    Case(_MASK, dict(holes=True), "holes"),
]

# Skipped slots: every other written token has slot -1.
SKIP_CASES = [
    Case(ir.Config(name="skip", k_encoding=k[0], k_scale=k[1],
                   v_encoding=v[0], v_scale=v[1], layout=layout,
                   query_tokens=4, seq_lens=(9, 20, 4)), dict(skip_every=2))
    for k, v, layout in [(("i4", "token"), ("nvfp4", "token"), "hnd"),
                         (("f8e4m3", "tensor"), ("i8", "channel"), "nhd"),
                         (("nvfp4", "tensor"), ("bf16", "none"), "nhd")]
]

#: A batch of 5001 written tokens: the slot check runs on three blocks
#: (2048 slots each), each with its own verdict, and every other token is
#: skipped (slot -1).
LONG_WRITE_CASES = [
    Case(ir.Config(name="long-write", k_encoding="i4", k_scale="token",
                   v_encoding="f8e4m3", v_scale="tensor", kv_heads=1, g=4,
                   query_tokens=3000, query_counts=(3000, 2000, 1),
                   seq_lens=(3000, 2000, 1)), dict(skip_every=2))]


# Prompts (more than 8 query tokens per sequence): whole prompts, chunks of
# a prompt over a cached prefix, and mixed batches of prompt chunks, decode
# tokens and empty sequences, over every encoding and both layouts. The
# auto backend runs the prefill family (the default prompt kernel; the XQA
# query tiles run in test_other_prompt_kernels_match_reference), portable its prompt
# plan; tests below run each through the write, the reference and the
# other backend like the grid.
PROMPTS = [Case(config) for config in [
    ir.Config(name="prompt-f16", kv_heads=1, g=4, query_tokens=4096,
              seq_lens=(4096,)),
    ir.Config(name="prompt-i4-channel", k_encoding="i4", k_scale="channel",
              v_encoding="i4", v_scale="channel", kv_heads=2, g=4,
              query_tokens=1000, query_counts=(257, 1000, 33),
              seq_lens=(257, 1000, 33)),
    ir.Config(name="chunk-nvfp4-hnd", k_encoding="nvfp4", k_scale="token",
              v_encoding="nvfp4", v_scale="tensor", layout="hnd",
              dtype="bf16", kv_heads=2, g=4, query_tokens=128,
              query_counts=(128, 64), seq_lens=(2000, 700)),
    ir.Config(name="mixed-i8", k_encoding="i8", k_scale="tensor",
              v_encoding="f8e4m3", v_scale="tensor", kv_heads=2, g=8,
              query_tokens=300, query_counts=(1, 300, 0, 1, 9),
              seq_lens=(50, 300, 0, 17, 400)),
    # Speculative-decode rows (3 and 4 tokens: at most 16 / g, the split's
    # decode kernel with the prefill family), one just past it (5), a
    # decode token and a chunk, over a folded int4 channel table.
    ir.Config(name="mixed-spec-i4-channel", k_encoding="i4",
              k_scale="channel", v_encoding="nvfp4", v_scale="token",
              kv_heads=2, g=4, query_tokens=200,
              query_counts=(3, 4, 5, 1, 200), seq_lens=(40, 700, 5, 90, 260)),
    # g = 1 (multi-head attention): the split's decode kernel takes up to
    # 8 query tokens (16 / g capped at a decode's 8): 8 and 1 on it, 9 just
    # past it, and a prompt.
    ir.Config(name="mixed-mha-f16", kv_heads=4, g=1, query_tokens=300,
              query_counts=(8, 1, 9, 300), seq_lens=(100, 50, 9, 400)),
    ir.Config(name="prompt-gpt-oss", k_encoding="f8e5m2", k_scale="token",
              v_encoding="bf16", v_scale="none", dtype="bf16", head_dim=64,
              g=8, sinks=True, window=128, query_tokens=500,
              query_counts=(500, 37), seq_lens=(600, 37)),
    ir.Config(name="prompt-gemma", k_encoding="bf16", k_scale="none",
              v_encoding="bf16", v_scale="none", dtype="bf16", head_dim=256,
              g=2, softcap=30.0, softmax_scale=0.0625, query_tokens=200,
              query_counts=(200, 90), seq_lens=(200, 90)),
    ir.Config(name="chunk-i4-token-bs64", k_encoding="i4", k_scale="token",
              v_encoding="i8", v_scale="channel", block_size=64, g=6,
              query_tokens=96, query_counts=(96, 96, 12),
              seq_lens=(1500, 96, 300), static_tables=True),
    ir.Config(name="chunk-engine-i8-hnd", k_encoding="i8", k_scale="token",
              v_encoding="i8", v_scale="token", layout="hnd", kv_heads=2,
              g=4, query_tokens=200, query_counts=(200, 1, 50),
              seq_lens=(900, 40, 50), engine_pages=True),
    ir.Config(name="prompt-e4m3-window1", k_encoding="f8e4m3",
              k_scale="channel", v_encoding="f16", v_scale="none",
              layout="hnd", g=4, window=1, query_tokens=64,
              seq_lens=(64, 100, 64)),
]] + [Case(ir.Config(name="prompt-holes", k_encoding="i4", k_scale="token",
                     v_encoding="nvfp4", v_scale="token", g=4, sinks=True,
                     query_tokens=100, query_counts=(100, 60),
                     seq_lens=(100, 200)), dict(holes=True), "holes")]

# The fold at its extremes (SPEC §5). K is i8 with channel scales; the
# tables and K magnitudes are chosen so that channel 0 has zero codes.
def _fold_config(name: str, static: bool, **fields) -> ir.Config:
    base = dict(name=name, k_encoding="i8", k_scale="channel",
                v_encoding="f8e4m3", v_scale="tensor", head_dim=64,
                kv_heads=1, g=4, seq_lens=(40, 3), static_tables=static)
    base.update(fields)
    return ir.Config(**base)


def _table(first: float, rest, kv_heads=1, head_dim=64) -> np.ndarray:
    """A K channel table whose channel 0 of every head is ``first``."""
    table = np.broadcast_to(np.asarray(rest, np.float32),
                            (kv_heads, head_dim)).copy()
    table[:, 0] = first
    return table


def _magnitude(first: float, rest: float, kv_heads=1, head_dim=64):
    magnitude = np.full((kv_heads, head_dim), rest)
    magnitude[:, 0] = first
    return magnitude


def _query_with_channel0(value: float, rest: float) -> Callable:
    def query(rng, shape):
        q = signed_uniform(rng, shape) * rest
        q[..., 0] = value
        return q
    return query


FLT_MAX = float(np.finfo(np.float32).max)
_SEED_TABLE = _table(1000.0, 1000.0 * np.exp2(
    -np.random.default_rng(11).uniform(0, 3, 64)))
_FLT_MAX_TABLES = {
    # FLT_MAX next to ordinary scales: a clamped N and 131 binades (runs
    # unfolded).
    "one-channel": (_table(FLT_MAX, 2.0 ** -4),
                    _magnitude(1.0, 2.0 ** -4 * 100), "too_wide"),
    # Everything within 20 binades of FLT_MAX: a clamped N, |s / N| > 1,
    # folded (the row exponents absorb it).
    "all-channels": (_table(FLT_MAX, FLT_MAX * np.exp2(
        -np.random.default_rng(12).uniform(0, 20, 64))),
                     _magnitude(1.0, 1.0), "legal"),
}
_WIDE_TABLE = _table(2.0 ** 22, 2.0 ** -4, kv_heads=2, head_dim=128)

SEED_CASES = [
    Case(_fold_config("seed-q100-s1000", static),
         dict(k_table=_SEED_TABLE, k_magnitude=_magnitude(1.0, 400.0),
              query=_query_with_channel0(100.0, 1e-2)))
    for static in (False, True)]
FLT_MAX_CASES = [
    Case(_fold_config(f"flt-max-{shape}", static, softmax_scale=2.0,
                      seq_lens=(20, 7)),
         dict(k_table=table, k_magnitude=magnitude,
              query=_query_with_channel0(10000.0, 0.05)), expected)
    for shape, (table, magnitude, expected) in _FLT_MAX_TABLES.items()
    for static in (False, True)]
WIDE_CASES = [
    Case(_fold_config("wide-table", static, head_dim=128, kv_heads=2,
                      v_encoding="i4", v_scale="token"),
         dict(k_table=_WIDE_TABLE,
              k_magnitude=_magnitude(1.0, 2.0 ** -4 * 120, 2, 128)))
    for static in (False, True)]

# The fold for any query magnitude (issue 8, SPEC §5): query magnitudes
# 1e-4 ... 1e4 times tables spanning 0 ... 60 binades. The table's top is set
# so the logits stay O(1) whatever the query's magnitude (the channels'
# codes are about 100); the spread of channel scales is random. Tables up
# to 24 binades fold (before row renormalization, |q| ~ 0.02 on a 24-binade
# table was 6.4x the tolerance); wider ones run unfolded (static) or behind
# the device guard (dynamic), and must match as well.
FOLD_QUERY_MAGNITUDES = (1e-4, 1e-2, 1.0, 1e2, 1e4)
FOLD_TABLE_SPANS = (0, 12, 24, 40, 60)


def _spanning_table(span: int, query_magnitude: float, kv_heads=2,
                    head_dim=128) -> np.ndarray:
    rng = np.random.default_rng(span + 7)
    top = 2.0 / (query_magnitude * 100.0 * np.sqrt(head_dim))
    exponents = rng.uniform(-span, 0, (kv_heads, head_dim))
    exponents[:, 0] = 0.0  # the span is exact
    exponents[:, 1] = -span
    return (top * np.exp2(exponents)).astype(np.float32)


def _fold_grid_case(span: int, magnitude: float, static: bool) -> Case:
    table = _spanning_table(span, magnitude)
    config = _fold_config(
        f"fold-grid-{'static' if static else 'dynamic'}-span{span}-"
        f"q{magnitude:g}", static, head_dim=128, kv_heads=2, g=4,
        query_tokens=2, v_encoding="i4", v_scale="token",
        seq_lens=(50, 7, 129), softmax_scale=1.0)

    def query(rng, shape):
        return signed_uniform(rng, shape) * magnitude
    return Case(config, dict(k_table=table, k_magnitude=100.0 * table,
                             query=query))


def _half_zero_case(magnitude: float, static: bool) -> Case:
    """The discriminating case (test_reference has its CPU twin): half the
    channels at the table's top with zero codes, half 12 binades lower
    carrying the logit. The plain fold flushed the low half at |q| = 1e-4."""
    top = 3.0 * 2.0 ** 12 / (magnitude * 100.0 * 8.0)
    table = np.full((2, 128), top, np.float32)
    table[:, 64:] = np.float32(top * 2.0 ** -12)
    k_magnitude = 100.0 * table
    k_magnitude[:, :64] = 0.0
    config = _fold_config(
        f"fold-half-zero-{'static' if static else 'dynamic'}-q{magnitude:g}",
        static, head_dim=128, kv_heads=2, g=4, query_tokens=2,
        v_encoding="i4", v_scale="token", seq_lens=(50, 7, 129),
        softmax_scale=1.0)

    def query(rng, shape):
        signs = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        return rng.uniform(0.5, 1.0, shape) * signs * magnitude
    return Case(config, dict(k_table=table, k_magnitude=k_magnitude,
                             query=query))


FOLD_GRID_CASES = [
    _fold_grid_case(span, magnitude, static=False)
    for span in FOLD_TABLE_SPANS for magnitude in FOLD_QUERY_MAGNITUDES] + [
    _fold_grid_case(span, magnitude, static=True)
    for span in (0, 24, 60) for magnitude in (1e-4, 1e4)] + [
    _half_zero_case(magnitude, static)
    for magnitude in (1e-4, 1.0, 1e4) for static in (False, True)]

# CUDA graphs. graph-dynamic starts with a K table whose channel 0 has zero
# codes under scale 1; the test then swaps in a table 34 binades wide.
GRAPH_CASES = [
    Case(_fold_config("graph-dynamic", False, head_dim=128, kv_heads=2, g=6,
                      v_encoding="i4", v_scale="channel",
                      seq_lens=(70, 33, 1)),
         dict(k_table=_table(1.0, 2.0 ** -4, 2, 128),
              k_magnitude=_magnitude(1e-3, 2.0 ** -4 * 120, 2, 128))),
    Case(ir.Config(name="graph-nvfp4", k_encoding="nvfp4", k_scale="token",
                   v_encoding="f8e4m3", v_scale="token", layout="hnd",
                   block_size=32, head_dim=64, g=8, sinks=True, window=40,
                   softcap=30.0, seq_lens=(100, 0, 41))),
    Case(ir.Config(name="graph-spec", k_encoding="i8", k_scale="tensor",
                   v_encoding="i8", v_scale="tensor", query_tokens=4,
                   dtype="bf16", seq_lens=(64, 4, 90))),
]

# No NaN or inf from finite input (SPEC §2, §8): every encoding as K (and,
# rotated, as V), f16 and bf16 activations, K scales drawn log-uniformly
# from [1e-30, 1e30] (a tensor scale or a channel table: neither foldable
# nor bounded), K values from 2^-60 (bf16; 2^-14 for f16) up to the
# activation's range and queries over [1e-4, 1e4].
def _finite_case(index: int, k_encoding: str) -> Case:
    rng = np.random.default_rng(100 + index)
    dtype = ("f16", "bf16")[index % 2]
    k_scale = {"f16": "none", "bf16": "none", "nvfp4": "tensor"}.get(
        k_encoding, ("tensor", "channel", "token")[index % 3])
    v_encoding = ir.ENCODINGS[(index + 3) % len(ir.ENCODINGS)]
    v_scale = {"f16": "none", "bf16": "none", "nvfp4": "token"}.get(
        v_encoding, ("channel", "token", "tensor")[index % 3])
    config = ir.Config(name=f"finite-{index}", k_encoding=k_encoding,
                       k_scale=k_scale, v_encoding=v_encoding,
                       v_scale=v_scale, dtype=dtype, head_dim=64, kv_heads=2,
                       g=4, query_tokens=2, seq_lens=(37, 5, 70))
    low, high = (-60, 100) if dtype == "bf16" else (-14, 15)
    magnitude = np.exp2(rng.uniform(low, high, (2, 64)))
    table = None
    if k_scale == "tensor":
        table = np.array([10.0 ** rng.uniform(-30, 30)], np.float32)
    elif k_scale == "channel":
        table = (10.0 ** rng.uniform(-30, 30, (2, 64))).astype(np.float32)

    def query(rng, shape):
        return signed_uniform(rng, shape) * 10.0 ** rng.uniform(-4, 4, shape)
    return Case(config, dict(k_table=table, k_magnitude=magnitude,
                             query=query))


FINITE_CASES = [_finite_case(i, k) for i, k in enumerate(ir.ENCODINGS)] + [
    # The probe of issue 8: a K channel scale of FLT_MAX, softmax_scale 2,
    # q = 1 and K codes of 1: the true logits exceed fp32, which made the
    # running maximum +inf and every row NaN (inf - inf).
    Case(_fold_config("finite-flt-max-logit", False, dtype="bf16",
                      softmax_scale=2.0, seq_lens=(6, 3)),
         dict(k_table=_table(FLT_MAX, FLT_MAX),
              k_magnitude=_magnitude(3.0e38, 3.0e38),
              query=lambda rng, shape: np.ones(shape)))]

SPECIAL = MASK_CASES + SKIP_CASES + LONG_WRITE_CASES + SEED_CASES + FLT_MAX_CASES + WIDE_CASES \
    + FOLD_GRID_CASES + GRAPH_CASES + FINITE_CASES


def _ids(case) -> str:
    return case.id


@pytest.fixture(scope="module", autouse=True)
def _compile_everything_up_front():
    """Plans every case and starts compiling all modules in the background,
    so that compile time overlaps the first tests."""
    COMPILER.prefetch(case.plan().module.text
                      for case in GRID + NAMED + PROMPTS)
    COMPILER.prefetch(mla_plan(config).module.text for config in MLA_CASES)
    COMPILER.prefetch(case.plan().module.text for case in SPECIAL)
    yield
    COMPILER.close()


# ---------------------------------------------------------------------------
# Grid and named deployments
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", GRID + NAMED + PROMPTS, ids=_ids)
def test_write_cache_bit_exact(case):
    run = case.run()
    assert_cache_equal(run.k_cache, run.plan.k_expected, "K cache")
    assert_cache_equal(run.v_cache, run.plan.v_expected, "V cache")


@pytest.mark.parametrize("case", GRID + NAMED + PROMPTS, ids=_ids)
def test_decode_matches_reference(case, gpu_results):
    run = case.run()
    out = run.decode()
    assert_close(out, run.reference(), case.config.dtype, "decode",
                 gpu_results, run.families(), run.value_scale())
    # Rows that see no key (empty sequences, masked pages) are exact zeros.
    hidden = ~visible_tokens(run.plan)
    assert not out[hidden].any(), "a row with no visible key is not zero"


@pytest.mark.parametrize("case", GRID + NAMED + PROMPTS, ids=_ids)
def test_backends_agree(case, gpu_results):
    """The other backend's lowering of the same program, run on the same
    cache bytes and inputs, agrees within SPEC §8 (XQA vs portable where
    the op is eligible; the same kernel twice where it is not)."""
    run = case.run()
    ours = run.decode()
    other = pattn.load(pattn.compile(case.plan().module.text, chips=[CHIP],
                                     backend=OTHER_BACKEND))
    tensors = dict(run.tensors)
    tensors["out"] = poisoned(run.plan.query.shape, run.plan.dtype)
    invoke(other, "decode", run.plan.module.functions["decode"], tensors)
    torch.cuda.synchronize()
    theirs = activation_values(download(tensors["out"]), run.plan.dtype)
    assert_close(ours, theirs, case.config.dtype,
                 f"{BACKEND} vs {OTHER_BACKEND}", gpu_results,
                 ("backends agree",), run.value_scale())


def decode_compiled_with(run, case, **options):
    """`case`'s decode compiled with pattn.compile `options` (on BACKEND),
    run on `run`'s cache bytes and inputs into a poisoned output; returns
    the output's values."""
    module = pattn.load(pattn.compile(case.plan().module.text, chips=[CHIP],
                                      backend=BACKEND, **options))
    tensors = dict(run.tensors)
    tensors["out"] = poisoned(run.plan.query.shape, run.plan.dtype)
    invoke(module, "decode", run.plan.module.functions["decode"], tensors)
    torch.cuda.synchronize()
    return activation_values(download(tensors["out"]), run.plan.dtype)


#: The prompt kernels besides the default (the prefill family, on wgmma
#: where the chip has it and the caches are quantized): the XQA decode
#: kernel in query tiles (the prompt kernel before the prefill family), the
#: prefill family on mma.sync (every chip's), and on wgmma for every cache
#: (16-bit ones read in place; mma.sync where the chip has no wgmma).
OTHER_PROMPT_KERNELS = ("xqa", "prefill-mma-sync", "prefill-wgmma")


@pytest.mark.parametrize("kernel", OTHER_PROMPT_KERNELS)
@pytest.mark.parametrize("case", PROMPTS, ids=_ids)
def test_other_prompt_kernels_match_reference(case, kernel, gpu_results):
    """Each other prompt kernel on every prompt case, against the float64
    reference on the same cache bytes and inputs, with the same checks as
    the suite's own decode (which runs the prompts on the default)."""
    if BACKEND == "portable":
        pytest.skip("the prompt kernels are tensor-core plans: run with "
                    "PATTN_TEST_BACKEND=auto")
    run = case.run()
    out = decode_compiled_with(run, case, prompt_kernel=kernel)
    assert_close(out, run.reference(), case.config.dtype,
                 f"prompt kernel {kernel}", gpu_results,
                 (f"prompt kernel {kernel}",), run.value_scale())
    hidden = ~visible_tokens(run.plan)
    assert not out[hidden].any(), "a row with no visible key is not zero"


@pytest.mark.parametrize("case", GRID + NAMED, ids=_ids)
def test_scores_ahead_matches_reference(case, gpu_results):
    """The XQA decode plans that score a tile ahead (xqa_scores_ahead: tile
    t + 1's scores under tile t's softmax and P V; plans of at most 8 rows,
    the others unchanged) on every decode case, against the float64
    reference on the same cache bytes and inputs."""
    if BACKEND == "portable":
        pytest.skip("scores_ahead is a tensor-core plan: run with "
                    "PATTN_TEST_BACKEND=auto")
    run = case.run()
    out = decode_compiled_with(run, case, xqa_scores_ahead=True)
    assert_close(out, run.reference(), case.config.dtype, "scores ahead",
                 gpu_results, ("scores ahead",), run.value_scale())
    hidden = ~visible_tokens(run.plan)
    assert not out[hidden].any(), "a row with no visible key is not zero"


def has_clusters(chip: str) -> bool:
    """Whether `chip` ("sm_90a") has thread-block clusters (sm_90 and up)."""
    return int(chip.removeprefix("sm_").rstrip("a")) >= 90


#: XQA plan variants: thread-block clusters (sm_90 and up) of the blocks of two
#: consecutive KV heads meeting at a barrier each tile (decodes whose KV
#: heads are even; the others unchanged), and four splits a (sequence, KV
#: head) that merge themselves into the output with no merge launch
#: (decodes of guarded ops keep the merge kernel; four splits of a short
#: sequence leave some empty, whose blocks still meet the cluster and weigh
#: nothing). And a plan without clusters whose lone split (the host's
#: choice for the suite's short sequences) merges its own rows.
XQA_PLAN_VARIANTS = {"cluster heads": {"xqa_cluster_heads": 2},
                     "cluster splits": {"xqa_cluster_splits": 4},
                     "merge unsplit": {"xqa_merge_unsplit": True}}


def runs_variant(variant: str, chip: str) -> bool:
    """Whether XQA_PLAN_VARIANTS[variant] runs on `chip` ("sm_90a"):
    clusters need sm_90 and up."""
    return not variant.startswith("cluster") or has_clusters(chip)


@pytest.mark.parametrize("variant", XQA_PLAN_VARIANTS)
@pytest.mark.parametrize("case", GRID + NAMED, ids=_ids)
def test_xqa_plan_variants_match_reference(case, variant, gpu_results):
    """Each XQA plan variant on every decode case, against the float64
    reference on the same cache bytes and inputs."""
    if BACKEND == "portable":
        pytest.skip("XQA plan variants are tensor-core plans: run with "
                    "PATTN_TEST_BACKEND=auto")
    if not runs_variant(variant, CHIP):
        pytest.skip(f"{CHIP} has no thread-block clusters (sm_90 and up)")
    run = case.run()
    out = decode_compiled_with(run, case, **XQA_PLAN_VARIANTS[variant])
    label = variant
    assert_close(out, run.reference(), case.config.dtype, label,
                 gpu_results, (label,), run.value_scale())
    hidden = ~visible_tokens(run.plan)
    assert not out[hidden].any(), "a row with no visible key is not zero"


@pytest.mark.parametrize("case", GRID + NAMED, ids=_ids)
def test_merge_unsplit_gives_the_merge_kernels_bits(case):
    """The merge-unsplit plan against the default plan on the same cache
    bytes and inputs: where the host picks one split the block merges its
    rows with the merge kernel's own code (mergeWorkspaceRow), and with
    several splits both launch the merge kernel, so every output element
    has the same bits."""
    if BACKEND == "portable":
        pytest.skip("merges_unsplit is a tensor-core plan: run with "
                    "PATTN_TEST_BACKEND=auto")
    run = case.run()
    want = run.decode()
    got = decode_compiled_with(run, case, xqa_merge_unsplit=True)
    differ = np.argwhere((got != want) | (np.signbit(got) != np.signbit(want)))
    assert differ.size == 0, (
        f"{len(differ)} outputs differ from the merge kernel's, first at "
        f"{tuple(differ[0])}: {got[tuple(differ[0])]!r} vs "
        f"{want[tuple(differ[0])]!r}")


#: A build for a chip without fp8 conversion next to this one: two kernel
#: modules (bit tricks; cvt.rn.f16x2.e4m3x2) and a host-side dispatch on the
#: device's compute capability.
DISPATCH_CHIPS = ["sm_80", CHIP]
DISPATCH_CASE = NAMED[1]
assert DISPATCH_CASE.config.k_encoding == "f8e4m3"


def _has_conversion(encoding: str) -> bool:
    """Does this chip have the hardware conversion for `encoding` (the
    target table: e4m3 from sm_89, e2m1 on sm_100a/sm_120a)?"""
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor >= (89 if encoding == "f8e4m3" else 100)


@pytest.mark.parametrize("case", [NAMED[1], NAMED[3]], ids=_ids)
def test_bit_tricks_and_hardware_conversion_agree_bit_for_bit(case):
    """Chips without the conversion instruction decode with f16 bit patterns,
    two codes per f16x2 multiply; the values must be exactly those of
    cvt.rn.f16x2.e4m3x2 / e2m1x2. Built both ways, the decode matches bit for
    bit. This runs the bit-trick path on a chip that has the instruction."""
    encoding = case.config.k_encoding
    assert encoding in ("f8e4m3", "nvfp4")
    if not _has_conversion(encoding):
        pytest.skip(f"{CHIP} has no {encoding} conversion to compare with")
    run = case.run()
    hardware = run.decode()
    soft = pattn.load(pattn.compile(case.plan().module.text, chips=[CHIP], backend=BACKEND,
                                    hardware_conversions=False))
    assert np.array_equal(hardware,
                          dataclasses.replace(run, module=soft).decode()), \
        f"{encoding}: bit tricks and the hardware conversion differ"


def test_mla_bit_tricks_and_hardware_e4m3_agree_bit_for_bit():
    """The same for an MLA fp8_ds_mla latent (e4m3 codes in records)."""
    if not _has_conversion("f8e4m3"):
        pytest.skip(f"{CHIP} has no e4m3 conversion to compare with")
    config = MLA_CASES[0]
    assert config.preset == "fp8_ds_mla"
    plan, module, tensors, _ = mla_run(config)
    soft = pattn.load(pattn.compile(plan.module.text, chips=[CHIP], backend=BACKEND,
                                    hardware_conversions=False))
    outs = []
    for built in (module, soft):
        tensors["out"] = poisoned((plan.query.shape[0], config.num_heads,
                                   config.latent), config.dtype)
        invoke(built, "mla", plan.module.functions["mla"], tensors)
        torch.cuda.synchronize()
        outs.append(_bits(tensors["out"]))
    assert torch.equal(outs[0], outs[1]), \
        "MLA e4m3 latent: bit tricks and the hardware conversion differ"


def test_two_class_build_runs_the_device_class():
    """Built for sm_80 and this chip, the decode takes the device's kernels
    and matches the single-chip build bit for bit."""
    major, minor = torch.cuda.get_device_capability()
    if major * 10 + minor < 89:
        pytest.skip(f"{CHIP} is in sm_80's conversion class: no dispatch")
    run = DISPATCH_CASE.run()
    single = run.decode()
    text = DISPATCH_CASE.plan().module.text
    both = pattn.load(pattn.compile(text, chips=DISPATCH_CHIPS, backend=BACKEND))
    dispatched = dataclasses.replace(run, module=both).decode()
    assert np.array_equal(single, dispatched), \
        "the two-class build differs from the single-chip build"


# ---------------------------------------------------------------------------
# Masks and skipped slots
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", MASK_CASES, ids=_ids)
def test_masked_rows(case, gpu_results):
    """Zero-length sequences and fully masked rows give exact zeros, never
    NaN (SPEC §7); -1 pages inside a sequence are masked."""
    run = case.run()
    out = run.decode()
    if case.label != "holes":
        assert not out.any(), "fully masked rows must be exact zeros"
    assert_close(out, run.reference(), case.config.dtype, "masked decode",
                 gpu_results, ("masked rows",))


@pytest.mark.parametrize("case", SKIP_CASES, ids=_ids)
def test_slot_minus_one_is_skipped(case):
    """Tokens with slot -1 write nothing: every byte not at a written slot
    (pages, group scales, token scales) keeps its stale value."""
    run = case.run()
    assert (run.plan.slots == -1).sum() >= 3
    assert_cache_equal(run.k_cache, run.plan.k_expected, "K cache")
    assert_cache_equal(run.v_cache, run.plan.v_expected, "V cache")

    # A batch in which every token is skipped leaves the cache untouched.
    tensors = dict(run.tensors)
    tensors["slots"] = upload(np.full(run.plan.slots.shape, -1), "i64")
    run.module.take_device_errors()
    invoke(run.module, "write_k", run.plan.module.functions["write_k"],
           tensors)
    torch.cuda.synchronize()
    assert_cache_equal(downloaded_cache("k", run.plan.k_initial, tensors),
                       run.k_cache, "K cache after an all -1 batch")
    # Skipping is not an error.
    assert run.module.take_device_errors() == 0


@pytest.mark.parametrize("case", SKIP_CASES + LONG_WRITE_CASES, ids=_ids)
def test_out_of_range_slot_rejects_the_whole_batch(case):
    """SPEC §7: a batch holding a slot past the cache's pages (or below -1)
    writes nothing at all, valid slots included: no partial write, and no
    out-of-bounds store (which would poison the CUDA context). The caller
    learns it after a sync from the device error word. A long batch is
    checked by several blocks: a bad slot in the range of the first, a
    middle or the last check block rejects the whole batch alike."""
    run = case.run()
    run.module.take_device_errors()  # start clean
    capacity = run.tensors["k_pages"].shape[0] * case.config.block_size
    count = run.plan.slots.shape[0]
    places = (count - 1,) if count <= 2048 else (0, 2048 + 7, count - 1)
    for at in places:
        for bad in (capacity, capacity + 12345, -2):
            tensors = dict(run.tensors)
            slots = run.plan.slots.copy()
            slots[at] = bad  # the other slots are valid
            tensors["slots"] = upload(slots, "i64")
            for name in ("write_k", "write_v"):
                invoke(run.module, name, run.plan.module.functions[name],
                       tensors)
            torch.cuda.synchronize()
            with pytest.raises(pattn.DeviceError, match="slot was below -1"):
                run.module.check_device_errors()
            assert run.module.take_device_errors() == 0, "the check clears it"
            for prefix, cache in (("k", run.k_cache), ("v", run.v_cache)):
                assert_cache_equal(
                    downloaded_cache(prefix,
                                     getattr(run.plan, f"{prefix}_initial"),
                                     tensors),
                    cache, f"{prefix.upper()} cache after slot {bad} at {at}")


@pytest.mark.parametrize("case", LONG_WRITE_CASES, ids=_ids)
def test_long_batch_writes_bit_exact(case):
    """The three-block slot check passes a clean long batch: every written
    token's bytes are the reference quantizer's, skipped tokens (-1) and the
    rest of the cache keep their stale bytes."""
    run = case.run()
    assert run.plan.slots.shape[0] > 2 * 2048
    assert_cache_equal(run.k_cache, run.plan.k_expected, "K cache")
    assert_cache_equal(run.v_cache, run.plan.v_expected, "V cache")


def _misaligned(tensor: torch.Tensor) -> torch.Tensor:
    """The same elements, contiguous, at a data pointer one element past an
    allocation's start (as a view into a larger buffer can be): an f16 row
    off its 8-byte vector, a page one byte off its word."""
    flat = torch.empty(tensor.numel() + 1, dtype=tensor.dtype,
                       device=tensor.device)
    view = flat[1:].view(tensor.shape)
    view.copy_(tensor)
    return view


def _misaligned_cases() -> list:
    """One grid case per K and per V encoding, head_dim 64 (a pair a lane)
    and 128/256 (a run of four), own (not engine) pages."""
    chosen: dict = {}
    for case in GRID:
        config = case.config
        if config.engine_pages:
            continue
        for encoding in (config.k_encoding, config.v_encoding):
            wide = config.head_dim % 128 == 0
            chosen.setdefault((encoding, wide), case)
    unique = {case.id: case for case in chosen.values()}
    return list(unique.values())


MISALIGNED_CASES = _misaligned_cases()


@pytest.mark.parametrize("case", MISALIGNED_CASES, ids=_ids)
def test_misaligned_buffers_write_bit_exact(case):
    """The write kernels load a lane's values and store its codes as one
    vector only where the buffers are aligned for it (a uniform check of
    the pointers and strides); values and pages at odd addresses take the
    element-wise path and write the same bytes."""
    run = case.run()
    tensors = dict(run.tensors)
    for prefix in ("k", "v"):
        initial = getattr(run.plan, f"{prefix}_initial")
        for name, tensor in cache_tensors(prefix, initial).items():
            tensors[name] = _misaligned(tensor)
        tensors[f"{prefix}_new"] = _misaligned(run.tensors[f"{prefix}_new"])
        assert tensors[f"{prefix}_pages"].data_ptr() % 2 == 1
        assert tensors[f"{prefix}_new"].data_ptr() % 8 != 0
    run.module.take_device_errors()
    for name in ("write_k", "write_v"):
        invoke(run.module, name, run.plan.module.functions[name], tensors)
    torch.cuda.synchronize()
    run.module.check_device_errors()
    for prefix in ("k", "v"):
        written = downloaded_cache(
            prefix, getattr(run.plan, f"{prefix}_initial"), tensors)
        assert_cache_equal(written, getattr(run.plan, f"{prefix}_expected"),
                           f"{prefix.upper()} cache from misaligned buffers")


def _every_value_cases() -> list:
    """A case per quantized K encoding and scale granularity with f16
    values, and one per encoding with bf16 values (own pages; the named
    deployments first)."""
    chosen: dict = {}
    for case in NAMED + GRID:
        config = case.config
        if config.engine_pages or config.k_encoding in ("f16", "bf16"):
            continue
        key = ((config.k_encoding, config.k_scale) if config.dtype == "f16"
               else (config.k_encoding, "bf16"))
        chosen.setdefault(key, case)
    return list(chosen.values())


EVERY_VALUE_CASES = _every_value_cases()


@pytest.mark.parametrize("case", EVERY_VALUE_CASES, ids=_ids)
def test_every_activation_value_writes_bit_exact(case):
    """Every finite f16 (or bf16) value, in rows of the case's K cache,
    written by write_k in batches of the cache's capacity: every page byte
    (and group and token scale) is the reference quantizer's. The codes'
    rounding ties, subnormals and saturation all come up, on whichever
    conversion the chip's module uses (hardware fp8 on sm_89 and up)."""
    run = case.run()
    plan, config = run.plan, case.config
    bits = np.arange(1 << 16, dtype=np.uint16)
    bits = bits[np.isfinite(activation_values(bits, config.dtype))]
    per_token = config.kv_heads * config.head_dim
    bits = np.resize(bits, -(-bits.size // per_token) * per_token)
    rows = bits.reshape(-1, config.kv_heads, config.head_dim)
    capacity = run.tensors["k_pages"].shape[0] * config.block_size
    rng = np.random.default_rng(7)
    operands = [plan.k_operand]
    if config.k_scale == "tensor" and config.k_encoding != "nvfp4":
        # A tensor scale is divided by through its reciprocal where that is
        # exact (f16 values, 2^-64 <= |s| <= 2^64): scales across that
        # range, its ends and just past them (the division's path).
        exponents = list(rng.uniform(-40, 40, 12)) + [-64, 64]
        operands += [np.array([m * 2.0 ** e], np.float32) for m, e in
                     zip(rng.uniform(1, 2, len(exponents)), exponents)]
        operands += [np.array([v], np.float32) for v in
                     (2.0 ** -64, 2.0 ** 64, np.nextafter(
                         np.float32(2.0 ** -64), np.float32(0)),
                      np.nextafter(np.float32(2.0 ** 64), np.float32(np.inf)))]
    for operand in operands:
        for start in range(0, rows.shape[0], capacity):
            chunk = rows[start:start + capacity]
            slots = rng.permutation(capacity)[:chunk.shape[0]].astype(
                np.int64)
            expected = plan.k_initial.copy()
            expected.write(activation_values(chunk, config.dtype), slots,
                           operand)
            tensors = dict(run.tensors)
            tensors.update(cache_tensors("k", plan.k_initial))
            tensors["k_new"] = upload(chunk, config.dtype)
            tensors["slots"] = upload(slots, "i64")
            if operand is not None:
                tensors["k_scale"] = upload(operand, "f32")
            run.module.take_device_errors()
            invoke(run.module, "write_k", plan.module.functions["write_k"],
                   tensors)
            torch.cuda.synchronize()
            run.module.check_device_errors()
            scale = "" if operand is None or operand.size != 1 \
                else f", scale {float(operand[0]):.6g}"
            assert_cache_equal(
                downloaded_cache("k", plan.k_initial, tensors), expected,
                f"K cache, values {start * per_token}+{scale}")


# ---------------------------------------------------------------------------
# The fold at its extremes (SPEC §5)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", SEED_CASES, ids=_ids)
def test_seed_fold_q100_scale1000(case, gpu_results):
    """ORT #32515/#32520: q = 100 on a channel whose K scale is 1000 and
    whose K codes are zero. Folded without normalization, fp16(100 * 1000)
    is inf and inf * 0 = NaN; with N = 1024 the result is finite."""
    assert ref.fold_legality(_SEED_TABLE, 0.125) == "legal"
    run = case.run()
    codes = run.k_cache.storage.view(np.int8)
    first_page = run.plan.block_table[0, 0]
    assert not codes[first_page, ..., 0].any(), "channel 0 codes must be 0"
    out = run.decode()
    assert_close(out, run.reference(), case.config.dtype, "seed fold",
                 gpu_results, ("fold extremes",), run.value_scale())


@pytest.mark.parametrize("case", FLT_MAX_CASES, ids=_ids)
def test_flt_max_channel_scale(case, gpu_results):
    """A K table holding FLT_MAX with softmax_scale 2: the normalizer would
    need 2^128 and is clamped to 2^125, so |s / N| reaches 8. Within 24
    binades the fold takes it (the row exponents keep the folded query in
    [1, 2]); next to 2^-4 scales it runs unfolded. Nothing may compute
    q * FLT_MAX (q is 10000 on that channel; its codes are 0)."""
    assert ref.fold_legality(case.overrides["k_table"], 2.0) == case.label
    run = case.run()
    out = run.decode()
    assert_close(out, run.reference(), case.config.dtype, "FLT_MAX table",
                 gpu_results, ("fold extremes",), run.value_scale())


@pytest.mark.parametrize("case", FOLD_GRID_CASES, ids=_ids)
def test_fold_holds_for_any_query_and_table(case, gpu_results):
    """Query magnitudes 1e-4 ... 1e4 times K channel tables spanning 0 ...
    60 binades (folded up to 24, static at compile time or dynamic on the
    device; unfolded beyond) against float64 attention over the unfolded,
    dequantized cache: within SPEC §8 on the backend under test. Before row
    renormalization, small |q| flushed channels that matter (issue 8: 6.4x
    the tolerance)."""
    span = ref.binade_span(case.overrides["k_table"])
    assert ref.fold_legality(case.overrides["k_table"], 1.0) == \
        ("legal" if span <= ref.FOLD_BINADE_BUDGET else "too_wide")
    run = case.run()
    out = run.decode()
    assert_close(out, run.reference(), case.config.dtype, "fold grid",
                 gpu_results, ("fold any query",), run.value_scale())


@pytest.mark.parametrize("case", FINITE_CASES, ids=_ids)
def test_finite_input_gives_finite_output(case, gpu_results):
    """Whatever the scales and magnitudes, a decode over finite caches and
    queries is finite: overflowing logits saturate (the softmax then weighs
    the saturated keys), f16/bf16 caches saturate on write."""
    run = case.run()
    plan, config = run.plan, run.plan.config
    # The rows the sequences hold (stale pages start as random bytes, NaN
    # patterns included, and are never read).
    held = [(plan.block_table[b, key // config.block_size],
             key % config.block_size)
            for b, length in enumerate(config.seq_lens)
            for key in range(length)
            if plan.block_table[b, key // config.block_size] >= 0]
    pages, offsets = (np.array(axis, np.int64) for axis in zip(*held))
    for name in ("k", "v"):
        cache = getattr(run, f"{name}_cache")
        if cache.encoding in ("f16", "bf16"):
            with np.errstate(all="ignore"):
                values = cache.dequantize(getattr(plan, f"{name}_operand"))
            rows = values[pages, offsets]
            assert np.isfinite(rows).all(), f"{name} cache holds non-finite"
    out = run.decode()
    bad = int((~np.isfinite(out)).sum())
    gpu_results.record_finite(bad)
    assert bad == 0, f"{bad} of {out.size} outputs are NaN or inf"


@pytest.mark.parametrize("case", WIDE_CASES, ids=_ids)
def test_channel_table_beyond_24_binades(case, gpu_results):
    """Channel 0 at 2^22 (zero codes), the others at 2^-4: 26 binades.
    Channel 0 dominates every folded row, so the other channels' folded
    query lies 26 binades below it and flushes, although their terms are
    the whole logit (channel 0's codes are zero): the case the binade budget
    exists for. The device guard (dynamic) or the compile-time check
    (static) must take the unfolded path and match the reference."""
    assert ref.fold_legality(_WIDE_TABLE, ref.default_softmax_scale(128)) \
        == "too_wide"
    run = case.run()
    out = run.decode()
    want = run.reference()
    assert_close(out, want, case.config.dtype, "wide table", gpu_results,
                 ("fold extremes",), run.value_scale())
    # The case discriminates: the flushed fold is uniform attention.
    plan = run.plan
    with np.errstate(all="ignore"):
        uniform = ref.paged_attention_ref(
            np.zeros(plan.query.shape), run.k_cache.dequantize(plan.k_operand),
            run.v_cache.dequantize(plan.v_operand), plan.block_table,
            case.config.seq_lens, plan.query_start,
            softmax_scale=plan.softmax_scale)
    assert np.abs(want - uniform).max() > 50 * TOLERANCE["f16"][0]


# ---------------------------------------------------------------------------
# CUDA graphs
# ---------------------------------------------------------------------------


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view(torch.int16).clone()


def _capture(call) -> "torch.cuda.CUDAGraph":
    """`call` captured in a CUDA graph, after a warm-up on a side stream
    (the torch.cuda.graph recipe)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return graph


@pytest.mark.parametrize("case", GRAPH_CASES, ids=_ids)
def test_cuda_graph_replay_matches_eager(case, gpu_results):
    """Decode captured in a CUDA graph replays bit for bit like the eager
    call, also after its inputs change in place (SPEC §7: launch shapes
    depend on host-known sizes only, no device readback)."""
    run = case.run()
    plan, tensors = run.plan, run.tensors
    signature = plan.module.functions["decode"]
    tensors["out"] = poisoned(plan.query.shape, plan.dtype)
    out = tensors["out"]

    def decode():
        invoke(run.module, "decode", signature, tensors)

    decode()
    torch.cuda.synchronize()
    eager = _bits(out)
    graph = _capture(decode)

    def replay() -> torch.Tensor:
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        return _bits(out)

    def eager_run() -> torch.Tensor:
        out.fill_(float("nan"))
        decode()
        torch.cuda.synchronize()
        return _bits(out)

    assert torch.equal(replay(), eager), "replay differs from the eager call"

    # New query values, written into the captured buffer.
    rng = np.random.default_rng(13)
    new_query = activation_bits(signed_uniform(rng, plan.query.shape),
                                plan.dtype)
    tensors["query"].copy_(upload(new_query, plan.dtype))
    replayed = replay()
    assert torch.equal(replayed, eager_run()), "replay after a new query"
    assert not torch.equal(replayed, eager), "the new query changed nothing"

    if case.config.name == "graph-dynamic":
        # Channel 0 jumps to 2^30: 34 binades, so the captured guard must now
        # pick the unfolded kernel. Its codes are zero, so the reference is
        # unchanged; the folded kernel would flush every other channel.
        wide = _table(2.0 ** 30, 2.0 ** -4, 2, 128)
        assert ref.fold_legality(wide, plan.softmax_scale) == "too_wide"
        tensors["query"].copy_(upload(plan.query, plan.dtype))
        tensors["k_scale"].copy_(upload(wide, "f32"))
        replayed = replay()
        assert torch.equal(replayed, eager_run()), "replay after a new table"
        got = activation_values(replayed.cpu().numpy().view(np.uint16),
                                plan.dtype)
        assert_close(got, run.reference(k_operand=wide), plan.dtype,
                     "graph replay with a table beyond 24 binades",
                     gpu_results, ("fold extremes",), run.value_scale())


# ---------------------------------------------------------------------------
# MLA records
# ---------------------------------------------------------------------------

MLA_CASES = [
    ir.MlaConfig(preset=preset, mode=mode, query_tokens=q, dtype=dtype,
                 seq_lens=lengths)
    for (preset, mode), q, dtype, lengths in [
        (("fp8_ds_mla", "none"), 1, "bf16", (70, 0, 129)),
        (("fp8_ds_mla", "none"), 4, "f16", (4, 100)),
        (("nvfp4_ds_mla", "tensor"), 1, "f16", (1, 200, 64)),
        (("nvfp4_ds_mla", "tensor"), 2, "bf16", (65, 9)),
        (("nvfp4_ds_mla_fp8_rope", "tensor"), 1, "bf16", (0, 63, 150)),
        (("nvfp4_ds_mla_fp8_rope", "tensor"), 3, "f16", (3, 77)),
        (("nvfp4_ds_mla_fp8_rope", "token"), 1, "f16", (130, 1, 0)),
        (("nvfp4_ds_mla_fp8_rope", "token"), 8, "bf16", (8, 140)),
    ]
] + [
    # bf16 queries take the tensor-core kernel (auto): many 32-key tiles
    # and splits, partial last tiles, 16-token pages, 128 heads.
    ir.MlaConfig(preset="fp8_ds_mla", mode="none", dtype="bf16",
                 seq_lens=(1500, 33, 64, 0)),
    ir.MlaConfig(preset="nvfp4_ds_mla", mode="tensor", dtype="bf16",
                 num_heads=128, seq_lens=(300, 97)),
    ir.MlaConfig(preset="nvfp4_ds_mla_fp8_rope", mode="token", dtype="bf16",
                 block_size=16, query_tokens=4, seq_lens=(2100, 5)),
    # Value scales binades apart from tile to tile: the tensor-core kernel's
    # per-block exponents move up and down (lib/Conversion/PAttnToGPU/Kernels/Decode/).
    ir.MlaConfig(preset="fp8_ds_mla", mode="none", dtype="bf16",
                 seq_lens=(1500, 33), token_binades=12),
    ir.MlaConfig(preset="nvfp4_ds_mla_fp8_rope", mode="token", dtype="bf16",
                 seq_lens=(700, 5), token_binades=12),
    # 64 and 128 heads on sm_90a take the warpgroup (wgmma) kernel: every
    # preset and scale mode, value scales binades apart, 16-token pages,
    # speculative tokens, an empty sequence.
    ir.MlaConfig(preset="fp8_ds_mla", mode="none", dtype="bf16",
                 num_heads=128, seq_lens=(1500, 33, 0), token_binades=12),
    ir.MlaConfig(preset="nvfp4_ds_mla_fp8_rope", mode="token", dtype="bf16",
                 num_heads=64, block_size=16, query_tokens=2,
                 seq_lens=(700, 5), token_binades=12),
    ir.MlaConfig(preset="nvfp4_ds_mla_fp8_rope", mode="tensor", dtype="bf16",
                 num_heads=128, seq_lens=(129, 2100)),
]

#: One bf16 case per preset: the tensor-core kernel on the auto backend;
#: every case of 64 or more heads and of 16-token pages, each once.
MLA_XQA_CASES = list({config.id: config for config in
                      [config for config in MLA_CASES
                       if config.dtype == "bf16" and config.query_tokens == 1
                       and config.num_heads == 16] +
                      [config for config in MLA_CASES if config.num_heads >= 64] +
                      [config for config in MLA_CASES
                       if config.dtype == "bf16" and config.block_size == 16]
                      }.values())


@dataclasses.dataclass
class MlaPlan:
    config: ir.MlaConfig
    module: ir.Module
    block_table: np.ndarray
    initial: ref.RecordCache
    expected: ref.RecordCache
    outer: Optional[np.ndarray]  # [1] f32 in tensor mode
    latent: np.ndarray  # activation bits of the written tokens
    rope: np.ndarray
    slots: np.ndarray
    query: np.ndarray
    query_start: Optional[np.ndarray]


_MLA_PLANS: dict[str, MlaPlan] = {}


def mla_plan(config: ir.MlaConfig) -> MlaPlan:
    if config.id in _MLA_PLANS:
        return _MLA_PLANS[config.id]
    rng = np.random.default_rng(zlib.crc32(config.id.encode()))
    dtype, bs, n = config.dtype, config.block_size, config.query_tokens
    as_activation = lambda x: activation_values(activation_bits(x, dtype),
                                                dtype)
    used = [-(-length // bs) for length in config.seq_lens]
    num_blocks = sum(used) + 1
    pages = rng.permutation(num_blocks)
    table = np.full((config.batch, config.max_blocks), -1, np.int32)
    start = 0
    for b, count in enumerate(used):
        table[b, :count] = pages[start:start + count]
        start += count

    # Latent tiles of different sizes, so per-tile and group scales differ.
    tile = np.repeat(np.exp2(rng.uniform(-2, 1, 4)), 128)
    positions = [(b, p) for b, length in enumerate(config.seq_lens)
                 for p in range(length)]
    magnitude = np.ones(len(positions))
    if config.token_binades:
        runs = np.array([p // 40 for _, p in positions])
        binades = rng.integers(-config.token_binades,
                               config.token_binades + 1, runs.max() + 1)
        magnitude = np.exp2(binades[runs].astype(np.float64))
    latent = as_activation(signed_uniform(rng, (len(positions), 512)) * tile
                           * magnitude[:, None])
    rope = as_activation(signed_uniform(rng, (len(positions), 64), 0.1, 2.0)
                         * magnitude[:, None])
    outer = np.array([np.abs(latent).max(initial=1.0) / 2688], np.float32) \
        if config.mode == "tensor" else None
    slots = np.array([table[b, p // bs] * bs + p % bs for b, p in positions],
                     np.int64)
    lengths = config.seq_lens
    is_new = np.array([p >= lengths[b] - min(n, lengths[b])
                       for b, p in positions], bool)

    initial = ref.RecordCache.allocate(config.preset, config.mode,
                                       num_blocks, bs, rng)
    if (~is_new).any():
        initial.write(latent[~is_new], rope[~is_new], slots[~is_new], outer)
    expected = initial.copy()
    new_slots = slots[is_new].copy()
    new_latent, new_rope = latent[is_new], rope[is_new]
    # A padding token with slot -1.
    new_latent = np.concatenate([new_latent, as_activation(
        signed_uniform(rng, (1, 512)))])
    new_rope = np.concatenate([new_rope, as_activation(
        signed_uniform(rng, (1, 64)))])
    new_slots = np.append(new_slots, -1)
    expected.write(new_latent, new_rope, new_slots, outer)

    # Logits of order 1 for the largest tokens.
    query = signed_uniform(rng, (config.batch * n, config.num_heads, 576)) \
        * 2.0 ** -config.token_binades
    plan = MlaPlan(
        config=config, module=ir.emit_mla(config), block_table=table,
        initial=initial, expected=expected, outer=outer,
        latent=activation_bits(new_latent, dtype),
        rope=activation_bits(new_rope, dtype), slots=new_slots,
        query=activation_bits(query, dtype),
        query_start=np.arange(config.batch + 1, dtype=np.int32) * n
        if n > 1 else None)
    _MLA_PLANS[config.id] = plan
    return plan


_MLA_RUNS: dict[str, object] = {}


def mla_run(config: ir.MlaConfig):
    """(plan, module, tensors, record cache on the device after the write)."""
    if config.id not in _MLA_RUNS:
        try:
            plan = mla_plan(config)
            module = COMPILER.load(plan.module.text)
            tensors = {
                "pages": upload(plan.initial.storage, "i8"),
                "latent": upload(plan.latent, config.dtype),
                "rope": upload(plan.rope, config.dtype),
                "slots": upload(plan.slots, "i64"),
                "query": upload(plan.query, config.dtype),
                "block_table": upload(plan.block_table, "i32"),
                "seq_lens": upload(np.array(config.seq_lens), "i32"),
            }
            if plan.outer is not None:
                tensors["outer_scale"] = upload(plan.outer, "f32")
            if plan.query_start is not None:
                tensors["query_start"] = upload(plan.query_start, "i32")
            invoke(module, "write_records",
                   plan.module.functions["write_records"], tensors)
            torch.cuda.synchronize()
            cache = plan.initial.copy()
            cache.storage = download(tensors["pages"])
            _MLA_RUNS[config.id] = (plan, module, tensors, cache)
        except Exception as error:  # noqa: BLE001 - re-raised below
            _MLA_RUNS[config.id] = error
    run = _MLA_RUNS[config.id]
    if isinstance(run, Exception):
        raise run
    return run


def mla_value_scale(plan: MlaPlan, latent: np.ndarray) -> np.ndarray:
    """max(1, max |V|) over the latent rows each query token attends (every
    key of its sequence; all heads alike), [tokens, 1, 1]: SPEC §8 scales
    atol by it."""
    config = plan.config
    per_token = attended_value_scale(
        latent, plan.block_table, config.seq_lens, config.block_size,
        plan.query_start, plan.query.shape[0])  # [tokens]
    return per_token[:, None, None]


@pytest.mark.parametrize("config", MLA_CASES, ids=lambda c: c.id)
def test_mla_write_records_bit_exact(config):
    plan, _, _, cache = mla_run(config)
    assert_bytes_equal(cache.storage, plan.expected.storage,
                       f"{config.preset} records")


def _check_mla_against_reference(module, plan: MlaPlan, tensors: dict,
                                 cache, gpu_results, what: str):
    config = plan.config
    tensors["out"] = poisoned((plan.query.shape[0], config.num_heads,
                               config.latent), config.dtype)
    invoke(module, "mla", plan.module.functions["mla"], tensors)
    torch.cuda.synchronize()
    out = activation_values(download(tensors["out"]), config.dtype)
    with np.errstate(all="ignore"):
        latent, rope = cache.dequantize(plan.outer)
    want = ref.mla_attention_ref(
        activation_values(plan.query, config.dtype), latent, rope,
        plan.block_table, config.seq_lens, plan.query_start,
        num_heads=config.num_heads,
        softmax_scale=float(np.float32(config.softmax_scale)))
    assert_close(out, want, config.dtype, what, gpu_results,
                 (f"mla {config.preset} ({config.mode})",),
                 mla_value_scale(plan, latent))
    return out


#: The chips of a build whose MLA ops take the mma.sync kernel on an
#: sm_90a GPU: sm_90 has no wgmma (the sm_90a-only instructions).
MMA_SYNC_CHIPS = ["sm_90"]

#: A build for this chip among others, one of which (sm_89) shares its
#: conversion class with sm_90a and has no wgmma: on an sm_90a GPU the MLA
#: ops of 64 or more heads run the warpgroup kernel from a kernel module of
#: sm_90a's own (the op's chip_plans), the other chips the mma.sync kernel.
FLEET_CHIPS = list(dict.fromkeys(["sm_80", "sm_89", CHIP]))
#: The MLA cases whose plan differs between chips (64 or more heads, bf16
#: queries: the tensor-core kernels).
MLA_FLEET_CASES = [config for config in MLA_CASES
                   if config.num_heads >= 64 and config.dtype == "bf16"]


@pytest.mark.parametrize("config", MLA_CASES, ids=lambda c: c.id)
def test_mla_decode_matches_reference(config, gpu_results):
    plan, module, tensors, cache = mla_run(config)
    out = _check_mla_against_reference(module, plan, tensors, cache,
                                       gpu_results, "mla_decode")
    empty = [b for b, length in enumerate(config.seq_lens) if length == 0]
    for b in empty:  # zero-length sequences give exact zeros
        rows = slice(b * config.query_tokens, (b + 1) * config.query_tokens)
        assert not out[rows].any()


def _mla_decode(module, plan: MlaPlan, tensors: dict) -> torch.Tensor:
    """Runs @mla of `module` into a poisoned output; returns its bits."""
    config = plan.config
    tensors["out"] = poisoned((plan.query.shape[0], config.num_heads,
                               config.latent), config.dtype)
    invoke(module, "mla", plan.module.functions["mla"], tensors)
    torch.cuda.synchronize()
    return _bits(tensors["out"])


#: The cases with a sequence of more than three pages of 32 keys or more:
#: the tensor-core kernels copy a tile whose keys are all live on one
#: mapped page as one run of records, and any other tile key by key.
MLA_HOLE_CASES = [config for config in MLA_CASES
                  if config.block_size >= 32 and
                  max(config.seq_lens) > 3 * config.block_size]


@pytest.mark.parametrize("config", MLA_HOLE_CASES, ids=lambda c: c.id)
def test_mla_unmapped_page_inside_a_sequence(config, gpu_results):
    """A -1 entry for the third page of the longest sequence masks its keys
    (zero-filled, never read from page 0), while the tiles around it on
    mapped pages take the whole-tile copies: the decode meets the float64
    reference with the same table."""
    plan, module, tensors, cache = mla_run(config)
    table = plan.block_table.copy()
    longest = int(np.argmax(config.seq_lens))
    table[longest, 2] = -1
    holed = dict(tensors, block_table=upload(table, "i32"))
    _check_mla_against_reference(module,
                                 dataclasses.replace(plan, block_table=table),
                                 holed, cache, gpu_results,
                                 "mla_decode (an unmapped page)")


@pytest.mark.parametrize("config", MLA_CASES, ids=lambda c: c.id)
def test_mla_backends_agree(config, gpu_results):
    """The other backend's MLA decode of the same records and query agrees
    within SPEC §8 (tensor cores vs the fp32 kernel for bf16 queries; the
    portable kernel twice where the op is not eligible)."""
    plan, module, tensors, cache = mla_run(config)
    ours = _mla_decode(module, plan, tensors)
    other = pattn.load(pattn.compile(plan.module.text, chips=[CHIP],
                                     backend=OTHER_BACKEND))
    theirs = _mla_decode(other, plan, tensors)
    as_values = lambda bits: activation_values(  # noqa: E731
        bits.cpu().numpy().view(np.uint16), config.dtype)
    with np.errstate(all="ignore"):
        latent, _ = cache.dequantize(plan.outer)
    assert_close(as_values(ours), as_values(theirs), config.dtype,
                 f"mla {BACKEND} vs {OTHER_BACKEND}", gpu_results,
                 ("backends agree (mla)",), mla_value_scale(plan, latent))


@pytest.mark.parametrize("config", MLA_XQA_CASES, ids=lambda c: c.id)
def test_mla_mma_sync_kernel_matches_reference(config, gpu_results):
    """On sm_90a the tensor-core MLA ops of 64 or more heads take the
    warpgroup (wgmma) kernel; a build for sm_90, which has no wgmma, plans
    the mma.sync kernel (the kernel every other chip runs), which must meet
    the same float64 reference here."""
    if CHIP != "sm_90a" or BACKEND == "portable":
        pytest.skip("the wgmma kernels are sm_90a's only; elsewhere the "
                    "suite's own cases run the mma.sync kernel")
    plan, _, tensors, cache = mla_run(config)
    mma_sync = pattn.load(pattn.compile(plan.module.text,
                                        chips=MMA_SYNC_CHIPS,
                                        backend=BACKEND))
    _check_mla_against_reference(mma_sync, plan, tensors, cache,
                                 gpu_results, "mla_decode (mma.sync)")


@pytest.mark.parametrize("config", MLA_FLEET_CASES, ids=lambda c: c.id)
def test_mla_fleet_build_runs_this_chips_kernel(config, gpu_results):
    """A build for sm_80, sm_89 and this chip runs here the kernel of a
    build for this chip alone, bit for bit, and meets the float64
    reference: on sm_90a the warpgroup kernel, from the module that the
    op's chip_plans give sm_90a (such builds used to run the mma.sync
    kernel on the H200, since sm_89 has no wgmma)."""
    if BACKEND == "portable":
        pytest.skip("the portable MLA kernel is the same on every chip")
    plan, module, tensors, cache = mla_run(config)
    alone = _mla_decode(module, plan, tensors)
    fleet = pattn.load(pattn.compile(plan.module.text, chips=FLEET_CHIPS,
                                     backend=BACKEND))
    _check_mla_against_reference(fleet, plan, tensors, cache, gpu_results,
                                 f"mla_decode ({', '.join(FLEET_CHIPS)})")
    assert torch.equal(_bits(tensors["out"]), alone), \
        f"the {FLEET_CHIPS} build differs from the {CHIP} build on {CHIP}"


@pytest.mark.parametrize("config", MLA_XQA_CASES, ids=lambda c: c.id)
def test_mla_cuda_graph_replay_matches_eager(config):
    """The MLA decode captured in a CUDA graph replays bit for bit like the
    eager call, also after the query changes in place (its split count
    depends on host-known sizes and the SM count only)."""
    plan, module, tensors, _ = mla_run(config)
    signature = plan.module.functions["mla"]
    eager = _mla_decode(module, plan, tensors)
    out = tensors["out"]

    def decode():
        invoke(module, "mla", signature, tensors)

    graph = _capture(decode)

    def replay() -> torch.Tensor:
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        return _bits(out)

    assert torch.equal(replay(), eager), "replay differs from the eager call"
    query = tensors["query"].clone()
    rng = np.random.default_rng(29)
    tensors["query"].copy_(upload(activation_bits(
        signed_uniform(rng, plan.query.shape), config.dtype), config.dtype))
    replayed = replay()
    out.fill_(float("nan"))
    decode()
    torch.cuda.synchronize()
    assert torch.equal(replayed, _bits(out)), "replay after a new query"
    assert not torch.equal(replayed, eager), "the new query changed nothing"
    tensors["query"].copy_(query)
