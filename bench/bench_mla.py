#!/usr/bin/env python3
"""MLA decode benchmark: pattn's mla_decode over the three record presets on
both of its backends, next to FlashInfer's MLA decode on a bf16 latent+rope
cache.

Shapes (one query token per sequence, 64-token pages, bf16 query):

  B32-L8K-H16   32 sequences of 8K tokens, 16 heads (DeepSeek over TP8)
  B32-L8K-H128  the same with 128 heads: compute-bound, reported in TFLOPS
                = 2 * B * H * L * (576 + 512) / time
  B1-L8K-H16    one sequence: latency, timed under CUDA-graph replay

pattn: for each preset this script fills a paged record cache with pattn's
own write kernel (random, never-zero latent and rope), then times @mla with
CUDA events (median of many calls after a warm-up), compiled for each of
--backends (default auto,portable) on the same cache and query: auto lowers
these ops (bf16 query, 16*k heads) to the tensor-core XQA kernel (rows
"pattn xqa <preset>"), portable forces the fp32 CUDA-core kernel (rows
"pattn portable <preset>"). The record presets read 656 (fp8_ds_mla), 432
(nvfp4_ds_mla) and 368 (nvfp4_ds_mla_fp8_rope) bytes per token. The batch
is a dynamic dimension of pattn's module, so B1 runs the B32 module.

FlashInfer (the peer): BatchMLAPagedAttentionWrapper on a bf16 cache of
the same shape, ckv [pages, 64, 512] and kpe [pages, 64, 64] (1152 bytes
per token), q_nope [B, H, 512] and q_pe [B, H, 64] sliced from the same
kind of query, the same softmax scale and an identical (identity) block
table; its fa3 (sm_90a, mla_hopper) and fa2 backends. Its kernels are
built just in time with nvcc; --build-flashinfer DIR builds them ahead
(nvcc needs no GPU), and DIR copied into FlashInfer's data/aot folder
makes the GPU run load them instead. If FlashInfer cannot be imported,
built or run, its rows carry the error and pattn's rows are still timed.

Timing (PERF.md): a cache larger than the 60 MB L2 is timed alone (every
B32 cache here is: every call reads it from DRAM); a smaller one is cloned
until a copy is re-read only after 2x L2 and the copies are rotated. Each
configuration is timed launched plainly and replayed from one CUDA graph
per copy. Effective bandwidth = cache bytes read / time. Each output is
checked on sequence 0 (all heads) against float64 attention over the same
(dequantized) cache; the largest error is recorded. With both backends,
the largest |xqa - portable| over the whole output (every sequence and
head) is recorded too, as a share of the same bf16 tolerance with the
portable output in the reference's place. Correctness proper is the GPU
suite's job (python/tests/gpu: test_mla_decode_matches_reference).

The table (every row) is followed by a summary per shape and preset: the
backends' times side by side, TB/s, TFLOPS (128 heads), PERF.md's bar (B32
L8K 16 heads >= 2.5 TB/s per preset, i.e. <= 69 / 45 / 39 us for 656 /
432 / 368-byte records; 128 heads >= 400 TFLOPS; B1 L8K <= 30 us under
graph replay) and whether the xqa row meets it and is ahead of FlashInfer
fa3 in time per token.

    # where the compiler is: every module for every backend
    PATTN_ARTIFACT_DIR=.gpu-artifacts python3 bench/bench_mla.py --precompile sm_90a
    # optional, where nvcc is: FlashInfer's MLA modules, ahead of time
    FLASHINFER_CUDA_ARCH_LIST=9.0 python3 bench/bench_mla.py --build-flashinfer AOT
    # on the GPU (with .gpu-artifacts carried)
    PATTN_ARTIFACT_DIR=.gpu-artifacts python3 bench/bench_mla.py --write-results out.md

--precompile and the timed run need the same --backends (and --shapes):
the GPU machine has no compiler. Comparing two compilers: precompile into
two artifact directories and time each (the table's first line names the
directory).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import time
import traceback

REPO = pathlib.Path(__file__).resolve().parents[1]
if importlib.util.find_spec("pattn") is None:
    sys.path.insert(0, str(REPO / "python"))
if importlib.util.find_spec("ir") is None:  # one on PYTHONPATH wins
    sys.path.insert(0, str(REPO / "python" / "tests" / "gpu"))  # ir.py

import ir  # noqa: E402
from timing import time_calls as timing_loop  # noqa: E402  (bench/timing.py)

#: DeepSeek-style decode: 16 heads per GPU (128 over TP8), latent 512 +
#: rope 64, 64-token pages, 32 sequences of 8K tokens (97-172 MB of
#: records, beyond the L2).
BATCH, SEQ_LEN, HEADS, BLOCK = 32, 8192, 16, 64
PRESETS = [("fp8_ds_mla", "none"), ("nvfp4_ds_mla", "tensor"),
           ("nvfp4_ds_mla_fp8_rope", "tensor")]
L2_BYTES = 60 * 2 ** 20  # H200
LATENT, ROPE = 512, 64
FI_BYTES_PER_TOKEN = (LATENT + ROPE) * 2  # bf16 ckv + kpe
FI_BACKENDS = ("fa3", "fa2")
FA3 = "FlashInfer fa3 bf16"  # the row the xqa rows are held to
#: pattn.compile's backend= values timed (--backends) and their rows' names:
#: auto lowers every op here (bf16 query, 16*k heads) to the XQA kernel
#: (on sm_90a the warpgroup (wgmma) kernels); "mma" is auto built for sm_90
#: (no wgmma), which plans the mma.sync kernel that chips without wgmma
#: run, timed on the same GPU for comparison.
LABELS = {"auto": "xqa", "portable": "portable", "mma": "xqa-mma.sync"}


def compile_options(backend: str, chip: str) -> dict:
    """pattn.compile's chips= and backend= for a --backends entry."""
    if backend == "mma":
        return dict(chips=["sm_90"], backend="auto")
    return dict(chips=[chip], backend=backend)


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    batch: int
    seq_len: int
    heads: int

    @property
    def tokens(self) -> int:
        return self.batch * self.seq_len

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.heads * self.seq_len * (
            LATENT + ROPE + LATENT)


SHAPES = [Shape("B32-L8K-H16", BATCH, SEQ_LEN, HEADS),
          Shape("B32-L8K-H128", BATCH, SEQ_LEN, 128),
          Shape("B1-L8K-H16", 1, SEQ_LEN, HEADS)]

#: PERF.md's bars per shape, held by the xqa rows: (what, bound). B32 16
#: heads: effective TB/s for every preset; 128 heads: TFLOPS; B1: µs under
#: graph replay.
BARS = {"B32-L8K-H16": ("tbps", 2.5), "B32-L8K-H128": ("tflops", 400.0),
        "B1-L8K-H16": ("graph_us", 30.0)}


def config(preset: str, mode: str, heads: int = HEADS) -> ir.MlaConfig:
    # The module's text depends on the heads and the longest sequence only
    # (the batch is dynamic), so every batch size shares this one.
    return ir.MlaConfig(preset=preset, mode=mode, block_size=BLOCK,
                        num_heads=heads, seq_lens=(SEQ_LEN,) * BATCH,
                        dtype="bf16")


def select_shapes(names: str) -> list:
    if names == "all":
        return SHAPES
    wanted = names.split(",")
    unknown = [n for n in wanted if n not in {s.name for s in SHAPES}]
    if unknown:
        raise SystemExit(f"bench_mla: unknown shapes {unknown}; "
                         f"known: {[s.name for s in SHAPES]}")
    return [s for s in SHAPES if s.name in wanted]


def select_backends(names: str) -> list:
    wanted = list(dict.fromkeys(names.split(",")))
    unknown = [n for n in wanted if n not in LABELS]
    if unknown:
        raise SystemExit(f"bench_mla: unknown backends {unknown}; "
                         f"known: {list(LABELS)}")
    return wanted


def precompile(chip: str, shapes: list, backends: list) -> int:
    import pattn
    if not os.environ.get("PATTN_ARTIFACT_DIR"):
        print("bench_mla: --precompile needs PATTN_ARTIFACT_DIR",
              file=sys.stderr)
        return 2
    heads = sorted({s.heads for s in shapes})
    for h in heads:
        for preset, mode in PRESETS:
            text = ir.emit_mla(config(preset, mode, h)).text
            for backend in backends:
                pattn.compile(text, **compile_options(backend, chip))
    print(f"{len(PRESETS) * len(heads) * len(backends)} MLA benchmark "
          f"modules for {chip} (heads {heads}, backends {backends})")
    return 0


# ---------------------------------------------------------------------------
# Timing (PERF.md; the method of ../shared/peers/flashinfer_decode.py)
# ---------------------------------------------------------------------------

def copies_for(nbytes: float) -> int:
    """1 for a cache beyond the L2, else enough copies that one is re-read
    only after 2x the L2 (at most 64)."""
    if nbytes > L2_BYTES:
        return 1
    return min(64, max(2, math.ceil(2 * L2_BYTES / max(nbytes, 1))))


def _record_error(torch, row: dict, error: Exception) -> None:
    """Records a failed row (it stays in the table, with the error) and lets
    the device finish whatever the failure left queued."""
    row["error"] = f"{type(error).__name__}: {error}"[:600]
    row["trace"] = traceback.format_exc()[-1500:]
    try:
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001
        pass


def time_calls(torch, calls: list, warmup: int, iters: int) -> dict:
    """timing.time_calls as a row's dict; with one call this is the loop this
    script always timed pattn with."""
    timing = timing_loop(torch, calls, warmup, iters)
    return {**dataclasses.asdict(timing), "copies": len(calls)}


def graphs_of(torch, calls: list) -> list:
    """One CUDA graph per call (cache copy), replayed in rotation."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graphs = []
    for call in calls:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            call()
        graphs.append(g)
    return graphs


def measure(torch, calls: list, args, graph: bool = True) -> dict:
    # A slow configuration (pattn portable at 128 heads) gets fewer runs:
    # about a second each, never fewer than 10.
    iters = args.iters
    started = time.time()
    calls[0]()
    torch.cuda.synchronize()
    one = time.time() - started
    if one * iters > 1.0:
        iters = max(10, int(1.0 / max(one, 1e-6)))
    res = {"plain": time_calls(torch, calls, args.warmup, iters)}
    if graph and not args.no_graph:
        try:
            graphs = graphs_of(torch, calls)
            res["graph"] = time_calls(torch, [g.replay for g in graphs],
                                      args.warmup, iters)
            del graphs
        except Exception as error:  # noqa: BLE001
            res["graph_error"] = f"{type(error).__name__}: {error}"[:300]
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001
                pass
    return res


def copy_ceiling(torch) -> float:
    n = 2 ** 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = time_calls(torch, [lambda: dst.copy_(src)], 5, 30)
    del src, dst
    return 2 * n / (t["median_us"] * 1e-6) / 1e12


# ---------------------------------------------------------------------------
# The float64 reference (pattn.reference.mla_attention_ref's math, on the GPU)
# ---------------------------------------------------------------------------

def reference(torch, query, latent, rope, scale: float):
    """query [H, 576]; latent [L, 512]; rope [L, 64] -> [H, 512], float64."""
    q = query.to(torch.float64)
    lat = latent.to(device=q.device, dtype=torch.float64)
    keys = torch.cat([lat, rope.to(device=q.device, dtype=torch.float64)], 1)
    p = torch.softmax((q @ keys.T) * scale, dim=-1)
    return p @ lat


def compare(torch, got, want) -> dict:
    got = got.to(torch.float64)
    err = (got - want).abs()
    finite = bool(torch.isfinite(got).all())
    peak = float(want.abs().max())
    worst = float(err.max()) if finite else math.inf
    # bf16 output: about 2^-8 of each value, plus slack for the sum order.
    ratio = float((err / (2e-3 * peak + 1e-2 * want.abs())).max()) \
        if finite else math.inf
    return {"max_abs_err": worst, "max_abs_ref": peak,
            "err_over_tol": ratio, "finite": finite,
            "ok": finite and ratio <= 1.0}


def signed(torch, generator, *shape):
    values = torch.rand(*shape, generator=generator, device="cuda")
    return ((values - 0.5) * 2 + 0.01).to(torch.bfloat16)


# ---------------------------------------------------------------------------
# pattn
# ---------------------------------------------------------------------------

def bench_pattn(torch, shapes: list, backends: list, args,
                generator) -> list:
    import pattn
    from pattn import reference as ref
    rows = []
    chip = _chip(torch)
    for preset, mode in PRESETS:
        libs = {}
        for batch in sorted({s.batch for s in shapes}, reverse=True):
            cfg = config(preset, mode)
            pages_needed = batch * (SEQ_LEN // BLOCK)
            tokens = batch * SEQ_LEN
            pages = torch.zeros(pages_needed, BLOCK, cfg.record_bytes,
                                dtype=torch.uint8, device="cuda")
            per_seq = SEQ_LEN // BLOCK
            tensors = {
                "pages": pages,
                "latent": signed(torch, generator, tokens, cfg.latent),
                "rope": signed(torch, generator, tokens, cfg.rope),
                "slots": torch.randperm(tokens, generator=generator,
                                        device="cuda").to(torch.int64),
                "outer_scale": torch.tensor([0.05], device="cuda"),
                "block_table": torch.zeros(batch, cfg.max_blocks,
                                           dtype=torch.int32, device="cuda"),
                "seq_lens": torch.full((batch,), SEQ_LEN, dtype=torch.int32,
                                       device="cuda"),
            }
            tensors["block_table"][:, :per_seq] = torch.arange(
                pages_needed, dtype=torch.int32,
                device="cuda").view(batch, per_seq)
            tensors["block_table"][:, per_seq:] = -1
            for shape in [s for s in shapes if s.batch == batch]:
                # One query for every backend, so that their outputs compare.
                tensors["query"] = signed(torch, generator, shape.batch,
                                          shape.heads, cfg.latent + cfg.rope)
                outs, shape_rows = {}, []
                for backend in backends:
                    row = {"shape": shape.name,
                           "kernel": f"pattn {LABELS[backend]} {preset}",
                           "backend": backend,
                           "preset": f"{preset} ({mode})",
                           "bytes_per_token": cfg.record_bytes,
                           "mb": tokens * cfg.record_bytes / 1e6}
                    rows.append(row)
                    shape_rows.append(row)
                    started = time.time()
                    try:
                        outs[backend] = _pattn_case(
                            torch, pattn, ref, shape, preset, mode, backend,
                            tensors, libs, chip, row, args)
                    except Exception as error:  # noqa: BLE001
                        _record_error(torch, row, error)
                    row["seconds"] = time.time() - started
                    print(_progress(row), flush=True)
                if {"auto", "portable"} <= outs.keys():
                    agreement = compare(torch, outs["auto"],
                                        outs["portable"].to(torch.float64))
                    for row in shape_rows:
                        row["xqa_vs_portable"] = agreement
                    print(f"{shape.name} {preset}: max |xqa - portable| "
                          f"{agreement['max_abs_err']:.2e} "
                          f"(x{agreement['err_over_tol']:.2f} of tol)",
                          flush=True)
            del tensors, pages
            torch.cuda.empty_cache()
    return rows


def _pattn_case(torch, pattn, ref, shape, preset, mode, backend, tensors,
                libs, chip, row, args):
    """Checks and times one backend on one shape; returns its output (of
    the last timed call: the same inputs every call)."""
    cfg = config(preset, mode, shape.heads)
    module = ir.emit_mla(cfg)
    if (shape.heads, backend) not in libs:
        libs[shape.heads, backend] = pattn.load(pattn.compile(
            module.text, **compile_options(backend, chip)))
    lib = libs[shape.heads, backend]

    def call(name, **override):
        names = [arg.name for arg in module.functions[name]]
        values = {**tensors, **override}
        getattr(lib, name)(*(values[n] for n in names))

    if "written" not in tensors:
        call("write_records")
        torch.cuda.synchronize()
        for name in ("latent", "rope", "slots"):
            del tensors[name]
        tensors["written"] = True
        nbytes = shape.tokens * cfg.record_bytes
        tensors["copies"] = [tensors["pages"]] + [
            tensors["pages"].clone() for _ in range(copies_for(nbytes) - 1)]
    tensors["out"] = torch.empty(shape.batch, shape.heads, cfg.latent,
                                 dtype=torch.bfloat16, device="cuda")
    copies = tensors["copies"]
    calls = [lambda p=p: call("mla", pages=p) for p in copies]

    # The check: sequence 0 (pages 0 .. L/64-1) against float64.
    tensors["out"].fill_(float("nan"))
    calls[0]()
    torch.cuda.synchronize()
    per_seq = SEQ_LEN // BLOCK
    cache = ref.RecordCache(preset, mode, per_seq, BLOCK,
                            tensors["pages"][:per_seq].cpu().numpy())
    outer = tensors["outer_scale"].cpu().numpy() if mode == "tensor" \
        else None
    latent, rope = cache.dequantize(outer)
    want = reference(torch, tensors["query"][0],
                     torch.from_numpy(latent.reshape(-1, cfg.latent)),
                     torch.from_numpy(rope.reshape(-1, cfg.rope)),
                     float(cfg.softmax_scale))
    row["check"] = compare(torch, tensors["out"][0], want)

    row.update(measure(torch, calls, args))
    out = tensors["out"]
    row["finite"] = bool(torch.isfinite(out.float()).all())
    return out


def _chip(torch) -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}{'a' if major in (9, 10, 12) else ''}"


# ---------------------------------------------------------------------------
# FlashInfer
# ---------------------------------------------------------------------------

def import_flashinfer(need_mla: bool = True):
    """(flashinfer.mla or None, version, how, first import error or None).
    Falls back to the bare package (flashinfer/__init__ imports every
    subsystem and its optional dependencies) when the full import fails."""
    try:
        import flashinfer
        mla = None
        if need_mla:
            import flashinfer.mla as mla
        return mla, flashinfer.__version__, "import flashinfer", None
    except Exception as error:  # noqa: BLE001
        first = f"{type(error).__name__}: {error}"[:400]
    import types
    for name in [m for m in sys.modules
                 if m == "flashinfer" or m.startswith("flashinfer.")]:
        del sys.modules[name]
    spec = importlib.util.find_spec("flashinfer")
    if spec is None:
        raise ImportError(f"flashinfer is not installed ({first})")
    root = pathlib.Path(spec.origin).parent
    bare = types.ModuleType("flashinfer")
    bare.__path__ = [str(root)]
    sys.modules["flashinfer"] = bare
    mla = None
    if need_mla:
        import flashinfer.mla as mla
    from flashinfer.version import __version__
    return mla, __version__, "bare package", first


def fi_specs(torch, backends):
    from flashinfer.jit.attention.modules import gen_batch_mla_module
    bf16 = torch.bfloat16
    return {b: gen_batch_mla_module(b, bf16, bf16, bf16, torch.int32,
                                    LATENT, ROPE, False) for b in backends}


def build_flashinfer(args) -> int:
    """Writes FlashInfer's MLA modules' ninja files, builds them in one ninja
    run (-k 0: one that fails does not stop the other) and copies each
    library into AOT/<name>/<name>.so (FlashInfer's data/aot layout)."""
    import torch
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0")
    _, version, how, err = import_flashinfer(need_mla=False)
    print(f"flashinfer {version} via {how}" + (f" ({err})" if err else ""),
          flush=True)
    from flashinfer.jit import env as jit_env
    specs = fi_specs(torch, args.fi_backends.split(","))
    aot = pathlib.Path(args.build_flashinfer)
    lines = ["ninja_required_version = 1.3"]
    for spec in specs.values():
        spec.write_ninja()
        lines.append(f"subninja {spec.ninja_path}")
    top = jit_env.FLASHINFER_JIT_DIR / "bench_mla_all.ninja"
    top.parent.mkdir(parents=True, exist_ok=True)
    top.write_text("\n".join(lines) + "\n")
    command = ["ninja", "-C", str(jit_env.FLASHINFER_JIT_DIR), "-f",
               str(top), "-j", str(args.jobs or os.cpu_count()), "-k", "0"]
    print(" ".join(command), flush=True)
    started = time.time()
    rc = subprocess.run(command).returncode
    seconds = time.time() - started
    print(f"ninja: {rc} after {seconds:.0f} s", flush=True)
    built = {}
    for backend, spec in specs.items():
        lib = spec.jit_library_path
        built[backend] = {"name": spec.name, "built": lib.is_file()}
        if lib.is_file():
            (aot / spec.name).mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib, aot / spec.name / f"{spec.name}.so")
        print(f"{'built' if lib.is_file() else 'MISSING'} {backend} "
              f"{spec.name}", flush=True)
    (aot / "built.json").write_text(json.dumps(
        {"flashinfer": version, "ninja_rc": rc, "seconds": seconds,
         "nvcc": _nvcc_version(), "arch_list":
         os.environ.get("FLASHINFER_CUDA_ARCH_LIST"), "modules": built},
        indent=1))
    return 0 if all(b["built"] for b in built.values()) else 1


def _nvcc_version() -> str:
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True,
                             text=True).stdout
        return out.strip().splitlines()[-1]
    except Exception as error:  # noqa: BLE001
        return f"? ({error})"


def bench_flashinfer(torch, shapes: list, args, generator, report) -> list:
    rows = []
    backends = args.fi_backends.split(",")

    def failed_rows(message):
        for shape in shapes:
            for backend in backends:
                rows.append({"shape": shape.name,
                             "kernel": f"FlashInfer {backend} bf16",
                             "bytes_per_token": FI_BYTES_PER_TOKEN,
                             "mb": shape.tokens * FI_BYTES_PER_TOKEN / 1e6,
                             "error": message})
        return rows

    try:
        fmla, version, how, first = import_flashinfer()
        report.update(flashinfer=version, flashinfer_import=how,
                      flashinfer_import_error=first)
        print(f"flashinfer {version} via {how}", flush=True)
    except Exception as error:  # noqa: BLE001
        message = f"import: {type(error).__name__}: {error}"[:600]
        report.update(flashinfer=None, flashinfer_import=message)
        return failed_rows(message)
    try:
        report["flashinfer_aot"] = {
            b: spec.is_aot for b, spec in fi_specs(torch, backends).items()}
    except Exception as error:  # noqa: BLE001
        report["flashinfer_aot"] = f"{type(error).__name__}: {error}"[:300]
    workspace = torch.zeros(512 * 2 ** 20, dtype=torch.uint8, device="cuda")
    modules_seconds = {}
    for batch in sorted({s.batch for s in shapes}, reverse=True):
        per_seq = SEQ_LEN // BLOCK
        pages = batch * per_seq
        tokens = batch * SEQ_LEN
        nbytes = tokens * FI_BYTES_PER_TOKEN
        ckv = signed(torch, generator, pages, BLOCK, LATENT)
        kpe = signed(torch, generator, pages, BLOCK, ROPE)
        copies = [(ckv, kpe)] + [(ckv.clone(), kpe.clone())
                                 for _ in range(copies_for(nbytes) - 1)]
        indices = torch.arange(pages, dtype=torch.int32, device="cuda")
        qo_indptr = torch.arange(batch + 1, dtype=torch.int32, device="cuda")
        kv_indptr = qo_indptr * per_seq
        kv_lens = torch.full((batch,), SEQ_LEN, dtype=torch.int32,
                             device="cuda")
        scale = float(config("fp8_ds_mla", "none").softmax_scale)
        for shape in [s for s in shapes if s.batch == batch]:
            query = signed(torch, generator, batch, shape.heads,
                           LATENT + ROPE)
            q_nope = query[..., :LATENT].contiguous()
            q_pe = query[..., LATENT:].contiguous()
            out = torch.empty(batch, shape.heads, LATENT,
                              dtype=torch.bfloat16, device="cuda")
            for backend in backends:
                row = {"shape": shape.name,
                       "kernel": f"FlashInfer {backend} bf16",
                       "bytes_per_token": FI_BYTES_PER_TOKEN,
                       "mb": nbytes / 1e6}
                rows.append(row)
                started = time.time()
                try:
                    wrapper = fmla.BatchMLAPagedAttentionWrapper(
                        workspace, backend=backend)
                    plan = lambda w=wrapper: w.plan(  # noqa: E731
                        qo_indptr, kv_indptr, indices, kv_lens, shape.heads,
                        LATENT, ROPE, BLOCK, False, scale, torch.bfloat16,
                        torch.bfloat16)
                    try:
                        plan()
                    except Exception as error:  # noqa: BLE001
                        # A library built elsewhere that does not load here:
                        # drop it and build just in time.
                        spec = fi_specs(torch, [backend])[backend]
                        if not spec.is_aot:
                            raise
                        row["aot_error"] = \
                            f"{type(error).__name__}: {error}"[:300]
                        spec.aot_path.unlink()
                        plan()
                    if backend not in modules_seconds:
                        modules_seconds[backend] = time.time() - started
                    calls = [lambda c=c, k=k, w=wrapper: w.run(
                        q_nope, q_pe, c, k, out=out) for c, k in copies]
                    out.fill_(float("nan"))
                    calls[0]()
                    torch.cuda.synchronize()
                    want = reference(
                        torch, query[0], ckv[:per_seq].reshape(-1, LATENT),
                        kpe[:per_seq].reshape(-1, ROPE), scale)
                    row["check"] = compare(torch, out[0], want)
                    row.update(measure(torch, calls, args))
                    row["copies"] = len(copies)
                except Exception as error:  # noqa: BLE001
                    _record_error(torch, row, error)
                row["seconds"] = time.time() - started
                print(_progress(row), flush=True)
        del copies, ckv, kpe
        torch.cuda.empty_cache()
    report["flashinfer_plan_seconds"] = modules_seconds
    return rows


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

def best(row):
    return row.get("graph") or row.get("plain")


def _progress(row) -> str:
    t = best(row)
    if not t:
        return f"{row['shape']} {row['kernel']}: {row.get('error', '?')}"
    return (f"{row['shape']} {row['kernel']}: plain "
            f"{row['plain']['median_us']:.1f} us, graph "
            f"{row.get('graph', {}).get('median_us', float('nan')):.1f} us, "
            f"check err {row['check']['max_abs_err']:.2e} "
            f"(x{row['check']['err_over_tol']:.2f} of tol)")


def derive(rows: list, shapes: list) -> None:
    by_name = {s.name: s for s in shapes}
    for row in rows:
        t = best(row)
        if not t:
            continue
        s = by_name[row["shape"]]
        sec = t["median_us"] * 1e-6
        row["tbps"] = s.tokens * row["bytes_per_token"] / sec / 1e12
        row["tflops"] = s.flops / sec / 1e12
        row["ns_per_token"] = t["median_us"] * 1e3 / s.tokens
    for s in shapes:
        peers = [r for r in rows if r["shape"] == s.name
                 and r["kernel"].startswith("FlashInfer") and best(r)]
        if not peers:
            continue
        fastest = min(peers, key=lambda r: best(r)["median_us"])
        for row in rows:
            if row["shape"] == s.name and best(row):
                row["vs_fi"] = best(row)["median_us"] / \
                    best(fastest)["median_us"]
                row["vs_fi_kernel"] = fastest["kernel"]
    fa3 = {r["shape"]: r for r in rows if r["kernel"] == FA3 and best(r)}
    for row in rows:
        if not row["kernel"].startswith("pattn"):
            continue
        row["bar"], row["meets_bar"] = bar_of(row, by_name[row["shape"]])
        peer = fa3.get(row["shape"])
        if best(row) and peer:
            row["ahead_of_fa3"] = row["ns_per_token"] < peer["ns_per_token"]


def bar_of(row: dict, shape: Shape) -> tuple:
    """PERF.md's bar for a pattn row's shape, as text, and whether the row
    meets it (None where it has no timing; for B1, no graph replay)."""
    what, bound = BARS[shape.name]
    if what == "tbps":
        us = shape.tokens * row["bytes_per_token"] / (bound * 1e12) * 1e6
        return (f"≥ {bound} TB/s (≤ {us:.0f} µs)",
                row["tbps"] >= bound if "tbps" in row else None)
    if what == "tflops":
        return (f"≥ {bound:.0f} TFLOPS",
                row["tflops"] >= bound if "tflops" in row else None)
    graph = row.get("graph")
    return (f"≤ {bound:.0f} µs under graph replay",
            graph["median_us"] <= bound if graph else None)


def _err(c: dict) -> str:
    return (f"{c['max_abs_err']:.2e} (×{c['err_over_tol']:.2f})"
            + ("" if c["ok"] else " **over**"))


def _us(t) -> str:
    return f"{t['median_us']:.1f}" if t else "—"


def _yes(flag) -> str:
    return "—" if flag is None else ("yes" if flag else "no")


def markdown(report: dict) -> str:
    fi = report.get("flashinfer")
    backends = report["backends"]
    lines = [
        f"pattn MLA decode — {report['date']}, {report['gpu']}, torch "
        f"{report['torch']}, artifacts {report['artifacts']}, commit "
        f"{report['commit']}, pattn backends "
        + ", ".join(f"{b} ({LABELS[b]})" for b in backends)
        + f", flashinfer {fi or '—'} "
        f"({report.get('flashinfer_import', '-')}), copy "
        f"{report['copy_tbps']:.2f} TB/s, {BLOCK}-token pages, L{SEQ_LEN}, "
        f"bf16 query, medians of {report['iters']} calls (fewer where one "
        "call takes > 20 ms)", "",
        "TB/s = cache bytes read / time; TFLOPS = 2·B·H·L·(576+512) / time; "
        "ns/token = time / (B·L); ×fastest FI = time / the fastest "
        "FlashInfer backend's time on that shape. Derived figures use graph "
        "replay where it ran, else the plain launch. Error: largest "
        "|out − float64 reference| on sequence 0 (all heads), and its "
        "share of the bf16 tolerance (2e-3·max|ref| + 1e-2·|ref|). xqa vs "
        "portable: largest |xqa − portable| over the whole output (every "
        "sequence and head, same cache and query), and its share of that "
        "tolerance with the portable output as the reference.", "",
        "| shape | kernel | B/token | MB read | copies | plain µs | graph µs "
        "| TB/s | TFLOPS | ns/token | ×fastest FI | max err (×tol) "
        "| xqa vs portable (×tol) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for row in report["rows"]:
        head = (f"| {row['shape']} | {row['kernel']} | "
                f"{row['bytes_per_token']} | {row['mb']:.1f} |")
        if "plain" not in row:
            err = row.get("error", "?").replace("|", "/").replace("\n", " ")
            lines.append(head + f" — | failed: {err[:300]} | | | | | | | |")
            continue
        graph = row.get("graph", {}).get("median_us")
        gcell = f"{graph:.1f}" if graph is not None else \
            f"failed: {row.get('graph_error', 'not run')[:120]}"
        vs = f"{row['vs_fi']:.2f}" if "vs_fi" in row else "—"
        agreement = row.get("xqa_vs_portable")
        lines.append(
            head + f" {row['plain']['copies']} | "
            f"{row['plain']['median_us']:.1f} | {gcell} | "
            f"{row['tbps']:.2f} | {row['tflops']:.1f} | "
            f"{row['ns_per_token']:.3f} | {vs} | {_err(row['check'])} | "
            f"{_err(agreement) if agreement else '—'} |")
    lines += ["", "Summary: µs of graph replay where it ran, else the plain "
              "launch; TFLOPS on the 128-head shape; PERF.md's bar is held "
              "by the xqa rows; ahead of fa3: xqa's ns/token below FlashInfer "
              "fa3's on the same shape.", ""] + summary(report)
    return "\n".join(lines) + "\n"


def summary(report: dict) -> list:
    """Per shape and preset: each backend's time, TB/s and TFLOPS side by
    side, PERF.md's bar and the xqa row's verdicts, FlashInfer fa3's time
    and the largest |xqa - portable|."""
    backends = report["backends"]
    both = {"auto", "portable"} <= set(backends)
    xqa = "auto" in backends
    names = [LABELS[b] for b in backends]
    rows = {(r["shape"], r["kernel"]): r for r in report["rows"]}
    header = (["shape", "preset"] + [f"{n} µs" for n in names]
              + (["portable ÷ xqa"] if both else [])
              + [f"{n} TB/s" for n in names]
              + [f"{n} TFLOPS" for n in names] + ["PERF.md bar"]
              + (["xqa meets it"] if xqa else []) + ["FlashInfer fa3 µs"]
              + (["xqa ahead of fa3 per token"] if xqa else [])
              + (["xqa vs portable (×tol)"] if both else []))
    numeric = ("µs", "TB/s", "TFLOPS", "÷ xqa")
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if h.endswith(numeric) else "---"
                            for h in header) + "|"]
    for shape in report["shapes"]:
        name = shape["name"]
        peer = rows.get((name, FA3), {})
        for preset, _ in PRESETS:
            by = {b: rows[name, f"pattn {LABELS[b]} {preset}"]
                  for b in backends}
            runs = list(by.values())
            cells = [name, preset] + [_us(best(r)) for r in runs]
            if both:
                a, b = best(by["auto"]), best(by["portable"])
                cells.append(f"{b['median_us'] / a['median_us']:.2f}x"
                             if a and b else "—")
            cells += [f"{r['tbps']:.2f}" if "tbps" in r else "—"
                      for r in runs]
            cells += [f"{r['tflops']:.1f}" if "tflops" in r
                      and shape["heads"] == 128 else "—" for r in runs]
            cells.append(runs[0]["bar"])
            if xqa:
                cells.append(_yes(by["auto"]["meets_bar"]))
            cells.append(_us(best(peer)))
            if xqa:
                ahead = by["auto"].get("ahead_of_fa3")
                cells.append(
                    _yes(ahead) + ("" if ahead is None else
                                   f" ({by['auto']['ns_per_token']:.3f} vs "
                                   f"{peer['ns_per_token']:.3f} ns)"))
            if both:
                agreement = by["auto"].get("xqa_vs_portable")
                cells.append(_err(agreement) if agreement else "—")
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def run(args) -> int:
    import torch
    shapes = select_shapes(args.shapes)
    backends = select_backends(args.backends)
    generator = torch.Generator(device="cuda").manual_seed(7)
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "artifacts": os.environ.get("PATTN_ARTIFACT_DIR", "-"),
        "commit": os.environ.get("PATTN_COMMIT", "?"),
        "iters": args.iters, "warmup": args.warmup, "l2_bytes": L2_BYTES,
        "shapes": [dataclasses.asdict(s) for s in shapes],
        "backends": backends}
    report["copy_tbps"] = copy_ceiling(torch)
    print(f"device-to-device copy: {report['copy_tbps']:.2f} TB/s",
          flush=True)
    rows = bench_pattn(torch, shapes, backends, args, generator)
    if not args.no_flashinfer:
        rows += bench_flashinfer(torch, shapes, args, generator, report)
    order = {s.name: i for i, s in enumerate(shapes)}
    rows.sort(key=lambda r: order[r["shape"]])  # stable: pattn, then FI
    derive(rows, shapes)
    report["rows"] = rows
    table = markdown(report)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=1,
                                                      default=str))
    print(table)
    if args.write_results:
        pathlib.Path(args.write_results).write_text(table, encoding="utf-8")
    pattn_rows = [r for r in rows if r["kernel"].startswith("pattn")]
    return 0 if all(r.get("finite") for r in pattn_rows) else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precompile", metavar="CHIP")
    parser.add_argument("--build-flashinfer", metavar="AOT_DIR",
                        help="only build FlashInfer's MLA modules into "
                        "AOT_DIR (needs nvcc, no GPU)")
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--shapes", default="all",
                        help=",".join(s.name for s in SHAPES))
    parser.add_argument("--presets", default="all",
                        help=",".join(name for name, _ in PRESETS))
    parser.add_argument("--backends", default=",".join(LABELS),
                        help="pattn backends to time (auto: rows 'pattn "
                        "xqa', portable: rows 'pattn portable', mma: rows "
                        "'pattn xqa-mma.sync'); "
                        "--precompile compiles for each")
    parser.add_argument("--fi-backends", default=",".join(FI_BACKENDS))
    parser.add_argument("--no-flashinfer", action="store_true")
    parser.add_argument("--no-graph", action="store_true")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json", metavar="PATH", help="full results")
    parser.add_argument("--write-results", metavar="PATH")
    args = parser.parse_args(argv)
    if args.presets != "all":
        # Every part of the benchmark walks PRESETS: keep the chosen ones.
        chosen = args.presets.split(",")
        unknown = set(chosen) - {name for name, _ in PRESETS}
        if unknown:
            parser.error(f"unknown presets {sorted(unknown)}")
        PRESETS[:] = [p for p in PRESETS if p[0] in chosen]
    if args.precompile:
        return precompile(args.precompile, select_shapes(args.shapes),
                          select_backends(args.backends))
    if args.build_flashinfer:
        return build_flashinfer(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
