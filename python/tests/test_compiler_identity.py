"""Finding pattn-compile and keying the artifact cache on it (issue 9 §3).

* find_compiler: compiler=, then $PATTN_COMPILE, then this checkout's
  build/bin/pattn-compile, then PATH; a PATTN_COMPILE naming a missing,
  non-file or non-executable path is a clear error, and so is finding none
  (saying what to do, also where pattn is installed without a checkout).
* The cache key holds the compiler's identity, the SHA-256 of pattn-compile
  and of the libpattn_runtime.so in its ../lib, read from the files (never
  by running them) and memoized per file: another compiler is another entry,
  the same compiler (or a byte-identical copy elsewhere that cannot run, as
  on the GPU machine) is a hit that runs nothing.

The compilers here are test_loader.py's fake (a Python script that records
its command line and writes b"artifact"), copied and changed by a byte.
"""

import json
import os
import pathlib
import subprocess

import pytest

import pattn
from pattn import _compiler

import test_loader as base
from test_loader import fake_compiler  # noqa: F401  (fixture)

REPO = pathlib.Path(__file__).resolve().parents[2]
MLIR = base.MLIR


def _install(directory, compiler, runtime=b"runtime v1"):
    """A compiler tree like a build's: bin/pattn-compile (a copy of
    ``compiler``) and, unless runtime is None, lib/libpattn_runtime.so."""
    (directory / "bin").mkdir(parents=True)
    target = directory / "bin" / "pattn-compile"
    target.write_bytes(pathlib.Path(compiler).read_bytes())
    target.chmod(0o755)
    if runtime is not None:
        (directory / "lib").mkdir()
        (directory / "lib" / "libpattn_runtime.so").write_bytes(runtime)
    return target


# ---------------------------------------------------------------------------
# find_compiler
# ---------------------------------------------------------------------------


def test_this_checkout_is_recognized():
    assert _compiler._checkout_root() == REPO
    assert _compiler._REPO_COMPILER == REPO / "build" / "bin" / "pattn-compile"


def test_pattn_compile_wins(fake_compiler, tmp_path, monkeypatch):
    compiler, _ = fake_compiler
    repo = _install(tmp_path / "repo-build", compiler)
    on_path = _install(tmp_path / "on-path", compiler)
    monkeypatch.setattr(_compiler, "_REPO_COMPILER", repo)
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.setenv("PATTN_COMPILE", str(compiler))
    assert pattn.find_compiler() == str(compiler)
    assert pattn.find_compiler(on_path) == str(on_path), "compiler= first"
    monkeypatch.delenv("PATTN_COMPILE")
    assert pattn.find_compiler() == str(repo), "then the checkout's build"
    monkeypatch.setattr(_compiler, "_REPO_COMPILER",
                        tmp_path / "no-build" / "pattn-compile")
    assert pattn.find_compiler() == str(on_path), "then PATH"
    # A bare name in PATTN_COMPILE is looked up on PATH.
    monkeypatch.setenv("PATTN_COMPILE", "pattn-compile")
    assert pattn.find_compiler() == str(on_path)


@pytest.mark.parametrize("kind, message", [
    ("missing", r"PATTN_COMPILE names .*/missing/pattn-compile, which does "
     r"not exist: point it at a pattn-compile executable"),
    ("not_executable", r"PATTN_COMPILE names .*/pattn-compile, which is not "
     r"executable \(no execute permission\)"),
    ("directory", r"PATTN_COMPILE names .*/a-directory, which is not a file"),
])
def test_a_bad_pattn_compile_is_a_clear_error(fake_compiler, tmp_path,
                                              monkeypatch, kind, message):
    compiler, log = fake_compiler
    if kind == "missing":
        path = tmp_path / "missing" / "pattn-compile"
    elif kind == "directory":
        path = tmp_path / "a-directory"
        path.mkdir()
    else:
        path = _install(tmp_path / "plain", compiler)
        path.chmod(0o644)
        if os.access(path, os.X_OK):
            pytest.skip("this user may execute files without execute bits")
    monkeypatch.setenv("PATTN_COMPILE", str(path))
    with pytest.raises(pattn.CompileError, match=message):
        pattn.find_compiler()
    # compile() says the same, with or without an artifact cache, before
    # anything runs.
    with pytest.raises(pattn.CompileError, match=message):
        pattn.compile(MLIR, output=tmp_path / "out.so")
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(tmp_path / "cache"))
    with pytest.raises(pattn.CompileError, match=message):
        pattn.compile(MLIR)
    assert not log.exists()


def test_none_found_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("PATTN_COMPILE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(_compiler, "_REPO_COMPILER",
                        tmp_path / "no-build" / "pattn-compile")
    with pytest.raises(pattn.CompileError,
                       match=r"pattn-compile not found: pass compiler=, set "
                             r"PATTN_COMPILE, build this checkout \(.*no-build"
                             r"/pattn-compile: bash scripts/build.sh\) or put "
                             r"it on PATH"):
        pattn.find_compiler()
    # Installed without a checkout (a wheel): no build tree to suggest.
    monkeypatch.setattr(_compiler, "_REPO_COMPILER", None)
    with pytest.raises(pattn.CompileError,
                       match=r"pattn-compile not found: this pattn is "
                             r"installed as a package \(.*\), not run from a "
                             r"pattn checkout, so there is no build tree to "
                             r"look in; build pattn-compile from the pattn "
                             r"repository .* then set PATTN_COMPILE to it"):
        pattn.find_compiler()


# ---------------------------------------------------------------------------
# The compiler's identity in the cache key
# ---------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(directory))
    return directory


def test_another_compiler_is_another_entry(fake_compiler, tmp_path, cache):
    compiler, log = fake_compiler
    first = _install(tmp_path / "one", compiler)
    second = _install(tmp_path / "two", compiler)
    with open(second, "ab") as file:
        file.write(b"#\n")  # one more byte: another build
    a = pattn.compile(MLIR, chips="sm_90a", compiler=first)
    assert log.exists()
    log.unlink()
    b = pattn.compile(MLIR, chips="sm_90a", compiler=second)
    assert log.exists(), "the other compiler compiled its own entry"
    assert a != b and os.path.dirname(a) == os.path.dirname(b) == str(cache)
    # Each compiler gets its own entry back without running.
    log.unlink()
    assert pattn.compile(MLIR, chips="sm_90a", compiler=first) == a
    assert pattn.compile(MLIR, chips="sm_90a", compiler=second) == b
    assert not log.exists()


def test_another_runtime_is_another_entry(fake_compiler, tmp_path, cache):
    compiler, log = fake_compiler
    v1 = _install(tmp_path / "v1", compiler, runtime=b"runtime v1")
    v2 = _install(tmp_path / "v2", compiler, runtime=b"runtime v2")
    none = _install(tmp_path / "none", compiler, runtime=None)
    entries = {pattn.compile(MLIR, chips="sm_90a", compiler=path)
               for path in (v1, v2, none)}
    assert len(entries) == 3
    # The runtime beside the entries is the compiler's.
    assert (cache / "libpattn_runtime.so").read_bytes() == b"runtime v1"


def test_a_copy_that_cannot_run_finds_the_entries(fake_compiler, tmp_path,
                                                  cache, monkeypatch):
    """The GPU machine: scripts/gpu-prepare.sh copies bin/pattn-compile and
    lib/libpattn_runtime.so into .gpu-artifacts/compiler/; there the
    compiler cannot run (no libMLIR), and need not."""
    compiler, log = fake_compiler
    build = _install(tmp_path / "build", compiler)
    entries = [pattn.compile(MLIR, chips=chips, compiler=build)
               for chips in ("sm_90a", "sm_80,sm_90a")]
    log.unlink()
    carried = tmp_path / "gpu-machine" / ".gpu-artifacts" / "compiler"
    (carried / "bin").mkdir(parents=True)
    (carried / "lib").mkdir()
    for part in ("bin/pattn-compile", "lib/libpattn_runtime.so"):
        (carried / part).write_bytes((tmp_path / "build" / part).read_bytes())
    (carried / "bin" / "pattn-compile").chmod(0o755)
    monkeypatch.setenv("PATTN_COMPILE", str(carried / "bin" / "pattn-compile"))
    monkeypatch.setenv("FAKE_COMPILER_MODE", "broken")
    assert [pattn.compile(MLIR, chips=chips)
            for chips in ("sm_90a", "sm_80,sm_90a")] == entries
    assert not log.exists()
    # Another source is a miss, and the error says which compiler the key
    # was computed for, and why building failed.
    with pytest.raises(pattn.CompileError,
                       match=r"(?s)has no entry \w+\.so for this source, these "
                             r"options and this compiler \(.*gpu-machine.*"
                             r"pattn-compile, sha256 [0-9a-f]{16}\.\.\.\), "
                             r"and building it failed: pattn-compile failed "
                             r"\(exit status 127\).*libMLIR"):
        pattn.compile(MLIR + "\n", chips="sm_90a")


def test_a_symlinked_compiler_keys_with_its_real_runtime(fake_compiler,
                                                         tmp_path, cache):
    compiler, log = fake_compiler
    build = _install(tmp_path / "build", compiler)
    link = tmp_path / "elsewhere" / "bin" / "pattn-compile"
    link.parent.mkdir(parents=True)
    link.symlink_to(build)
    assert _compiler._runtime_of(str(link)) == str(
        tmp_path / "build" / "lib" / "libpattn_runtime.so")
    entry = pattn.compile(MLIR, chips="sm_90a", compiler=build)
    log.unlink()
    assert pattn.compile(MLIR, chips="sm_90a", compiler=link) == entry
    assert not log.exists()


def test_identity_is_memoized_per_file(fake_compiler, tmp_path, cache,
                                       monkeypatch):
    compiler, log = fake_compiler
    build = _install(tmp_path / "build", compiler)
    reads = []
    real_read = _compiler._read_file_facts

    def counting(path):
        reads.append(os.path.basename(path))
        return real_read(path)

    monkeypatch.setattr(_compiler, "_read_file_facts", counting)
    monkeypatch.setattr(_compiler, "_FILE_FACTS", {})
    first = pattn.compile(MLIR, chips="sm_90a", compiler=build)
    for chips in ("sm_90a", "sm_80", "sm_86"):
        pattn.compile(MLIR, chips=chips, compiler=build)
    assert sorted(reads) == ["libpattn_runtime.so", "pattn-compile"], \
        "each file read once"
    # A rebuilt compiler (new bytes, size and mtime) is read again, and its
    # key is another.
    data = build.read_bytes() + b"# rebuilt\n"
    build.write_bytes(data)
    os.utime(build, ns=(build.stat().st_atime_ns,
                        build.stat().st_mtime_ns + 10**9))
    second = pattn.compile(MLIR, chips="sm_90a", compiler=build)
    assert reads.count("pattn-compile") == 2 and second != first


def test_every_entry_has_a_record_for_people(fake_compiler, tmp_path, cache):
    compiler, _ = fake_compiler
    build = _install(tmp_path / "build", compiler)
    entry = pattn.compile(MLIR, chips="sm_80,sm_90a", compiler=build,
                          backend="portable", hardware_conversions=False)
    record = json.loads(pathlib.Path(entry[:-3] + ".json").read_text())
    identity = _compiler._compiler_identity(str(build))
    assert record["artifact"] == os.path.basename(entry)
    assert record["chips"] == ["sm_80", "sm_90a"]
    assert record["options"] == ["--backend=portable", "--fold=true",
                                 "--hardware-conversions=false",
                                 "--prompt-kernel=prefill"]
    assert record["compiler"] == str(build)
    assert record["compiler_sha256"] == identity.compiler_facts.sha256
    assert record["runtime_sha256"] == identity.runtime_facts.sha256
    assert record["pattn_version"] is None, "a script holds no version"
    assert record["python_package_version"] == pattn.__version__
    assert len(record["source_sha256"]) == 64


def test_the_real_compiler_records_its_version_and_commit(tmp_path, cache):
    try:
        compiler = pattn.find_compiler()
    except pattn.CompileError as error:
        pytest.skip(f"needs pattn-compile: {error}")
    shown = subprocess.run([compiler, "--version"], capture_output=True,
                           text=True, check=True).stdout
    facts = _compiler._compiler_identity(compiler).compiler_facts
    assert f"pattn {facts.version} (commit {facts.commit})" in shown
    assert facts.version == pattn.__version__
    entry = pattn.compile(REPO / "examples" / "decode_int4.mlir",
                          chips="sm_90a", compiler=compiler)
    record = json.loads(pathlib.Path(entry[:-3] + ".json").read_text())
    assert (record["pattn_version"], record["pattn_commit"]) == (
        facts.version, facts.commit)
    assert record["source_path"] == str(REPO / "examples" /
                                        "decode_int4.mlir")
    runtime = _compiler._runtime_of(compiler)
    assert os.path.isfile(runtime), "a build's runtime is in its ../lib"
    assert record["runtime_sha256"] == pattn._loader.file_sha256(runtime)


def test_gpu_scripts_carry_and_use_the_compiler():
    """gpu-prepare.sh puts the compiler's two files in
    .gpu-artifacts/compiler/, and gpu-run.sh points PATTN_COMPILE at them,
    so the keys computed on the GPU machine are the build machine's."""
    prepare = (REPO / "scripts" / "gpu-prepare.sh").read_text()
    run = (REPO / "scripts" / "gpu-run.sh").read_text()
    assert "compiler/bin" in prepare and "compiler/lib" in prepare
    assert "libpattn_runtime.so" in prepare
    assert 'PATTN_COMPILE="$PATTN_ARTIFACT_DIR/compiler/bin/pattn-compile"' \
        in run
    for script in ("gpu-prepare.sh", "gpu-run.sh"):
        subprocess.run(["bash", "-n", str(REPO / "scripts" / script)],
                       check=True)
