"""pattn.__version__ is the repository's VERSION, as the tools print it."""

import os
import pathlib
import re
import subprocess

import pytest

import pattn

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_version_matches_the_version_file():
    assert pattn.__version__ == (REPO / "VERSION").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", pattn.__version__)


def test_compiler_prints_the_same_version():
    compiler = os.environ.get("PATTN_COMPILE")
    if not compiler or not os.path.exists(compiler):
        pytest.skip("PATTN_COMPILE is not set to a built pattn-compile")
    shown = subprocess.run([compiler, "--version"], capture_output=True,
                           text=True, check=True).stdout
    assert f"pattn {pattn.__version__} (commit " in shown
