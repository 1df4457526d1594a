#!/usr/bin/env python3
"""Summarize ncu profiles of a decode kernel as a markdown table.

Reads what `scripts/gpu-run.sh` writes per profiled kernel (its `profile`
and `mla-profile` parts), for each NAME given:

  NAME-details.csv  ncu --page details --csv   (the sections' metrics)
  NAME-raw.csv      ncu --page raw --csv       (stall reasons per issue)
  NAME-sass.csv     ncu --page source --print-source sass --csv
  NAME-kernels.csv  ncu --section SpeedOfLight --csv over the decode and
                    merge kernels (optional: their durations side by side)

and prints, per profile: the headline metrics (duration, throughputs, issue
activity, warps per scheduler, registers, shared memory), the stall reasons
(warp cycles per issued instruction, by reason), executed instructions and
stall samples by instruction class, by stretch of code between barriers and
waits (a tile's phases), and by opcode, and the most-sampled instructions.

  python3 bench/ncu_summary.py gpu-results/ncu-mla-B32-L8K-H16-fp8_ds_mla ...
"""

import argparse
import collections
import csv
import io
import os
import re
import sys

#: Section metrics worth a line, in the order printed (those a report lacks
#: are left out).
HEADLINE = [
    "Duration",
    "DRAM Throughput",
    "L1/TEX Cache Throughput",
    "Compute (SM) Throughput",
    "Issue Slots Busy",
    "One or More Eligible",
    "Active Warps Per Scheduler",
    "Eligible Warps Per Scheduler",
    "Warp Cycles Per Issued Instruction",
    "Executed Instructions",
    "Registers Per Thread",
    "Dynamic Shared Memory Per Block",
    "Block Limit Registers",
    "Block Limit Shared Mem",
    "Theoretical Occupancy",
    "Achieved Occupancy",
    "Grid Size",
    "Block Size",
]

#: Opcode classes, by what the instruction is for in these kernels.
CLASSES = [
    ("tensor core (HMMA, HGMMA, wgmma fences and waits)",
     {"HMMA", "HGMMA", "WARPGROUP", "WARPSYNC"}),
    ("barriers", {"BAR", "BSYNC", "BSSY"}),
    ("shared memory (LDS, LDSM, STS)", {"LDS", "LDSM", "STS"}),
    ("global memory and cp.async", {"LDG", "STG", "LDGSTS", "LDGDEPBAR",
                                    "DEPBAR", "RED", "ATOM"}),
    ("conversions and bit decoding (F2FP, LOP3, SHF, PRMT, HMUL2, HFMA2)",
     {"F2FP", "LOP3", "SHF", "PRMT", "HMUL2", "HFMA2", "HADD2", "I2F",
      "F2F"}),
    ("fp32 softmax and scaling (FADD, FMUL, FFMA, FMNMX, MUFU, FSETP, FSEL)",
     {"FADD", "FMUL", "FFMA", "FMNMX", "MUFU", "FSETP", "FSEL", "FCHK"}),
    ("warp shuffles and votes", {"SHFL", "VOTE", "VOTEU", "MATCH"}),
]


def read_csv(path):
    """Rows of an ncu CSV as dicts (ncu prints ==PROF== lines first)."""
    if not os.path.exists(path):
        return []
    with open(path, newline="", errors="replace") as f:
        text = f.read()
    lines = text.splitlines()
    # The header is the first quoted line, past the source page's
    # "Kernel Name" line.
    start = next((i for i, line in enumerate(lines)
                  if line.startswith('"') and
                  not line.startswith('"Kernel Name",')), None)
    if start is None:
        return []
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def number(text):
    """A metric value as a float (ncu prints 1,234.5), or None."""
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def column(rows, *needles):
    """The first column name holding every needle (case-insensitive)."""
    if not rows:
        return None
    for name in rows[0]:
        if all(n.lower() in name.lower() for n in needles):
            return name
    return None


def headline(details):
    """(metric, unit, value) for the HEADLINE metrics of the first kernel."""
    seen = {}
    for row in details:
        name = row.get("Metric Name")
        if name in HEADLINE and name not in seen:
            seen[name] = (row.get("Metric Unit", ""), row.get("Metric Value"))
    for key in ("Grid Size", "Block Size"):
        if key not in seen and details and details[0].get(key):
            seen[key] = ("", details[0][key])
    return [(name, *seen[name]) for name in HEADLINE if name in seen]


def stall_reasons(raw):
    """Warp cycles per issued instruction by stall reason, largest first."""
    if len(raw) < 2:
        return []
    # Row 0 holds the units under ncu's raw CSV header; the kernel follows.
    row = raw[1] if raw[0].get("ID", "") in ("", None) else raw[0]
    pattern = re.compile(
        r"smsp__average_warps?_issue_stalled_(\w+?)_per_issue_active\.ratio$")
    reasons = []
    for name, value in row.items():
        match = pattern.match(name or "")
        v = number(value)
        if match and v is not None and v > 0:
            reasons.append((match.group(1).replace("_", " "), v))
    return sorted(reasons, key=lambda r: -r[1])


def opcode(source):
    """The opcode of a SASS line: past a predicate, before its modifiers."""
    words = source.strip().split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def sass_profile(sass):
    """Per opcode: executed warp instructions and stall samples; stall
    samples per reason (the source page's stall_* columns); and the
    instructions with the most stall samples, with their largest reason."""
    source = column(sass, "source")
    executed = column(sass, "instructions executed")
    samples = column(sass, "warp stall sampling", "all")
    address = column(sass, "address")
    if not source:
        return None
    reason_columns = [name for name in sass[0]
                      if name and name.startswith("stall_") and
                      "not issued" not in name.lower()]
    by_opcode = collections.defaultdict(lambda: [0.0, 0.0])
    by_reason = collections.defaultdict(float)
    rows = []
    for row in sass:
        op = opcode(row[source])
        e = number(row.get(executed, 0)) or 0.0
        s = number(row.get(samples, 0)) or 0.0
        by_opcode[op][0] += e
        by_opcode[op][1] += s
        reasons = [(number(row[name]) or 0.0, name[len("stall_"):])
                   for name in reason_columns]
        for count, reason in reasons:
            by_reason[reason] += count
        largest = max(reasons, default=(0.0, ""))
        rows.append((s, row.get(address, "?"), row[source].strip(), e,
                     largest[1] if largest[0] > 0 else ""))
    rows.sort(key=lambda r: -r[0])
    return by_opcode, by_reason, rows


#: Instructions that end a phase of a tile: barriers, the wgmma and cp.async
#: waits, a cp.async commit.
PHASE_ENDS = ("BAR", "WARPGROUP.DEPBAR", "DEPBAR", "LDGDEPBAR")


def phases(sass):
    """The kernel cut into stretches of code (in address order) at each
    PHASE_ENDS instruction: per stretch its first instruction, executed
    warp instructions, stall samples and most executed opcodes."""
    source = column(sass, "source")
    executed = column(sass, "instructions executed")
    samples = column(sass, "warp stall sampling", "all")
    address = column(sass, "address")
    stretches = []
    current = None
    for row in sass:
        text = row[source].strip()
        words = text.split()
        if words and words[0].startswith("@"):
            words = words[1:]
        full = words[0] if words else "?"
        if current is None or any(full == end or full.startswith(end + ".")
                                  for end in PHASE_ENDS):
            current = {"address": row.get(address, "?"), "first": text,
                       "executed": 0.0, "samples": 0.0,
                       "opcodes": collections.Counter()}
            stretches.append(current)
        e = number(row.get(executed, 0)) or 0.0
        current["executed"] += e
        current["samples"] += number(row.get(samples, 0)) or 0.0
        current["opcodes"][opcode(text)] += e
    return stretches


def share(part, whole):
    return f"{100.0 * part / whole:.1f}%" if whole else "—"


def summarize(name, out):
    label = os.path.basename(name)
    details = read_csv(name + "-details.csv")
    raw = read_csv(name + "-raw.csv")
    sass = read_csv(name + "-sass.csv")
    kernels = read_csv(name + "-kernels.csv")
    out.append(f"### {label}")
    out.append("")
    if details:
        out.append(f"Kernel: `{details[0].get('Kernel Name', '?')}`")
        out.append("")
        out.append("| metric | value |")
        out.append("|---|---:|")
        for metric, unit, value in headline(details):
            out.append(f"| {metric} | {value} {unit}".rstrip() + " |")
        out.append("")
    else:
        out.append(f"(no details: {name}-details.csv is missing or empty)")
        out.append("")
    durations = [(row.get("Kernel Name", "?"), row.get("Metric Value"),
                  row.get("Metric Unit", ""))
                 for row in kernels if row.get("Metric Name") == "Duration"]
    if durations:
        out.append("Kernels of one call (ncu, caches flushed between them): " +
                   "; ".join(f"`{k.split('(')[0]}` {v} {u}"
                             for k, v, u in durations))
        out.append("")
    reasons = stall_reasons(raw)
    if reasons:
        total = sum(v for _, v in reasons)
        out.append("Warp cycles per issued instruction by stall reason "
                   f"(sum {total:.2f}): " +
                   ", ".join(f"{r} {v:.2f}" for r, v in reasons[:10]))
        out.append("")
    profile = sass_profile(sass)
    if not profile:
        out.append(f"(no SASS profile: {name}-sass.csv is missing or empty)")
        out.append("")
        return
    by_opcode, by_reason, rows = profile
    executed = sum(v[0] for v in by_opcode.values())
    samples = sum(v[1] for v in by_opcode.values())
    out.append(f"Executed warp instructions {executed:,.0f}; "
               f"stall samples {samples:,.0f}.")
    out.append("")
    if by_reason:
        reason_total = sum(by_reason.values())
        largest = sorted(by_reason.items(), key=lambda kv: -kv[1])[:10]
        out.append("Stall samples by reason: " + ", ".join(
            f"{reason.replace('_', ' ')} {share(count, reason_total)}"
            for reason, count in largest if count > 0))
        out.append("")
    out.append("| instruction class | executed | stall samples |")
    out.append("|---|---:|---:|")
    counted = set()
    for title, ops in CLASSES:
        e = sum(v[0] for op, v in by_opcode.items() if op in ops)
        s = sum(v[1] for op, v in by_opcode.items() if op in ops)
        counted |= ops
        out.append(f"| {title} | {share(e, executed)} | {share(s, samples)} |")
    e = sum(v[0] for op, v in by_opcode.items() if op not in counted)
    s = sum(v[1] for op, v in by_opcode.items() if op not in counted)
    out.append(f"| other (integer and address arithmetic, branches, moves) "
               f"| {share(e, executed)} | {share(s, samples)} |")
    out.append("")
    out.append("Stretches of code between barriers and waits (address "
               "order; those with 2% or more of either):")
    out.append("")
    out.append("| starts at | first instruction | executed | stall samples "
               "| most executed |")
    out.append("|---|---|---:|---:|---|")
    for stretch in phases(sass):
        e, s = stretch["executed"], stretch["samples"]
        if e < 0.02 * executed and s < 0.02 * samples:
            continue
        top_ops = ", ".join(f"{op} {share(n, e)}"
                            for op, n in stretch["opcodes"].most_common(4))
        first = stretch["first"].replace("|", "\\|")
        out.append(f"| {stretch['address']} | `{first}` | {share(e, executed)}"
                   f" | {share(s, samples)} | {top_ops} |")
    out.append("")
    top = sorted(by_opcode.items(), key=lambda kv: -kv[1][0])[:12]
    out.append("Opcodes by executed share: " + ", ".join(
        f"{op} {share(v[0], executed)}" for op, v in top))
    out.append("")
    out.append("| most-sampled instructions | address | stall samples | "
               "largest reason | executed |")
    out.append("|---|---|---:|---|---:|")
    for s, addr, text, e, reason in rows[:12]:
        text = text.replace("|", "\\|")
        out.append(f"| `{text}` | {addr} | {share(s, samples)} | "
                   f"{reason.replace('_', ' ')} | {e:,.0f} |")
    out.append("")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+",
                        help="profile paths (NAME or NAME-details.csv)")
    args = parser.parse_args(argv)
    out = []
    for name in args.names:
        summarize(re.sub(r"-(details|raw|sass|kernels)\.csv$", "", name), out)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
