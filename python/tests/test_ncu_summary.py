"""bench/ncu_summary.py on the CPU: the CSVs ncu writes for one profiled
kernel (sections, raw metrics, per-SASS-instruction samples, the kernels of
one call) become the tables the MLA results files quote, including the
code cut into a tile's phases at barriers and waits; a profile with files
missing says which, and does not fail."""

import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
SUMMARY = REPO / "bench" / "ncu_summary.py"

DETAILS = '''==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","pattn_xqa_mla_decode_0","1","7","(128, 1, 1)","(12, 1, 32)","0","9.0","GPU Speed Of Light Throughput","Duration","usecond","98.21"
"0","1","python3","h","pattn_xqa_mla_decode_0","1","7","(128, 1, 1)","(12, 1, 32)","0","9.0","GPU Speed Of Light Throughput","DRAM Throughput","%","37.40"
"0","1","python3","h","pattn_xqa_mla_decode_0","1","7","(128, 1, 1)","(12, 1, 32)","0","9.0","Launch Statistics","Registers Per Thread","register/thread","168"
'''
RAW = '''"ID","Kernel Name","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio","smsp__cycles_active.avg"
"","","ratio","ratio","ratio","cycle"
"0","pattn_xqa_mla_decode_0","0.31","1.25","1.10","190,000"
'''
# As ncu prints the source page: the kernel's name on a line of its own.
SASS = '''"Kernel Name","pattn_xqa_mla_decode_0",
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","Instructions Executed","stall_barrier","stall_short_sb","stall_barrier (Not Issued)"
"0x10","LDS R94, [R132+0x4900]","120","100","1,000","0","120","0"
"0x20","@P3 BRA `(.L_x_41)","5","1","100","5","0","1"
"0x30","HMMA.16816.F32 R48, R48, R94, RZ","40","30","900","0","40","0"
"0x40","BAR.SYNC.DEFER_BLOCKING 0x0","300","300","50","300","0","300"
"0x50","LOP3.LUT R96, R96, 0xe000e00, RZ, 0xc0, !PT","35","20","1,950","0","35","0"
'''
KERNELS = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","pattn_xqa_mla_decode_0(...)","1","7","(128, 1, 1)","(12, 1, 32)","0","9.0","GPU Speed Of Light Throughput","Duration","usecond","98.21"
"1","1","python3","h","pattn_merge_1(...)","1","7","(128, 1, 1)","(2048, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","usecond","9.20"
'''


def summarize(*names):
    result = subprocess.run([sys.executable, str(SUMMARY), *names],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_whole_profile(tmp_path):
    name = tmp_path / "ncu-mla-B32-L8K-H16-fp8_ds_mla"
    for suffix, text in (("details", DETAILS), ("raw", RAW), ("sass", SASS),
                         ("kernels", KERNELS)):
        pathlib.Path(f"{name}-{suffix}.csv").write_text(text)
    # Either the profile's name or one of its files names it.
    out = summarize(f"{name}-details.csv")
    assert out == summarize(str(name))
    assert "### ncu-mla-B32-L8K-H16-fp8_ds_mla" in out
    assert "Kernel: `pattn_xqa_mla_decode_0`" in out
    assert "| Duration | 98.21 usecond |" in out
    assert "| Registers Per Thread | 168 register/thread |" in out
    assert "| Grid Size | (12, 1, 32) |" in out
    assert "`pattn_xqa_mla_decode_0` 98.21 usecond; `pattn_merge_1` 9.20" in out
    # Stall reasons, largest first, their sum the cycles per instruction.
    assert ("by stall reason (sum 2.66): wait 1.25, short scoreboard 1.10, "
            "barrier 0.31") in out
    # Stall samples by reason (the issued and not-issued columns apart).
    assert "Stall samples by reason: barrier 61.0%, short sb 39.0%" in out
    # Executed 4,000 warp instructions, 500 stall samples.
    assert "Executed warp instructions 4,000; stall samples 500." in out
    assert "| barriers | 1.2% | 60.0% |" in out
    assert "| shared memory (LDS, LDSM, STS) | 25.0% | 24.0% |" in out
    assert ("| conversions and bit decoding (F2FP, LOP3, SHF, PRMT, HMUL2, "
            "HFMA2) | 48.8% | 7.0% |") in out
    assert "Opcodes by executed share: LOP3 48.8%, LDS 25.0%, HMMA 22.5%" in out
    # The tile's phases: the code cut at the barrier.
    assert ("| 0x10 | `LDS R94, [R132+0x4900]` | 50.0% | 33.0% | LDS 50.0%, "
            "HMMA 45.0%, BRA 5.0% |") in out
    assert ("| 0x40 | `BAR.SYNC.DEFER_BLOCKING 0x0` | 50.0% | 67.0% | "
            "LOP3 97.5%, BAR 2.5% |") in out
    # The predicate is not the opcode; the most-sampled instruction first.
    assert "BRA 2.5%" in out
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    assert rows[0].startswith(
        "| `BAR.SYNC.DEFER_BLOCKING 0x0` | 0x40 | 60.0% | barrier | 50 |")


def test_missing_files_are_named(tmp_path):
    name = tmp_path / "ncu-mla-B32-L8K-H128-fp8_ds_mla"
    out = summarize(str(name))
    assert f"(no details: {name}-details.csv is missing or empty)" in out
    assert f"(no SASS profile: {name}-sass.csv is missing or empty)" in out
