"""Bad input to pattn's Python package (issue 8, "Runtime and Python").

Three rules, each with its tests:

1. A file is validated before ctypes maps it (size, ELF header and tables
   against the file and the host, its checksum, the libraries it needs), so
   a truncated library is a LoadError, not a SIGBUS; the artifact cache keeps
   a checksum beside every entry and rebuilds (reporting once) an entry that
   does not match it.
2. Every misuse raises one of pattn's errors naming the argument, never a
   bare TypeError/AttributeError/RecursionError, and sizes, pointers and
   stream handles that ctypes would silently wrap are rejected.
3. Entry points live in a namespace that the module's attributes cannot hide.

Everything runs without a GPU: stand-in artifacts are built with the C
compiler (as in test_loader.py); tests that need pattn-compile (a real
artifact of examples/decode_int4.mlir) skip, saying so, without it. Loads of
files that could crash the interpreter run in a child process, so that a
regression fails one test instead of killing the run.
"""

import hashlib
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import warnings

import pytest

import pattn
from pattn import _compiler, _loader

import test_loader as base
from test_loader import FakeDevice, FakeTensor, Probe, STREAM
# Fixtures shared with the loader tests.
from test_loader import (artifact_path, builder, fake_compiler,  # noqa: F401
                         module, probe)  # (fixtures)

REPO = pathlib.Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO / "python"




LOAD_SCRIPT = """
import json, sys
sys.path.insert(0, {python_dir!r})
import pattn
outcomes = []
for path in json.loads(sys.argv[1]):
    try:
        pattn.load(path)
        outcomes.append(["loaded", ""])
    except pattn.LoadError as error:
        outcomes.append(["LoadError", str(error)])
print(json.dumps(outcomes))
"""


def load_in_child(paths):
    """Loads each path in a child process; returns [(outcome, message)].
    Fails (instead of crashing the run) if the child dies, e.g. of SIGBUS."""
    result = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT.format(python_dir=str(PYTHON_DIR)),
         json.dumps([str(p) for p in paths])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        check=False)
    assert result.returncode == 0, (
        f"loading {len(paths)} files killed the interpreter (exit status "
        f"{result.returncode}; -7 is SIGBUS):\n{result.stderr[-2000:]}")
    return [tuple(outcome) for outcome in json.loads(result.stdout)]


def truncated_copies(path, directory, sizes=None):
    data = pathlib.Path(path).read_bytes()
    if sizes is None:
        sizes = sorted({0, 1, 15, 16, 40, 63, 64, 120, 1000, 4096,
                        len(data) // 3, len(data) // 2, len(data) - 4096,
                        len(data) - 100, len(data) - 1})
    copies = []
    for size in sizes:
        if 0 <= size < len(data):
            copy = pathlib.Path(directory) / f"truncated-{size}.so"
            copy.write_bytes(data[:size])
            copies.append(copy)
    return copies


def real_compiler():
    """pattn-compile ($PATTN_COMPILE, this checkout's build, or PATH)."""
    try:
        return pattn.find_compiler()
    except pattn.CompileError as error:
        pytest.skip(f"needs pattn-compile for a real artifact: {error}")


# ---------------------------------------------------------------------------
# Rule 1: validation before ctypes maps a file; checksummed cache entries
# ---------------------------------------------------------------------------


def test_truncated_artifact_is_a_load_error_not_a_crash(artifact_path,
                                                        tmp_path):
    # Without the checks, ctypes.CDLL of most of these dies of SIGBUS: the
    # dynamic loader maps segments past the end of the file.
    copies = truncated_copies(artifact_path, tmp_path)
    outcomes = load_in_child(copies)
    for copy, (outcome, message) in zip(copies, outcomes):
        assert outcome == "LoadError", (copy, message)
        assert message.startswith(f"cannot load {copy}: the file "), message
    assert any("truncated or corrupt" in m for _, m in outcomes)
    assert any("too short for an ELF header" in m for _, m in outcomes)
    # The whole file still loads.
    assert load_in_child([artifact_path]) == [("loaded", "")]


def test_truncated_compiled_artifact_is_a_load_error(tmp_path):
    compiler = real_compiler()
    artifact = pattn.compile(REPO / "examples" / "decode_int4.mlir",
                             chips="sm_90a", output=tmp_path / "decode.so",
                             compiler=compiler)
    copies = truncated_copies(artifact, tmp_path)
    for copy, (outcome, message) in zip(copies, load_in_child(copies)):
        assert outcome == "LoadError", (copy, message)
    assert load_in_child([artifact]) == [("loaded", "")]


def _header(data):
    """The fields of a 64-bit little-endian ELF header, by name."""
    names = ("e_type e_machine e_version e_entry e_phoff e_shoff e_flags "
             "e_ehsize e_phentsize e_phnum e_shentsize e_shnum "
             "e_shstrndx").split()
    return dict(zip(names, struct.unpack_from("<HHIQQQIHHHHHH", data, 16)))


def _patched(data, **fields):
    """``data`` with ELF header fields replaced (by name, or ident bytes
    as ei_<offset>=value)."""
    data = bytearray(data)
    header = _header(data)
    for name, value in fields.items():
        if name.startswith("ei_"):
            data[int(name[3:])] = value
        else:
            header[name] = value
    struct.pack_into("<HHIQQQIHHHHHH", data, 16, *header.values())
    return bytes(data)


def _first_load_segment(data):
    header = _header(data)
    for index in range(header["e_phnum"]):
        offset = header["e_phoff"] + index * header["e_phentsize"]
        if struct.unpack_from("<I", data, offset)[0] == 1:  # PT_LOAD
            return offset
    raise AssertionError("no PT_LOAD")


def _other_machine():
    host = _loader._host_elf()[2]
    return 183 if host == 62 else 62


def _header_cases(data):
    size = len(data)
    header = _header(data)
    load = _first_load_segment(data)
    past_end = bytearray(data)
    struct.pack_into("<Q", past_end, load + 32, size + 1)  # p_filesz
    section_size = bytearray(data)
    # The last section's sh_size, past the end of the file.
    last = header["e_shoff"] + (header["e_shnum"] - 1) * header["e_shentsize"]
    struct.pack_into("<Q", section_size, last + 32, size)
    return [
        ("not_elf", b"\x7fELG" + data[4:], "not an ELF file"),
        ("short", data[:15], "too short for an ELF header"),
        ("32_bit", _patched(data, ei_4=1), "is a 32-bit ELF file; this "
         "Python is 64-bit"),
        ("bad_class", _patched(data, ei_4=7), "invalid ELF class 7"),
        ("big_endian", _patched(data, ei_5=2), "big-endian"),
        ("ident_version", _patched(data, ei_6=0), "ELF version 0"),
        ("executable_type", _patched(data, e_type=2), "not a shared object"),
        ("other_machine", _patched(data, e_machine=_other_machine()),
         "is built for"),
        ("header_size", _patched(data, e_ehsize=40), "ELF header of 40 bytes"),
        ("no_program_headers", _patched(data, e_phnum=0),
         "no program headers"),
        ("program_headers_past_end", _patched(data, e_phoff=size - 8),
         "its program header table at bytes"),
        ("program_header_size", _patched(data, e_phentsize=32),
         "program headers of 32 bytes"),
        ("section_headers_past_end", _patched(data, e_shoff=size - 64),
         "its section header table at bytes"),
        ("section_header_size", _patched(data, e_shentsize=40),
         "section headers of 40 bytes"),
        ("many_sections", _patched(data, e_shnum=0xFFFF),
         "its section header table at bytes"),
        ("segment_past_end", bytes(past_end), "has segment"),
        ("section_past_end", bytes(section_size), "has section"),
    ]


def test_elf_header_is_checked_before_mapping(artifact_path, tmp_path):
    data = pathlib.Path(artifact_path).read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, \
        "these cases patch a 64-bit little-endian library"
    cases = _header_cases(data)
    paths = []
    for name, content, _ in cases:
        path = tmp_path / f"{name}.so"
        path.write_bytes(content)
        paths.append(path)
        # The check alone, in this process: it maps nothing.
        with pytest.raises(pattn.LoadError):
            pattn.validate_artifact(path)
    for (name, _, message), path, (outcome, text) in zip(
            cases, paths, load_in_child(paths)):
        assert outcome == "LoadError", name
        assert message in text, (name, text)
    # A directory, an empty file, a missing file.
    (tmp_path / "empty.so").write_bytes(b"")
    for path, message in [(tmp_path, "is not a regular file"),
                          (tmp_path / "empty.so", "is 0 bytes long"),
                          (tmp_path / "missing.so", "cannot be read")]:
        with pytest.raises(pattn.LoadError, match=message):
            pattn.load(path)


def test_checksum_beside_an_artifact_is_checked(artifact_path, tmp_path):
    copy = tmp_path / "artifact.so"
    shutil.copy2(artifact_path, copy)
    # Flip one byte inside a section: the ELF checks cannot see it.
    data = bytearray(copy.read_bytes())
    digest = hashlib.sha256(bytes(data)).hexdigest()
    (tmp_path / "artifact.so.sha256").write_text(f"{digest}  artifact.so\n")
    pattn.load(copy)  # matches
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "flipped.so"
    bad.write_bytes(bytes(data))
    (tmp_path / "flipped.so.sha256").write_text(f"{digest}  flipped.so\n")
    with pytest.raises(pattn.LoadError, match="does not match its checksum"):
        pattn.load(bad)
    (tmp_path / "flipped.so.sha256").write_text("not a digest\n")
    with pytest.raises(pattn.LoadError, match="malformed checksum file"):
        pattn.load(bad)


def test_truncated_dependency_is_a_load_error(builder, tmp_path):
    # An artifact beside a truncated copy of the runtime it needs (the
    # artifact cache's layout): the runtime is mapped first, so it is
    # checked too.
    directory = tmp_path / "moved"
    directory.mkdir()
    artifact = directory / "artifact.so"
    shutil.copy2(builder.build("dependency", json.dumps(base.MANIFEST)),
                 artifact)
    runtime = builder.directory / "libpattn_fake_runtime.so"
    data = runtime.read_bytes()
    (directory / runtime.name).write_bytes(data[:len(data) // 2])
    env_paths = f"{directory}:{os.environ.get('LD_LIBRARY_PATH', '')}"
    result = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT.format(python_dir=str(PYTHON_DIR)),
         json.dumps([str(artifact)])],
        env=dict(os.environ, LD_LIBRARY_PATH=env_paths),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    [(outcome, message)] = json.loads(result.stdout)
    assert outcome == "LoadError"
    assert f"the library it needs, {directory / runtime.name}," in message
    assert "truncated or corrupt" in message


def _cache_entry(cache, compiler,
                 variant="sm_90a --backend=auto --fold=true "
                 "--prompt-kernel=prefill"):
    """Where the entry of base.MLIR lies: keyed on the compiler's identity
    (its files' hashes), the chips and options, and the source."""
    identity = _compiler._compiler_identity(str(compiler)).key_text()
    key = hashlib.sha256(
        f"{identity}\n{variant}\n{base.MLIR}".encode()).hexdigest()[:24]
    return cache / f"{key}.so"


def test_artifact_cache_entries_carry_checksums(fake_compiler, tmp_path,
                                                monkeypatch):
    compiler, log = fake_compiler
    cache = tmp_path / "cache"
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(cache))
    entry = pattn.compile(base.MLIR, chips="sm_90a", compiler=compiler)
    assert entry == str(_cache_entry(cache, compiler))
    # The compiler wrote a temporary file in the cache, renamed into place.
    written = json.loads(log.read_text())[3]
    assert os.path.dirname(written) == str(cache) and written != entry
    digest = hashlib.sha256(b"artifact").hexdigest()
    assert pathlib.Path(entry + ".sha256").read_text() == \
        f"{digest}  {os.path.basename(entry)}\n"
    # Nothing else is left behind but the entry's lock and its record.
    assert sorted(os.listdir(cache)) == sorted([
        os.path.basename(entry), os.path.basename(entry) + ".sha256",
        os.path.basename(entry)[:-3] + ".lock",
        os.path.basename(entry)[:-3] + ".json"])


@pytest.mark.parametrize("corruption", ["truncated", "flipped", "emptied",
                                        "checksum_garbled"])
def test_corrupt_cache_entry_is_rebuilt_and_reported_once(
        fake_compiler, tmp_path, monkeypatch, corruption):
    compiler, log = fake_compiler
    cache = tmp_path / "cache"
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(cache))
    entry = pathlib.Path(pattn.compile(base.MLIR, chips="sm_90a",
                                       compiler=compiler))
    if corruption == "truncated":
        entry.write_bytes(b"artif")
    elif corruption == "flipped":
        entry.write_bytes(b"artifacT")
    elif corruption == "emptied":
        entry.write_bytes(b"")
    else:
        pathlib.Path(str(entry) + ".sha256").write_text("00\n")
    log.unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = pattn.compile(base.MLIR, chips="sm_90a", compiler=compiler)
        assert again == str(entry)
        assert entry.read_bytes() == b"artifact", "rebuilt, not served"
        assert log.exists(), "the compiler ran again"
        log.unlink()
        pattn.compile(base.MLIR, chips="sm_90a", compiler=compiler)
        assert not log.exists(), "the rebuilt entry is served"
    reports = [w for w in caught if issubclass(w.category, pattn.CacheWarning)]
    assert len(reports) == 1, [str(w.message) for w in caught]
    assert str(entry) in str(reports[0].message)
    assert "rebuilding it" in str(reports[0].message)


def test_corrupt_cache_entry_without_a_compiler_is_never_served(
        fake_compiler, tmp_path, monkeypatch):
    """Where the compiler's files are missing, no entry can be looked up;
    where they are there but cannot run (a GPU machine), a corrupt entry is
    reported once and the failed rebuild is an error: never served."""
    compiler, log = fake_compiler
    cache = tmp_path / "cache"
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(cache))
    entry = pathlib.Path(pattn.compile(base.MLIR, chips="sm_90a",
                                       compiler=compiler))
    entry.write_bytes(b"arti")
    log.unlink()
    monkeypatch.setattr(_compiler, "_REPO_COMPILER",
                        tmp_path / "no-build" / "pattn-compile")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(pattn.CompileError,
                           match=r"pattn-compile not found.*The artifact cache "
                                 r"\(\$PATTN_ARTIFACT_DIR\) keys its entries "
                                 r"on the compiler's files .* set "
                                 r"PATTN_COMPILE to the copy of the compiler "
                                 r"that filled the cache"):
            pattn.compile(base.MLIR, chips="sm_90a")
        monkeypatch.setenv("PATTN_COMPILE", str(compiler))
        monkeypatch.setenv("FAKE_COMPILER_MODE", "broken")
        for _ in range(2):
            with pytest.raises(pattn.CompileError,
                               match=r"(?s)artifact cache entry .* does not "
                                     r"match "
                                     r"its checksum.*, and rebuilding it with "
                                     r".*pattn-compile failed: pattn-compile "
                                     r"failed \(exit status 127\).*libMLIR"):
                pattn.compile(base.MLIR, chips="sm_90a")
    assert entry.read_bytes() == b"arti" and not log.exists()
    reports = [w for w in caught if issubclass(w.category, pattn.CacheWarning)]
    assert len(reports) == 1, [str(w.message) for w in reports]
    assert "rebuilding it" in str(reports[0].message)


def test_cache_entry_without_checksum_is_checked_then_adopted(
        fake_compiler, artifact_path, tmp_path, monkeypatch):
    """Entries of an older pattn have no checksum: one that passes the ELF
    checks is served (and given a checksum); one that does not is rebuilt."""
    compiler, log = fake_compiler
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(cache))
    entry = _cache_entry(cache, compiler)
    shutil.copy2(artifact_path, entry)
    assert pattn.compile(base.MLIR, chips="sm_90a",
                         compiler=compiler) == str(entry)
    assert not log.exists(), "served without compiling"
    assert (pathlib.Path(str(entry) + ".sha256").read_text().split()[0] ==
            hashlib.sha256(entry.read_bytes()).hexdigest())

    legacy = _cache_entry(cache, compiler, "sm_80 --backend=auto --fold=true "
                           "--prompt-kernel=prefill")
    legacy.write_bytes(entry.read_bytes()[:3000])  # truncated, no checksum
    with pytest.warns(pattn.CacheWarning, match="has no checksum and has"):
        assert pattn.compile(base.MLIR, chips="sm_80",
                             compiler=compiler) == str(legacy)
    assert legacy.read_bytes() == b"artifact" and log.exists()


def test_truncated_compiled_cache_entry_is_rebuilt(tmp_path, monkeypatch):
    compiler = real_compiler()
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(tmp_path / "cache"))
    source = REPO / "examples" / "decode_int4.mlir"
    entry = pattn.compile(source, chips="sm_90a", compiler=compiler)
    good = pathlib.Path(entry).read_bytes()
    pathlib.Path(entry).write_bytes(good[:len(good) // 2])
    with pytest.warns(pattn.CacheWarning, match="truncated or corrupt"):
        assert pattn.compile(source, chips="sm_90a",
                             compiler=compiler) == entry
    assert pathlib.Path(entry).read_bytes() == good
    assert load_in_child([entry]) == [("loaded", "")]


# ---------------------------------------------------------------------------
# Rule 2: misuse raises pattn's errors, naming the argument
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("call, message", [
    (lambda: pattn.load(None), r"argument 'path' must be a str, bytes or "
     r"os.PathLike naming an artifact, got NoneType"),
    (lambda: pattn.load(3), r"argument 'path' .* got int"),
    (lambda: pattn.load(True), r"argument 'path' .* got bool"),
    (lambda: pattn.load(["a.so"]), r"argument 'path' .* got list"),
    (lambda: pattn.load(), r"pattn.load: missing a required argument: 'path'"),
    (lambda: pattn.load("a.so", "b.so"), r"pattn.load: too many positional"),
    (lambda: pattn.load(file="a.so"), r"pattn.load: .*'file'"),
    (lambda: pattn.load("a\0.so"), r"argument 'path' .*NUL|not a usable "
     r"path"),
])
def test_load_misuse_raises_pattn_errors(call, message):
    with pytest.raises(pattn.LoadError, match=message) as caught:
        call()
    error = caught.value
    assert isinstance(error, pattn.ArgumentTypeError)
    assert isinstance(error, TypeError) and isinstance(error, pattn.Error)


@pytest.mark.parametrize("kwargs, message, type_error", [
    ({"chips": [80]}, r"argument 'chips' must hold chip names \(str\) such "
     r"as 'sm_90a', but chips\[0\] is int 80", True),
    ({"chips": ["sm_80", None]}, r"chips\[1\] is NoneType", True),
    ({"chips": 80}, r"argument 'chips' must be a chip name.* got int", True),
    ({"chips": []}, r"argument 'chips' is empty", False),
    ({"chips": ""}, r"argument 'chips' is empty", False),
    ({"chips": "sm_80,,sm_90a"}, r"empty or malformed chip name ''", False),
    ({"source": None}, r"argument 'source' must be MLIR text \(str\) or the "
     r"path of a .mlir file .* got NoneType", True),
    ({"source": b"func.func"}, r"argument 'source' .* got bytes", True),
    ({"output": 5}, r"argument 'output' must be a str or os.PathLike, got "
     r"int", True),
    ({"output": ""}, r"argument 'output' must be a non-empty path", False),
    ({"compiler": 5}, r"argument 'compiler' must be a str or os.PathLike",
     True),
    ({"fold": "false"}, r"argument 'fold' must be True or False, got str",
     True),
    ({"hardware_conversions": None}, r"argument 'hardware_conversions' must "
     r"be True or False", True),
    ({"backend": 3}, r"unknown backend 3; expected one of auto, xqa, "
     r"portable", False),
    ({"chip": "sm_80"}, r"pattn.compile: got an unexpected keyword argument "
     r"'chip'", True),
])
def test_compile_misuse_raises_pattn_errors(fake_compiler, tmp_path,
                                            monkeypatch, kwargs, message,
                                            type_error):
    compiler, log = fake_compiler
    cache = tmp_path / "cache"
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(cache))
    arguments = {"source": base.MLIR, "compiler": compiler, **kwargs}
    with pytest.raises(pattn.CompileError, match=message) as caught:
        pattn.compile(**arguments)
    error = caught.value
    assert isinstance(error, pattn.ArgumentError)  # also a ValueError
    assert isinstance(error, TypeError) == type_error
    assert not log.exists() and not cache.exists(), "nothing ran"


def test_compile_with_a_missing_file_and_a_cache(fake_compiler, tmp_path,
                                                 monkeypatch):
    compiler, _ = fake_compiler
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(tmp_path / "cache"))
    with pytest.raises(pattn.CompileError, match="no such MLIR file"):
        pattn.compile(str(tmp_path / "missing.mlir"), compiler=compiler)
    with pytest.raises(pattn.CompileError, match="no such MLIR file"):
        pattn.compile(tmp_path / "missing.mlir", compiler=compiler)


def test_find_compiler_misuse(monkeypatch):
    with pytest.raises(pattn.ArgumentTypeError, match="argument 'compiler'"):
        pattn.find_compiler(5)
    with pytest.raises(pattn.CompileError, match="unexpected keyword"):
        pattn.find_compiler(path="x")


def cache_tensor(shape=(3, 16, 8, 64), pointer=0x1000, **kwargs):
    return FakeTensor(shape, "torch.int8", pointer, **kwargs)


def lens_tensor(shape=(5,), pointer=0x2000, **kwargs):
    return FakeTensor(shape, "torch.int32", pointer, **kwargs)


class BrokenTensor(FakeTensor):
    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that "
                           "doesn't have storage")


class Handle:
    def __init__(self, cuda_stream, device=FakeDevice("cuda", 0)):
        self.cuda_stream = cuda_stream
        self.device = device


@pytest.mark.parametrize("args, kwargs, message, type_error", [
    ((cache_tensor(), lens_tensor()), {"stream": STREAM, "streams": 1},
     r"decode_step\(\) got an unexpected keyword argument 'streams': its "
     r"arguments are cache, seq_lens \(by position or by name\), and "
     r"stream= is the CUDA stream", True),
    ((), {"cache": cache_tensor(), "lens": lens_tensor(), "Cache": 1,
          "stream": STREAM},
     r"unexpected keyword arguments 'lens', 'Cache'", True),
    ((cache_tensor(),), {"cache": cache_tensor(), "seq_lens": lens_tensor(),
                         "stream": STREAM},
     r"decode_step\(\) got multiple values for argument 'cache': argument "
     r"0 by position and 'cache=' by name", True),
    ((), {"seq_lens": lens_tensor(), "stream": STREAM},
     r"decode_step\(\) missing 1 required argument: 'cache' \(it takes "
     r"cache, seq_lens\)", True),
    ((), {"stream": STREAM},
     r"decode_step\(\) takes 2 arguments \(cache, seq_lens\), got 0", True),
    ((cache_tensor(), lens_tensor(), lens_tensor()), {"seq_lens": 1},
     r"takes 2 arguments \(cache, seq_lens\), got 3 by position", True),
    ((), {"seq_lens": FakeTensor((5,), "torch.int64", 0x2000),
          "cache": cache_tensor(), "stream": STREAM},
     r"decode_step: argument 'seq_lens' must have dtype i32", False),
    ((cache_tensor(),), {"stream": STREAM},
     r"decode_step\(\) takes 2 arguments \(cache, seq_lens\), got 1", True),
    ((cache_tensor(), lens_tensor(), lens_tensor()), {"stream": STREAM},
     r"takes 2 arguments .*got 3", True),
    ((cache_tensor(shape=(-1, 16, 8, 64)), lens_tensor()), {"stream": STREAM},
     r"dimension 0 of argument 'cache' is -1, outside \[0, 2\^63\)", False),
    ((cache_tensor(), lens_tensor(shape=(1 << 63,))), {"stream": STREAM},
     r"dimension 0 of argument 'seq_lens' is 9223372036854775808, outside "
     r"\[0, 2\^63\)", False),
    ((cache_tensor(), lens_tensor(shape=((1 << 64) + 5,))),
     {"stream": STREAM}, r"outside \[0, 2\^63\)", False),
    ((cache_tensor(shape=(1 << 55, 16, 8, 64)), lens_tensor()),
     {"stream": STREAM}, r"argument 'cache' of shape \[36028797018963968, "
     r"16, 8, 64\] is too large", False),
    ((cache_tensor(), lens_tensor(shape=(5.0,))), {"stream": STREAM},
     r"argument 'seq_lens' must have integer sizes", True),
    ((cache_tensor(pointer=1 << 64), lens_tensor()), {"stream": STREAM},
     r"argument 'cache' has data pointer 0x10000000000000000, outside "
     r"\[0, 2\^64\)", False),
    ((cache_tensor(), lens_tensor(pointer=-8)), {"stream": STREAM},
     r"argument 'seq_lens' has data pointer -0x8, outside \[0, 2\^64\)",
     False),
    ((cache_tensor(), BrokenTensor((5,), "torch.int32", 0)),
     {"stream": STREAM}, r"argument 'seq_lens' must be a tensor with .*"
     r"RuntimeError: Cannot access data pointer", True),
    ((cache_tensor(), lens_tensor()), {"stream": -1},
     r"stream handle -1 is outside \[0, 2\^64\)", False),
    ((cache_tensor(), lens_tensor()), {"stream": 1 << 64},
     r"stream handle 18446744073709551616 is outside", False),
    ((cache_tensor(), lens_tensor()), {"stream": Handle(-5)},
     r"stream handle -5 is outside", False),
    ((cache_tensor(), lens_tensor()), {"stream": True},
     r"stream must be an int handle or have a 'cuda_stream' attribute, got "
     r"bool", True),
    ((cache_tensor(), lens_tensor()), {"stream": 1.5},
     r"stream must be an int handle", True),
    ((cache_tensor(), lens_tensor()), {"stream": Handle(1, device="cuda")},
     r"stream must be an int handle or have a 'cuda_stream' attribute; "
     r"reading Handle failed", True),
])
def test_call_misuse_never_reaches_the_function(module, probe, args, kwargs,
                                                message, type_error):
    before = probe.calls
    with pytest.raises(pattn.ArgumentError, match=message) as caught:
        module.decode_step(*args, **kwargs)
    error = caught.value
    assert isinstance(error, pattn.Error) and isinstance(error, ValueError)
    assert isinstance(error, TypeError) == type_error
    assert probe.calls == before, "nothing was launched"


def test_largest_valid_values_still_pass(module, probe):
    # The limits are exact: the largest pointer and stream handle reach the
    # function unchanged, as do empty tensors.
    top = (1 << 64) - 1
    module.decode_step(cache_tensor(pointer=top), lens_tensor(pointer=top),
                       stream=top)
    signed = top - (1 << 64)  # what an int64 slot holds
    assert probe.received[0] == signed and probe.received[-1] == signed
    module.decode_step(cache_tensor(shape=(0, 16, 8, 64), pointer=0),
                       lens_tensor(shape=(0,), pointer=0), stream=0)
    assert probe.received[3] == 0 and probe.received[-1] == 0


def _nested(depth):
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("name, manifest, message", [
    ("deep_functions", '{"version": 1, "functions": ' + _nested(100000) + "}",
     r"nested too deeply"),
    ("deep_entry", '{"version": 1, "functions": [' + _nested(600) + "]}",
     r"function entry \[\[\[.*needs a name, a symbol and args"),
    ("deep_arg", json.dumps({"version": 1, "functions": [
        {"name": "f", "symbol": "decode_step",
         "args": [{"name": "x", "dtype": "i8", "shape": []}]}]}).replace(
             '"shape": []', '"shape": ' + _nested(600)),
     r"argument .* of 'f' needs a name and a shape of sizes"),
    ("deep_dtype", json.dumps({"version": 1, "functions": [
        {"name": "f", "symbol": "decode_step",
         "args": [{"name": "x", "dtype": [], "shape": [1]}]}]}).replace(
             '"dtype": []', '"dtype": ' + _nested(600)),
     r"argument 'x' of 'f' has dtype \[\[\[.*; supported"),
    ("bool_dim", json.dumps({"version": 1, "functions": [
        {"name": "f", "symbol": "decode_step",
         "args": [{"name": "x", "dtype": "i8", "shape": [True]}]}]}),
     r"needs a name and a shape of sizes below 2\^63"),
    ("huge_dim", json.dumps({"version": 1, "functions": [
        {"name": "f", "symbol": "decode_step",
         "args": [{"name": "x", "dtype": "i8", "shape": [1 << 63]}]}]}),
     r"needs a name and a shape of sizes below 2\^63"),
    ("bool_version", json.dumps({"version": True, "functions": []}),
     r"version True is not supported"),
    ("huge_number", '{"version": 1' + "0" * 5000 + ', "functions": []}',
     r"bad manifest"),
    ("functions_object", json.dumps({"version": 1, "functions": {}}),
     r"'functions' must be a list"),
])
def test_malformed_manifests_are_load_errors(builder, name, manifest,
                                             message):
    path = builder.build(name, manifest)
    with pytest.raises(pattn.LoadError, match=message) as caught:
        pattn.load(path)
    assert len(str(caught.value)) < 2000, "the message stays readable"


# ---------------------------------------------------------------------------
# Rule 3: entry points in a namespace of their own
# ---------------------------------------------------------------------------

COLLIDING = ["path", "chips", "functions", "fn", "take_device_errors",
             "_library", "__len__"]

COLLIDING_MANIFEST = {
    "version": 1, "chips": ["sm_90a"],
    "functions": [{"name": name, "symbol": "_pattn_fill",
                   "args": [{"name": "out", "dtype": "f16", "shape": []}]}
                  for name in COLLIDING] + [
        {"name": "decode_step", "symbol": "decode_step",
         "args": base.MANIFEST["functions"][0]["args"]}],
}


@pytest.fixture(scope="module")
def colliding_path(builder):
    return builder.build("colliding", json.dumps(COLLIDING_MANIFEST))


def test_functions_named_like_module_attributes(colliding_path):
    module = pattn.load(colliding_path)
    probe = Probe(colliding_path)
    # The module's own attributes keep their meaning ...
    assert module.path == str(colliding_path)
    assert module.chips == ("sm_90a",)
    assert isinstance(module.functions, pattn.Functions)
    assert isinstance(module.fn, pattn.FunctionNamespace)
    assert module.take_device_errors() == 0
    # ... and every function is reachable however it is named.
    for name in COLLIDING:
        function = module.functions[name]
        assert isinstance(function, pattn.Function) and function.name == name
        assert module[name] is function
        assert getattr(module.fn, name) is function
        assert name in module and name in dir(module.fn)
        out = FakeTensor((), "torch.float16", 0x3000 + len(name))
        getattr(module.fn, name)(out, stream=STREAM)
        assert probe.received == [0x3000 + len(name)] * 2 + [0, STREAM]
    # The shortcut still works for names that collide with nothing.
    assert module.decode_step is module.fn.decode_step
    assert sorted(dir(module.fn)) == sorted(COLLIDING + ["decode_step"])
    assert list(module.functions) == COLLIDING + ["decode_step"]
    assert list(module) == list(module.functions)


def test_unknown_functions_are_pattn_errors(colliding_path):
    module = pattn.load(colliding_path)
    for lookup in (lambda: module.prefill, lambda: module.fn.prefill,
                   lambda: module["prefill"], lambda: module.functions["x"],
                   lambda: module.fn._pattn_functions):
        with pytest.raises(pattn.UnknownFunctionError, match="has no function"):
            lookup()
    error = pytest.raises(pattn.UnknownFunctionError, lambda: module.prefill)
    assert isinstance(error.value, AttributeError)
    assert isinstance(error.value, KeyError)
    assert isinstance(error.value, pattn.Error)
    assert not hasattr(module, "prefill") and not hasattr(module.fn, "x")
    assert "prefill" not in module
    assert module.functions.get("prefill") is None
    with pytest.raises(AttributeError):
        module.fn.path = None  # read-only
