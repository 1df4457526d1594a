"""The benchmark tools' pieces that run on the CPU: bench_decode.py's
column compile options (``auto@<keys>`` and ``auto@<keys>s<stages>``) and
its results table's header, which names the page order of the block tables
(``--page-order``) and the calls behind each median; profile_kernels.py's
argument checks; sass_budget.py's tile loop (HMMA or HGMMA) and its
--prefill columns; bench_prefill.py's empty selections."""

import importlib.util
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    # bench_decode imports its neighbour timing.py as the script would.
    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location(
        "bench_decode", REPO / "bench" / "bench_decode.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_decode"] = module  # its dataclasses look it up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("column,options", [
    ("auto", {"backend": "auto"}),
    ("auto@128", {"backend": "auto", "xqa_keys_per_tile": 128}),
    ("auto@64s6", {"backend": "auto", "xqa_keys_per_tile": 64,
                   "xqa_stages": 6}),
    ("auto@0s8", {"backend": "auto", "xqa_keys_per_tile": 0,
                  "xqa_stages": 8}),
    ("auto@0w", {"backend": "auto", "xqa_keys_per_tile": 0,
                 "xqa_copy_warp": True}),
    ("auto@64s6w", {"backend": "auto", "xqa_keys_per_tile": 64,
                    "xqa_stages": 6, "xqa_copy_warp": True}),
    ("auto@0a", {"backend": "auto", "xqa_keys_per_tile": 0,
                 "xqa_scores_ahead": True}),
    ("auto@64s5a", {"backend": "auto", "xqa_keys_per_tile": 64,
                    "xqa_stages": 5, "xqa_scores_ahead": True}),
    ("auto@0c8", {"backend": "auto", "xqa_keys_per_tile": 0,
                  "xqa_cluster_heads": 8}),
    ("auto@64s4c2a", {"backend": "auto", "xqa_keys_per_tile": 64,
                      "xqa_stages": 4, "xqa_cluster_heads": 2,
                      "xqa_scores_ahead": True}),
    ("auto@0m8", {"backend": "auto", "xqa_keys_per_tile": 0,
                  "xqa_cluster_splits": 8}),
    ("auto@0u", {"backend": "auto", "xqa_keys_per_tile": 0,
                 "xqa_merge_unsplit": True}),
    ("auto@0s4uw", {"backend": "auto", "xqa_keys_per_tile": 0,
                    "xqa_stages": 4, "xqa_merge_unsplit": True,
                    "xqa_copy_warp": True}),
    ("auto@64s4m2a", {"backend": "auto", "xqa_keys_per_tile": 64,
                      "xqa_stages": 4, "xqa_cluster_splits": 2,
                      "xqa_scores_ahead": True})])
def test_column_compile_options(bench, column, options):
    assert bench.compile_options(column) == options


@pytest.mark.parametrize("column", ["auto@", "auto@x", "auto@0c", "auto@0q",
                                    "auto@0m", "auto@0m8c2", "auto@0u8"])
def test_unknown_column_is_an_error(bench, column):
    with pytest.raises(ValueError, match="unknown benchmark column"):
        bench.compile_options(column)


@pytest.mark.parametrize("order", ["random", "linear"])
def test_header_names_page_order_and_calls(bench, order):
    report = {"date": "2026-12-06 00:00 UTC", "gpu": "NVIDIA H200",
              "chip": "sm_90a", "commit": "0123456789abcdef",
              "copy_tbps": 4.23, "block_size": 16, "layout": "nhd",
              "page_order": order, "iters": 50, "backends": ["auto"],
              "rows": []}
    header = bench.markdown(report).splitlines()[0]
    assert f"16-token nhd pages ({order} block tables)" in header
    assert "medians of 50 calls" in header
    assert "{" not in header


def test_page_order_is_checked(bench):
    with pytest.raises(SystemExit):
        bench.parse_args(["--page-order", "sorted"])


def bench_script(name):
    """bench/<name>.py as a module (its neighbours importable: see `bench`)."""
    spec = importlib.util.spec_from_file_location(
        name, REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def profile_kernels(bench):
    return bench_script("profile_kernels")


@pytest.mark.parametrize("argv,message", [
    (["--shapes", "B4-32/8-D128-L32K,B9-nope"], "unknown shapes ['B9-nope']"),
    (["--replays", "3"], "--replays must be at least 4"),
    (["--prefill", "--shapes", "B4-32/8-D128-L32K"],
     "unknown shapes ['B4-32/8-D128-L32K']"),
    (["--shapes", "B4-32/8-D128-P4K"], "unknown shapes ['B4-32/8-D128-P4K']"),
    (["--prefill", "--backend", "auto"], "--prefill takes a bench_prefill "
     "kernel (xqa-tiles, prefill-mma-sync, prefill-wgmma, prefill, portable)")])
def test_profile_kernels_rejects_bad_arguments(profile_kernels, capsys, argv,
                                               message):
    """bench/profile_kernels.py names what is wrong before it needs a GPU."""
    assert profile_kernels.main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.fixture(scope="module")
def sass_budget(bench):
    return bench_script("sass_budget")


# A cuobjdump listing's shape: an outer loop of plain ALU around an inner
# one; the wgmma kernel's tile loop holds its HGMMA, not HMMA.
LISTING = """
        Function : pattn_prefill_0123
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   IMAD R2, R1, R1, RZ ;
        /*0020*/                   HGMMA.64x64x16.F32 R24, gdesc[UR4], RZ ;
        /*0030*/                   FMNMX R3, R2, R1, !PT ;
        /*0040*/              @!P0 BRA 0x20 ;
        /*0050*/                   IADD3 R4, R2, 0x1, RZ ;
        /*0060*/                   BRA 0x0 ;
"""


def test_sass_budget_finds_a_wgmma_tile_loop(sass_budget):
    """The tile loop is the backward branch around the most HMMA or HGMMA
    (a wgmma kernel has no HMMA): both loops here hold the one HGMMA, and
    the first found, the inner one, stays unless another holds more."""
    code = sass_budget.kernels(LISTING)["pattn_prefill_0123"]
    assert sass_budget.is_mma("HGMMA.64x64x16.F32 R24, gdesc[UR4], RZ")
    assert sass_budget.is_mma("@P1 HMMA.16816.F32 R4, R8, R12, R4")
    assert not sass_budget.is_mma("FMNMX R3, R2, R1, !PT")
    assert sass_budget.tile_loop(code) == (0x20, 0x40)
    assert "tile loop 3" in sass_budget.report("k", code)


@pytest.mark.parametrize("argv,message", [
    (["--prefill", "auto"], "--prefill auto: not a prefill column"),
    (["--mla", "portable"], "argument --mla: invalid choice: 'portable'"),
    (["--prefill", "prefill", "--mla", "auto"],
     "--prefill and --mla: one kernel family at a time")])
def test_sass_budget_refuses_bad_columns(sass_budget, capsys, argv, message):
    """--prefill names a bench_prefill column, --mla a bench_mla one, not
    both; the rest is refused before anything is compiled."""
    with pytest.raises(SystemExit):
        sass_budget.main(argv)
    assert message in capsys.readouterr().err


def test_sass_budget_mla_jobs(sass_budget):
    """--mla compiles bench_mla's modules: the presets as caches, the mma
    column for sm_90 (no wgmma)."""
    args = sass_budget.parse_args(["--mla", "mma", "--shapes",
                                   "B32-L8K-H128", "--caches", "fp8_ds_mla"])
    kernel, modules = sass_budget.jobs(args)
    assert kernel == "xqa_mla"
    [(shape, preset, text, chip, flags)] = modules
    assert (shape, preset, chip, flags) == ("B32-L8K-H128", "fp8_ds_mla",
                                            "sm_90", [])
    assert "num_heads = 128" in text


@pytest.mark.parametrize("argv", [
    ["--backends", "bogus"], ["--caches", "f32"], ["--shapes", "B9-nope"],
    ["--precompile", "sm_90a", "--backends", "bogus"]])
def test_bench_prefill_refuses_an_empty_selection(bench, capsys, argv):
    """bench_prefill.py says so when its shapes, caches or kernels select
    nothing, timing or precompiling, instead of a table of nan."""
    assert bench_script("bench_prefill").main(argv) == 2
    assert "bench_prefill: nothing selected" in capsys.readouterr().err


def test_sass_budget_passes_flags_to_every_module(sass_budget):
    """--flag (repeatable) reaches pattn-compile for every module, so a plan
    request (--xqa-scores-ahead) compares with the planner's choice."""
    args = sass_budget.parse_args(["--caches", "i4", "--flag=--xqa-scores-ahead",
                                   "--flag=--xqa-stages=5"])
    assert args.flag == ["--xqa-scores-ahead", "--xqa-stages=5"]
    assert sass_budget.parse_args([]).flag == []
