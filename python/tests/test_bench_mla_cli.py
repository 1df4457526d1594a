"""bench/bench_mla.py's command line on the CPU: --presets keeps only the
named record presets (so that ncu can profile one preset's kernel), and an
unknown name is an error, not an empty run. Precompiling needs
``pattn-compile`` (no GPU); that test skips, saying so, without one."""

import os
import pathlib
import subprocess
import sys

import pytest

import pattn

REPO = pathlib.Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_mla.py"


def run_bench(*args, env=None):
    return subprocess.run([sys.executable, str(BENCH), *args],
                          capture_output=True, text=True, env=env,
                          timeout=600)


def test_unknown_preset_is_an_error():
    result = run_bench("--presets", "fp8_ds_mla,no_such_preset")
    assert result.returncode == 2
    assert "unknown presets ['no_such_preset']" in result.stderr


def test_presets_pick_what_is_compiled(tmp_path):
    try:
        compiler = pattn.find_compiler()
    except Exception as error:  # no build, no PATH entry
        pytest.skip(f"no pattn-compile: {error}")
    def precompile(presets, folder):
        folder.mkdir()
        env = dict(os.environ, PATTN_ARTIFACT_DIR=str(folder),
                   PATTN_COMPILE=compiler)
        result = run_bench("--precompile", "sm_90a", "--backends", "auto",
                           "--shapes", "B1-L8K-H16", "--presets", presets,
                           env=env)
        assert result.returncode == 0, result.stderr
        return result.stdout, len(list(folder.glob("*.json")))

    one, one_files = precompile("nvfp4_ds_mla_fp8_rope", tmp_path / "one")
    # One preset, one head count, one backend: one module.
    assert "1 MLA benchmark modules for sm_90a (heads [16], backends " \
        "['auto'])" in one
    two, two_files = precompile("fp8_ds_mla,nvfp4_ds_mla_fp8_rope",
                                tmp_path / "two")
    assert "2 MLA benchmark modules" in two
    assert (one_files, two_files) == (1, 2)
