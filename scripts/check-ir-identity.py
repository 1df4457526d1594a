#!/usr/bin/env python3
"""Restructurings of the lowering must not change what it emits: this script
runs `pattn-compile --emit=mlir` over a fixed set of inputs, for sm_80,
sm_90a and the six-chip build (with and without the chips' conversion
instructions), on both backends, and compares a SHA-256 of
each output (kernel symbol names made neutral) with the manifest recorded
from the reference commit named in it.

The inputs: the bundled examples, the all-ops/MLA inputs of the ptxas
tests, and every split of the conversion's lit inputs (a split that fails
to compile is compared by its diagnostics); and the prompt inputs again
with each prompt kernel named (backend auto): --prompt-kernel=prefill (the
default, which the whole prefill files are not otherwise compiled with)
and --prompt-kernel=xqa.

  python3 scripts/check-ir-identity.py                 # compare (exit 1 on a change)
  python3 scripts/check-ir-identity.py --dump DIR      # also write each output to DIR
  python3 scripts/check-ir-identity.py --record        # rewrite the manifest (an
                                                       # intended IR change only)

Kernel symbols are renamed to k<N>, numbered per gpu.module in the order they
are defined, so a change of naming scheme alone does not count as a change;
and a kernel identical to an earlier one of its gpu.module (but for its
name) is dropped, its launches calling the earlier one, so that merging
identical kernels (which the compiler does since issue 28: kernels are named
by their content) does not count either.
"""
import argparse
import concurrent.futures
import hashlib
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "test" / "IR" / "ir-identity.sha256"
SIX_CHIPS = "sm_80,sm_86,sm_89,sm_90a,sm_100a,sm_120a"
# (chips, whether kernels may use the chips' conversion instructions)
TARGETS = [("sm_80", True), ("sm_90a", True), (SIX_CHIPS, True), (SIX_CHIPS, False)]
BACKENDS = ["auto", "portable"]
WHOLE_INPUTS = ["test/Target/Inputs/*.mlir", "examples/*.mlir"]
SPLIT_INPUTS = ["test/Conversion/PAttnToGPU/convert-pattn-to-gpu*.mlir"]
# Prompts, also compiled with the prefill family named
# (--prompt-kernel=prefill, the default).
PREFILL_INPUTS = ["test/Target/prefill-ptxas.mlir",
                  "test/Conversion/PAttnToGPU/convert-pattn-to-gpu-prefill.mlir"]
# Prompts on the XQA query tiles (--prompt-kernel=xqa): whole files, and
# splits (name#N) of the split inputs.
XQA_TILE_INPUTS = [
    "test/Target/prefill-ptxas.mlir",
    "test/Conversion/PAttnToGPU/convert-pattn-to-gpu-prefill.mlir",
    "test/Conversion/PAttnToGPU/convert-pattn-to-gpu-xqa-prompt.mlir#0",
    "test/Conversion/PAttnToGPU/convert-pattn-to-gpu-plans.mlir#6",
    "test/Conversion/PAttnToGPU/convert-pattn-to-gpu-plans.mlir#7",
    "test/Conversion/PAttnToGPU/convert-pattn-to-gpu-plans.mlir#8",
    "test/Conversion/PAttnToGPU/convert-pattn-to-gpu.mlir#6"]


def inputs(work):
    """(name, path) of every input; split files become one file per split."""
    result = []
    for pattern in WHOLE_INPUTS:
        for path in sorted(ROOT.glob(pattern)):
            result.append((str(path.relative_to(ROOT)), path))
    for pattern in SPLIT_INPUTS:
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text()
            # Keep line numbers: each split is padded to where it starts.
            parts = re.split(r"^// -----\s*$", text, flags=re.M)
            line = 0
            for i, part in enumerate(parts):
                chunk = work / f"{path.stem}.{i}.mlir"
                chunk.write_text("\n" * line + part)
                line += part.count("\n") + 1
                result.append((f"{path.relative_to(ROOT)}#{i}", chunk))
    return result


_FUNC = re.compile(r"gpu\.func @([\w$.]+)")
_MODULE = re.compile(r"gpu\.module @([\w$.]+)")


def merge_identical_kernels(text):
    """`text` without the kernels that repeat an earlier kernel of their
    gpu.module but for the name; their uses `@module::@name` name the
    earlier one."""
    lines = text.splitlines()
    keep, merged = [], {}
    first_by_body = {}
    module = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _MODULE.search(line)
        if m:
            module = m.group(1)
        m = _FUNC.search(line)
        if not (m and module is not None):
            keep.append(line)
            i += 1
            continue
        indent = line[:len(line) - len(line.lstrip())]
        end = i + 1
        while end < len(lines) and lines[end] != indent + "}":
            end += 1
        block = lines[i:end + 1]
        name = m.group(1)
        body = "\n".join(block).replace("@" + name + "(", "@_(", 1)
        first = first_by_body.setdefault((module, body), name)
        if first == name:
            keep.extend(block)
        else:
            merged[(module, name)] = first
        i = end + 1
    return "\n".join(
        re.sub(r"@([\w$.]+)::@([\w$.]+)",
               lambda r: "@%s::@%s" % (r.group(1), merged.get(
                   (r.group(1), r.group(2)), r.group(2))), line)
        for line in keep) + "\n"


def neutral_names(text):
    """`text` with identical kernels merged, and each kernel symbol renamed
    k<N> (per module, by order of definition), at its definition and at
    every use `@module::@name`."""
    text = merge_identical_kernels(text)
    renames = {}
    module = None
    counters = {}
    for line in text.splitlines():
        m = _MODULE.search(line)
        if m:
            module = m.group(1)
            counters.setdefault(module, 0)
            continue
        m = _FUNC.search(line)
        if m and module is not None:
            renames[(module, m.group(1))] = f"k{counters[module]}"
            counters[module] += 1
    out = []
    module = None
    for line in text.splitlines():
        m = _MODULE.search(line)
        if m:
            module = m.group(1)
        m = _FUNC.search(line)
        if m and (module, m.group(1)) in renames:
            line = line.replace("@" + m.group(1) + "(",
                                "@" + renames[(module, m.group(1))] + "(", 1)
        line = re.sub(
            r"@([\w$.]+)::@([\w$.]+)",
            lambda r: "@%s::@%s" % (r.group(1), renames.get(
                (r.group(1), r.group(2)), r.group(2))), line)
        out.append(line)
    return "\n".join(out) + "\n"


def compile_one(compiler, name, path, target, backend, extra, work):
    chips, conversions = target
    out = work / f"{abs(hash((name, target, backend, extra)))}.out.mlir"
    # The input is named relative to the directory the compiler runs in:
    # its name reaches the output (the host checks' messages).
    proc = subprocess.run(
        [compiler, path.name, f"--chips={chips}", f"--backend={backend}",
         f"--hardware-conversions={str(conversions).lower()}",
         *extra, "--emit=mlir", "-o", str(out)],
        capture_output=True, text=True, cwd=path.parent)
    if proc.returncode == 0:
        text = neutral_names(out.read_text())
    else:
        # The diagnostics, without the temporary file's directory.
        text = "exit %d\n%s" % (proc.returncode, proc.stderr)
    key = f"{name} chips={chips} backend={backend}"
    if not conversions:
        key += " hardware-conversions=false"
    for flag in extra:
        key += " " + flag.lstrip("-")
    return key, hashlib.sha256(text.encode()).hexdigest(), text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--reference", default=None,
                        help="the commit the manifest stands for (with --record)")
    parser.add_argument("--dump", type=pathlib.Path)
    parser.add_argument("--compiler", default=str(
        pathlib.Path(os.environ.get("BUILD_DIR", ROOT / "build")) / "bin" / "pattn-compile"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        all_inputs = inputs(work)
        jobs = [(name, path, target, backend, ())
                for name, path in all_inputs
                for target in TARGETS for backend in BACKENDS]
        jobs += [(pattern, ROOT / pattern, target, "auto",
                  ("--prompt-kernel=prefill",))
                 for pattern in PREFILL_INPUTS for target in TARGETS]
        splits = dict(all_inputs)
        jobs += [(name, splits[name] if "#" in name else ROOT / name, target,
                  "auto", ("--prompt-kernel=xqa",))
                 for name in XQA_TILE_INPUTS for target in TARGETS]
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
            results = list(pool.map(
                lambda j: compile_one(args.compiler, *j, work), jobs))
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        for key, _, text in results:
            file = re.sub(r"[^\w.#=,-]+", "_", key)
            (args.dump / file).write_text(text)
    if args.record:
        reference = args.reference or subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip()
        lines = [f"# pattn-compile --emit=mlir at {reference}, kernel names neutral "
                 "(scripts/check-ir-identity.py)"]
        lines += [f"{digest}  {key}" for key, digest, _ in results]
        MANIFEST.write_text("\n".join(lines) + "\n")
        print(f"check-ir-identity: recorded {len(results)} outputs in "
              f"{MANIFEST.relative_to(ROOT)}")
        return 0
    expected = {}
    for line in MANIFEST.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        digest, key = line.split("  ", 1)
        expected[key] = digest
    # Inputs added since the manifest was recorded have nothing to compare
    # with; they are listed, and --record takes them in.
    new = [key for key, _, _ in results if key not in expected]
    changed = [key for key, digest, _ in results
               if key in expected and expected[key] != digest]
    missing = sorted(set(expected) - {key for key, _, _ in results})
    for key in changed:
        print(f"changed: {key}")
    for key in missing:
        print(f"missing: {key}")
    if new:
        print(f"check-ir-identity: {len(new)} outputs of inputs newer than the "
              "manifest, not compared (e.g. " + new[0] + ")")
    print(f"check-ir-identity: {len(results) - len(new)} outputs, "
          f"{len(changed)} changed, {len(missing)} missing against "
          f"{MANIFEST.relative_to(ROOT)}")
    return 1 if changed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
