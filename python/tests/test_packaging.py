"""Installing the Python package (issue 9 §3): `pip install .` at the
repository root, with the version from VERSION.

The README's own command, `pip install .` with build isolation (pip fetches
setuptools from PyPI), runs on a clean copy of the tree (issue 32 §1: it
failed on a fresh clone, which has no .build-python); it skips, saying
why, where PyPI cannot be reached, except in CI (CI=true), where it must
run.

The build runs offline (``--no-index --no-build-isolation``, so the
installed setuptools builds it) on a copy of what the build reads, so that
no scratch folder lands in the checkout; it skips, saying why, where
setuptools cannot build a wheel offline. The installed copy is then imported
from outside the checkout, where it must know it has no build tree.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
VERSION = (REPO / "VERSION").read_text().strip()


def _offline_build_or_skip():
    """Skips unless the installed setuptools can build a wheel offline."""
    try:
        import setuptools
    except ImportError as error:
        pytest.skip(f"setuptools is not installed ({error}): pip cannot "
                    "build the package offline")
    version = tuple(int(part) for part in
                    re.findall(r"\d+", setuptools.__version__)[:2])
    if version < (61, 0):
        pytest.skip(f"setuptools {setuptools.__version__} predates "
                    "pyproject.toml metadata (61)")
    if version < (70, 1):
        try:
            import wheel  # noqa: F401  (bdist_wheel before setuptools 70.1)
        except ImportError:
            pytest.skip(f"setuptools {setuptools.__version__} needs the "
                        "'wheel' package to build wheels, which is not "
                        "installed")


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory):
    """What the build reads: the root's pyproject.toml, setup.cfg and
    VERSION, and python/pattn (a build/ folder stands in for CMake's)."""
    _offline_build_or_skip()
    copy = tmp_path_factory.mktemp("source") / "pattn"
    copy.mkdir()
    for name in ("pyproject.toml", "setup.cfg", "VERSION"):
        shutil.copy2(REPO / name, copy / name)
    shutil.copytree(REPO / "python" / "pattn", copy / "python" / "pattn",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (copy / "build" / "bin").mkdir(parents=True)
    (copy / "build" / "bin" / "stands-in-for-cmake").write_text("")
    return copy


def _pip(*args, cwd):
    result = subprocess.run(
        [sys.executable, "-m", "pip", *args, "--no-index",
         "--no-build-isolation", "--no-deps", "--disable-pip-version-check",
         "--no-cache-dir"],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        check=False)
    assert result.returncode == 0, result.stdout[-4000:]


def archive_text(wheel, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(name).decode()


def test_the_wheel_holds_the_package_at_the_repository_version(source_copy,
                                                                tmp_path):
    _pip("wheel", "-w", str(tmp_path / "wheels"), ".", cwd=source_copy)
    [wheel] = list((tmp_path / "wheels").iterdir())
    assert wheel.name == f"pattn-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(f"pattn-{VERSION}.dist-info/METADATA").decode()
    modules = sorted(n for n in names if not n.startswith("pattn-"))
    package = REPO / "python" / "pattn"
    assert modules == sorted(
        p.relative_to(package.parent).as_posix()
        for p in package.glob("**/*.py"))
    assert f"Version: {VERSION}" in metadata
    assert "Provides-Extra: torch" in metadata
    # The importer's command.
    entry_points = archive_text(wheel, f"pattn-{VERSION}.dist-info/"
                                "entry_points.txt")
    assert "pattn-import-onnx = pattn.onnx:main" in entry_points
    # The build left CMake's build/ alone and its scratch in .build-python.
    assert sorted(os.listdir(source_copy / "build")) == ["bin"]
    assert (source_copy / ".build-python").is_dir()


INSTALLED_SCRIPT = """
import json, os, sys
import pattn
from pattn import _compiler
outcome = {"version": pattn.__version__, "file": pattn.__file__,
           "torch_imported": "torch" in sys.modules,
           "repo_compiler": _compiler._REPO_COMPILER}
try:
    outcome["found"] = pattn.find_compiler()
except pattn.CompileError as error:
    outcome["error"] = str(error)
print(json.dumps(outcome, default=str))
"""


def _run_installed(site, cwd, **env):
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("PATTN_COMPILE", "PYTHONPATH")}
    environment.update(PYTHONPATH=str(site), **env)
    result = subprocess.run([sys.executable, "-c", INSTALLED_SCRIPT],
                            cwd=cwd, env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    import json
    return json.loads(result.stdout)


def test_pip_install_target_imports_outside_the_checkout(source_copy,
                                                         tmp_path):
    site = tmp_path / "site"
    _pip("install", "--target", str(site), ".", cwd=source_copy)
    assert (site / "pattn" / "__init__.py").is_file()
    # pip writes the importer's command into the target's bin/.
    command = site / "bin" / "pattn-import-onnx"
    assert command.is_file() and os.access(command, os.X_OK)
    assert "pattn.onnx" in command.read_text()
    empty = tmp_path / "empty-path"
    empty.mkdir()
    outcome = _run_installed(site, tmp_path, PATH=str(empty))
    assert outcome["version"] == VERSION
    assert outcome["file"] == str(site / "pattn" / "__init__.py")
    assert not outcome["torch_imported"]
    # No checkout around it: no build tree to look in, and the error says
    # what to do.
    assert outcome["repo_compiler"] is None
    assert "this pattn is installed as a package" in outcome["error"]
    assert "set PATTN_COMPILE" in outcome["error"]
    # PATTN_COMPILE and PATH still find a compiler.
    compiler = tmp_path / "tools" / "pattn-compile"
    compiler.parent.mkdir()
    compiler.write_text("#!/bin/sh\nexit 0\n")
    compiler.chmod(0o755)
    assert _run_installed(site, tmp_path, PATH=str(empty),
                          PATTN_COMPILE=str(compiler))["found"] == \
        str(compiler)
    assert _run_installed(site, tmp_path, PATH=str(compiler.parent))[
        "found"] == str(compiler)
    missing = _run_installed(site, tmp_path, PATH=str(empty),
                             PATTN_COMPILE=str(tmp_path / "nope"))
    assert "PATTN_COMPILE names" in missing["error"]
    assert "which does not exist" in missing["error"]


def _clean_tree_copy(destination: pathlib.Path) -> pathlib.Path:
    """The files a fresh clone has (tracked, plus new files not ignored),
    copied from this checkout without its build trees and scratch."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if listed.returncode != 0:
        pytest.skip(f"git cannot list the tree: {listed.stderr.decode()[-300:]}")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


_OFFLINE_SIGNS = ("Could not find a version that satisfies the requirement "
                  "setuptools", "Failed to establish a new connection",
                  "Temporary failure in name resolution", "Network is "
                  "unreachable", "No matching distribution found for "
                  "setuptools")


def test_readme_pip_install_works_on_a_clean_tree(tmp_path):
    """`pip install .` as the README says it (build isolation, no flags)."""
    readme = (REPO / "README.md").read_text()
    assert "pip install ." in readme
    tree = _clean_tree_copy(tmp_path / "clone")
    assert not (tree / ".build-python").exists()
    assert not (tree / "build").exists()
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps",
         "--disable-pip-version-check", "--no-cache-dir", "--target",
         str(site), "."], cwd=tree, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, check=False)
    if result.returncode != 0 and any(sign in result.stdout
                                      for sign in _OFFLINE_SIGNS):
        if os.environ.get("CI") == "true":
            pytest.fail("CI must reach PyPI to test the README's pip "
                        "install:\n" + result.stdout[-3000:])
        pytest.skip("PyPI is unreachable: pip cannot fetch setuptools for "
                    "an isolated build")
    assert result.returncode == 0, result.stdout[-4000:]
    outcome = _run_installed(site, tmp_path)
    assert outcome["version"] == VERSION
    assert outcome["file"] == str(site / "pattn" / "__init__.py")
    # setuptools' scratch went to .build-python and python/, never into a
    # build/ that would be CMake's.
    assert not (tree / "build").exists()
