"""Shared setup of pattn's Python tests.

Puts this checkout's ``python/`` first on ``sys.path``, so the tests import
the package they sit beside rather than an installed one, and provides the
C compiler that tests use to build stand-in artifacts, and pattn's own
tools (pattn-opt, pattn-compile) where they are built.
"""

import pathlib
import shutil
import sys

import pytest

PYTHON_DIR = pathlib.Path(__file__).resolve().parents[1]
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


@pytest.fixture(scope="session")
def c_compiler():
    """The system C compiler; tests that build shared libraries skip, saying
    why, where there is none."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH to build test "
                    "artifacts")
    return compiler


@pytest.fixture(scope="session")
def opt():
    """pattn-opt (pattn.find_opt); tests that need it skip, saying why,
    where it is not built."""
    import pattn
    try:
        return pattn.find_opt()
    except pattn.CompileError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def compiler():
    """pattn-compile (pattn.find_compiler); tests that need it skip, saying
    why, where it is not built."""
    import pattn
    try:
        return pattn.find_compiler()
    except pattn.CompileError as error:
        pytest.skip(str(error))
