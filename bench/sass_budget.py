#!/usr/bin/env python3
"""Static instruction budget of the XQA decode, the prefill or the MLA decode.

For each benchmark row and cache given, emits the module that
bench_decode.py times, compiles it to a cubin (pattn-compile --emit=cubin),
disassembles it (cuobjdump -sass) and prints, for the XQA decode kernel,
the SASS instructions of its tile loop (the backward branch around the most
HMMA), by opcode, and the branch-off stretches inside it (the masked-logit
path and the accumulator rescale, which a typical tile skips). Each loop
iteration is one tile: keys_per_tile / (16 x key_warps) key steps a warp.

With --prefill BACKEND (a bench_prefill.py column: prefill,
prefill-mma-sync or prefill-wgmma) it reports the prefill kernel of
bench_prefill's rows instead, and with --mla BACKEND (bench_mla.py's auto
or mma) the MLA decode of bench_mla's rows, the presets as --caches; the
tile loop is the backward branch around the most HMMA or HGMMA (wgmma).

A static count, not ncu's executed count: it is the quick check of a codec
or copy change before a device run (PERF.md's "instructions per step").

  pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm   # if the toolkit lacks them
  python3 bench/sass_budget.py --shapes B4-32/8-D128-L32K --caches f16,i4
  python3 bench/sass_budget.py --prefill prefill-wgmma --caches f16,i4
  python3 bench/sass_budget.py --mla auto --shapes B32-L8K-H16,B32-L8K-H128
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import bench_decode  # noqa: E402

ir = bench_decode.ir

INSTRUCTION = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
# BRA 0x..., @P0 BRA 0x..., and uniform branches: BRA.U !UP0, 0x...
BRANCH = re.compile(r"\bBRA(?:\.\w+)*\s+(?:!?U?P\w+,\s*)?`?\(?0x([0-9a-f]+)")


def cuobjdump() -> str:
    """cuobjdump from PATH, the CUDA toolkit, or the pip package."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    candidates = ["/usr/local/cuda/bin/cuobjdump"]
    for site in sys.path:
        candidates += glob.glob(os.path.join(site, "nvidia", "*", "bin",
                                             "cuobjdump"))
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    sys.exit("sass_budget: no cuobjdump (pip install nvidia-cuda-cuobjdump)")


def disassembler_env(dump: str) -> dict:
    """The environment for `dump -sass`: cuobjdump runs nvdisasm, which it
    finds on PATH (here also cuobjdump's own directory, where the pip
    packages put both)."""
    folder = os.path.dirname(dump)
    beside = os.path.join(folder, "nvdisasm")
    if not shutil.which("nvdisasm") and not os.access(beside, os.X_OK):
        sys.exit("sass_budget: cuobjdump needs nvdisasm "
                 "(pip install nvidia-cuda-nvdisasm)")
    env = dict(os.environ)
    env["PATH"] = folder + os.pathsep + env.get("PATH", "")
    return env


def opcode(text: str) -> str:
    text = re.sub(r"^@!?U?P\w+\s+", "", text)
    return text.split()[0].split(".")[0]


def kernels(sass: str) -> dict[str, list[tuple[int, str]]]:
    """The instructions of each function of a cuobjdump listing."""
    result = {}
    for part in sass.split("Function : ")[1:]:
        name = part.split()[0]
        result[name] = [(int(m.group(1), 16), m.group(2))
                        for m in map(INSTRUCTION.match, part.splitlines())
                        if m]
    return result


def is_mma(text: str) -> bool:
    """An mma.sync (HMMA) or wgmma (HGMMA) instruction."""
    return opcode(text).startswith(("HMMA", "HGMMA"))


def tile_loop(code: list[tuple[int, str]]):
    """(start, end) of the backward branch that spans the most HMMA or
    HGMMA."""
    best = None
    for at, text in code:
        m = BRANCH.search(text)
        if not m or int(m.group(1), 16) >= at:
            continue
        start = int(m.group(1), 16)
        mma = sum(1 for a, t in code if start <= a <= at and is_mma(t))
        if best is None or mma > best[2]:
            best = (start, at, mma)
    return best[:2] if best else None


def report(name: str, code: list[tuple[int, str]]) -> str:
    loop = tile_loop(code)
    if loop is None:
        return f"{name}: no tile loop found"
    start, end = loop
    body = [(a, t) for a, t in code if start <= a <= end]
    counts = collections.Counter(opcode(t) for _, t in body)
    lines = [f"{name}: {len(code)} instructions, tile loop {len(body)}"]
    lines.append("  " + ", ".join(f"{k} {v}"
                                  for k, v in counts.most_common(20)))
    # Forward branches inside the loop: the stretch each one skips.
    for at, text in body:
        m = BRANCH.search(text)
        if m and at < int(m.group(1), 16) <= end:
            skipped = sum(1 for a, _ in body
                          if at < a < int(m.group(1), 16))
            lines.append(f"  {hex(at)} {text}: skips {skipped}")
    return "\n".join(lines)


def write_listing(folder: str, shape: str, cache: str,
                  code: list[tuple[int, str]]) -> None:
    """The tile loop's instructions, one a line, with their addresses."""
    loop = tile_loop(code)
    if loop is None:
        return
    path = pathlib.Path(folder, f"{shape.replace('/', '_')}-{cache}.sass")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{a:05x} {t}\n" for a, t in code
                            if loop[0] <= a <= loop[1]))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes",
                        help="bench_decode's rows (default B4-32/8-D128-L32K),"
                        " with --prefill bench_prefill's (default "
                        "B4-32/8-D128-P4K), with --mla bench_mla's (default "
                        "all)")
    parser.add_argument("--prefill", metavar="BACKEND",
                        help="the prefill kernel of a bench_prefill column "
                        "(prefill, prefill-mma-sync, prefill-wgmma)")
    parser.add_argument("--mla", metavar="BACKEND", choices=("auto", "mma"),
                        help="the MLA decode of a bench_mla column (auto: "
                        "the warpgroup kernel on sm_90a; mma: the mma.sync "
                        "kernel, built for sm_90); --caches are presets")
    parser.add_argument("--caches",
                        help="bench_decode's caches (default all), or with "
                        "--mla bench_mla's presets (default all)")
    parser.add_argument("--chip", default="sm_90a")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--layout", default="nhd", choices=("nhd", "hnd"))
    parser.add_argument("--compiler",
                        default=os.environ.get(
                            "PATTN_COMPILE",
                            str(REPO / "build" / "bin" / "pattn-compile")))
    parser.add_argument("--flag", action="append", default=[],
                        metavar="FLAG",
                        help="a pattn-compile flag for every module (e.g. "
                        "--flag=--xqa-scores-ahead; repeatable), to compare "
                        "a plan request with the planner's choice")
    parser.add_argument("--listing", metavar="DIR",
                        help="also write each tile loop's SASS to "
                        "DIR/<shape>-<cache>.sass, to read what it spends")
    args = parser.parse_args(argv)
    if args.prefill and args.mla:
        parser.error("--prefill and --mla: one kernel family at a time")
    if args.prefill and "prompt_kernel" not in bench_decode.compile_options(
            args.prefill):
        parser.error(f"--prefill {args.prefill}: not a prefill column")
    return args


def jobs(args) -> tuple[str, list]:
    """What the reported kernels' names hold (the MLA decode is
    pattn_xqa_mla_decode or, on wgmma, pattn_xqa_mla_wgmma_decode) and the
    modules to compile: (shape, cache, module text, chip, pattn-compile
    flags) each."""
    if args.mla:
        import bench_mla
        chip = bench_mla.compile_options(args.mla, args.chip)["chips"][0]
        modes = dict(bench_mla.PRESETS)
        presets = (args.caches or ",".join(modes)).split(",")
        shapes = {s.name: s for s in bench_mla.SHAPES}
        wanted = (args.shapes or ",".join(shapes)).split(",")
        return "xqa_mla", [
            (name, preset,
             bench_mla.ir.emit_mla(bench_mla.config(
                 preset, modes[preset], shapes[name].heads)).text, chip, [])
            for name in wanted for preset in presets]
    kernel, flags = "xqa_decode", []
    shapes = {s.name: s for s in bench_decode.SHAPES}
    if args.prefill:
        import bench_prefill
        options = bench_decode.compile_options(args.prefill)
        kernel = "pattn_prefill"
        flags = [f"--prompt-kernel={options['prompt_kernel']}"]
        shapes = {s.name: s for s in bench_prefill.SHAPES}
    wanted = (args.shapes or next(iter(shapes))).split(",")
    caches = (args.caches or ",".join(bench_decode.CACHES)).split(",")
    return kernel, [
        (name, cache,
         ir.emit_paged(bench_decode.bench_config(
             shapes[name], cache, args.block_size, args.layout)).text,
         args.chip, flags)
        for name in wanted for cache in caches]


def main(argv=None) -> int:
    args = parse_args(argv)
    kernel, modules = jobs(args)
    dump = cuobjdump()
    env = disassembler_env(dump)
    with tempfile.TemporaryDirectory() as tmp:
        for shape_name, cache, text, chip, flags in modules:
            source = pathlib.Path(tmp, "module.mlir")
            source.write_text(text)
            out = pathlib.Path(tmp, "module")
            subprocess.run([args.compiler, f"--chips={chip}", *flags,
                            *args.flag,
                            "--emit=cubin", str(source), "-o", str(out)],
                           check=True)
            sass = subprocess.run(
                [dump, "-sass", f"{out}.{chip}.cubin"], check=True,
                capture_output=True, text=True, env=env).stdout
            print(f"## {shape_name} {cache}")
            for name, code in kernels(sass).items():
                if kernel in name:
                    print(report(name, code))
                    if args.listing:
                        write_listing(args.listing, shape_name, cache, code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
