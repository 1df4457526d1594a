#!/usr/bin/env python3
"""MLA decode benchmark: pattn's mla_decode over the three record presets.

For each preset this script fills a paged record cache with pattn's own
write kernel (random, never-zero latent and rope), then times @mla with
CUDA events (median of many calls after a warm-up). The cache is larger
than the 60 MB L2, so every call reads it from DRAM. Effective bandwidth is
record bytes read / time. Correctness is the GPU suite's job
(python/tests/gpu: test_mla_decode_matches_reference).

    # where the compiler is
    PATTN_ARTIFACT_DIR=.gpu-artifacts python3 bench/bench_mla.py --precompile sm_90a
    # on the GPU (with .gpu-artifacts carried)
    PATTN_ARTIFACT_DIR=.gpu-artifacts python3 bench/bench_mla.py --write-results out.md

Comparing two compilers: precompile into two artifact directories and time
each (the table's first line names the directory).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import pathlib
import statistics
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
if importlib.util.find_spec("pattn") is None:
    sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "python" / "tests" / "gpu"))  # ir.py

import ir  # noqa: E402

#: DeepSeek-style decode: 16 heads per GPU (128 over TP8), latent 512 +
#: rope 64, 64-token pages, 32 sequences of 8K tokens (97-172 MB of
#: records, beyond the L2).
BATCH, SEQ_LEN, HEADS, BLOCK = 32, 8192, 16, 64
PRESETS = [("fp8_ds_mla", "none"), ("nvfp4_ds_mla", "tensor"),
           ("nvfp4_ds_mla_fp8_rope", "tensor")]


def config(preset: str, mode: str) -> ir.MlaConfig:
    return ir.MlaConfig(preset=preset, mode=mode, block_size=BLOCK,
                        num_heads=HEADS, seq_lens=(SEQ_LEN,) * BATCH,
                        dtype="bf16")


def precompile(chip: str) -> int:
    import pattn
    if not os.environ.get("PATTN_ARTIFACT_DIR"):
        print("bench_mla: --precompile needs PATTN_ARTIFACT_DIR",
              file=sys.stderr)
        return 2
    for preset, mode in PRESETS:
        pattn.compile(ir.emit_mla(config(preset, mode)).text, chips=[chip])
    print(f"{len(PRESETS)} MLA benchmark modules for {chip}")
    return 0


def bench(iters: int, warmup: int) -> list[dict]:
    import torch
    import pattn
    rows = []
    generator = torch.Generator(device="cuda").manual_seed(7)
    for preset, mode in PRESETS:
        cfg = config(preset, mode)
        module = ir.emit_mla(cfg)
        lib = pattn.load(pattn.compile(module.text, chips=[_chip(torch)]))
        pages_needed = BATCH * (SEQ_LEN // BLOCK)
        tokens = BATCH * SEQ_LEN
        pages = torch.zeros(pages_needed, BLOCK, cfg.record_bytes,
                            dtype=torch.uint8, device="cuda")

        def signed(*shape):
            values = torch.rand(*shape, generator=generator, device="cuda")
            return ((values - 0.5) * 2 + 0.01).to(torch.bfloat16)

        tensors = {
            "pages": pages,
            "latent": signed(tokens, cfg.latent),
            "rope": signed(tokens, cfg.rope),
            "slots": torch.randperm(tokens, generator=generator,
                                    device="cuda").to(torch.int64),
            "outer_scale": torch.tensor([0.05], device="cuda"),
            "query": signed(BATCH, HEADS, cfg.latent + cfg.rope),
            "block_table": torch.zeros(BATCH, cfg.max_blocks,
                                       dtype=torch.int32, device="cuda"),
            "seq_lens": torch.full((BATCH,), SEQ_LEN, dtype=torch.int32,
                                   device="cuda"),
            "out": torch.empty(BATCH, HEADS, cfg.latent,
                               dtype=torch.bfloat16, device="cuda"),
        }
        per_seq = SEQ_LEN // BLOCK
        tensors["block_table"][:, :per_seq] = torch.arange(
            pages_needed, dtype=torch.int32,
            device="cuda").view(BATCH, per_seq)
        tensors["block_table"][:, per_seq:] = -1

        def call(name):
            names = [arg.name for arg in module.functions[name]]
            getattr(lib, name)(*(tensors[n] for n in names))

        call("write_records")
        torch.cuda.synchronize()
        for _ in range(warmup):
            call("mla")
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True),
                   torch.cuda.Event(enable_timing=True))
                  for _ in range(iters)]
        for start, end in events:
            start.record()
            call("mla")
            end.record()
        torch.cuda.synchronize()
        median = statistics.median(s.elapsed_time(e) * 1e3 for s, e in events)
        out = tensors["out"].float()
        finite = bool(torch.isfinite(out).all())
        nbytes = tokens * cfg.record_bytes
        rows.append(dict(preset=f"{preset} ({mode})", mb=nbytes / 1e6,
                         us=median, tbps=nbytes / (median * 1e-6) / 1e12,
                         finite=finite))
        print(f"{preset} ({mode}): {median:.1f} us, "
              f"{rows[-1]['tbps']:.2f} TB/s, finite={finite}", flush=True)
    return rows


def _chip(torch) -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}{'a' if major in (9, 10, 12) else ''}"


def markdown(rows: list[dict], iters: int) -> str:
    import torch
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC")
    lines = [f"pattn MLA decode — {stamp}, {torch.cuda.get_device_name()}, "
             f"artifacts {os.environ.get('PATTN_ARTIFACT_DIR', '-')}, "
             f"commit {os.environ.get('PATTN_COMMIT', '?')}, B{BATCH} "
             f"L{SEQ_LEN} {HEADS} heads, {BLOCK}-token pages, medians of "
             f"{iters} calls", "",
             "| record | MB read | µs | TB/s | finite |",
             "|---|---:|---:|---:|---|"]
    for row in rows:
        lines.append(f"| {row['preset']} | {row['mb']:.1f} | {row['us']:.1f}"
                     f" | {row['tbps']:.2f} | {row['finite']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--precompile", metavar="CHIP")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--write-results", metavar="PATH")
    args = parser.parse_args(argv)
    if args.precompile:
        return precompile(args.precompile)
    rows = bench(args.iters, args.warmup)
    table = markdown(rows, args.iters)
    print(table)
    if args.write_results:
        pathlib.Path(args.write_results).write_text(table, encoding="utf-8")
    return 0 if all(row["finite"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
