"""Running ``pattn-compile`` from Python.

``compile()`` turns MLIR (text or a file) into a loadable artifact by
running the ``pattn-compile`` executable; it never links against the
compiler, so this package stays pure Python and works with any build.
:func:`find_compiler` says which executable that is.

With ``$PATTN_ARTIFACT_DIR`` set, artifacts are cached there under a hash of
the source, the chips, every option and the compiler's identity: the SHA-256
of the ``pattn-compile`` file and of the ``libpattn_runtime.so`` beside it
(``../lib/``, where the compiler finds it), so another build of the compiler
never gets an old artifact back. The identity is read from the files alone
(never by running them) and memoized per file, path, size and mtime: a GPU
machine where the compiler cannot run (it needs LLVM/MLIR 22) still computes
the keys from a copy of the two files (``$PATTN_COMPILE``; that is what
scripts/gpu-prepare.sh carries in ``.gpu-artifacts/compiler/``) and loads
what the machine with the compiler filled in. The compiler embeds pattn's
version and commit, so its hash covers them; ``<key>.json`` beside each
entry records them, the source's hash, the chips and the options for
people (nothing reads it back). The runtime library is also copied next to
the artifacts, which find it through their ``$ORIGIN`` rpath.

Every cache entry ``<key>.so`` has its SHA-256 beside it in
``<key>.so.sha256`` (``sha256sum`` format). Both are written under a
temporary name and renamed into place (``os.replace``), so a reader sees a
whole old file or a whole new one, never a partial write; writers of one
entry take a lock (``<key>.lock``). A served entry must match its checksum:
one that does not (truncated, corrupt) is reported once with a
:class:`pattn.CacheWarning` and rebuilt, or, without a compiler, is a
:class:`pattn.CompileError`; it is never returned. An entry without a
checksum (written by an older pattn) is served, and given one, if it passes
:func:`pattn.validate_artifact`'s ELF checks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import threading
import warnings
from typing import Dict, Iterable, Iterator, List, Optional, Tuple, Union

from ._errors import (CacheWarning, CompileError, _CompileArgumentError,
                      _CompileArgumentTypeError, _rejects_bad_calls)
from ._loader import (_BadElf, _inspect_elf, checksum_problem, file_sha256,
                      give_umask_mode, write_checksum)
from ._version import __version__

try:
    import fcntl
except ImportError:  # not POSIX: entries are still written atomically
    fcntl = None  # type: ignore[assignment]

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent


def _checkout_root() -> Optional[pathlib.Path]:
    """The pattn repository this package is part of (``python/pattn/``
    beside ``VERSION`` and ``CMakeLists.txt``), or None when it is installed
    (a wheel, ``pip install``) and no checkout is around it."""
    root = _PACKAGE_DIR.parents[1]
    if (_PACKAGE_DIR.parent.name == "python" and
            (root / "VERSION").is_file() and
            (root / "CMakeLists.txt").is_file()):
        return root
    return None


_CHECKOUT = _checkout_root()
# Where a build of this checkout puts the driver; None when installed.
_REPO_COMPILER: Optional[pathlib.Path] = (
    _CHECKOUT / "build" / "bin" / "pattn-compile"
    if _CHECKOUT is not None else None)
# ... and pattn-opt, which pattn.ir.Module.verify runs.
_REPO_OPT: Optional[pathlib.Path] = (
    _CHECKOUT / "build" / "bin" / "pattn-opt"
    if _CHECKOUT is not None else None)

PathLike = Union[str, "os.PathLike[str]"]

# The values of pattn-compile's --backend (pattn-select-backend's force=).
BACKENDS = ("auto", "xqa", "portable")
# The values of pattn-compile's --prompt-kernel (pattn-plan-decode's).
PROMPT_KERNELS = ("prefill", "prefill-mma-sync", "prefill-wgmma", "xqa")
# The values of pattn-compile's --xqa-keys-per-tile (0: the planner's).
XQA_TILE_KEYS = (0, 16, 32, 64, 128)
# The values of pattn-compile's --xqa-stages (0: the planner's).
XQA_STAGES = (0, 2, 3, 4, 5, 6, 7, 8)
# The values of pattn-compile's --xqa-cluster-heads and --xqa-cluster-splits
# (0 and 1: none).
XQA_CLUSTERS = (0, 1, 2, 4, 8)


def _path_argument(value: PathLike, name: str, function: str) -> str:
    """``value`` as a str path; a pattn error naming ``name`` if it is not
    one."""
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)):
        raise _CompileArgumentTypeError(
            f"{function}: argument '{name}' must be a str or os.PathLike, "
            f"got {type(value).__name__}")
    try:
        path = os.fsdecode(os.fspath(value))
    except (TypeError, ValueError) as error:
        raise _CompileArgumentTypeError(
            f"{function}: argument '{name}' is not a usable path ({error})") \
            from None
    if not path or "\0" in path:
        raise _CompileArgumentError(
            f"{function}: argument '{name}' must be a non-empty path without "
            f"NUL characters, got {path!r:.200}")
    return path


def _chip_list(chips: Union[str, Iterable[str]]) -> str:
    """``chips`` as pattn-compile's comma-separated list; a pattn error
    naming the argument for anything but a str or an iterable of them."""
    if isinstance(chips, str):
        names = chips.split(",")
    else:
        try:
            items = list(chips)
        except TypeError:
            raise _CompileArgumentTypeError(
                "pattn.compile: argument 'chips' must be a chip name, a "
                "comma-separated list of them or an iterable of chip names "
                f"(str), got {type(chips).__name__}") from None
        for index, item in enumerate(items):
            if not isinstance(item, str):
                raise _CompileArgumentTypeError(
                    f"pattn.compile: argument 'chips' must hold chip names "
                    f"(str) such as 'sm_90a', but chips[{index}] is "
                    f"{type(item).__name__} {item!r:.60}")
        names = items
    if not names or names == [""]:
        raise _CompileArgumentError(
            "pattn.compile: argument 'chips' is empty: no chips to compile "
            "for")
    for name in names:
        if not name.strip() or "\0" in name or "\n" in name:
            raise _CompileArgumentError(
                f"pattn.compile: argument 'chips' holds an empty or "
                f"malformed chip name {name!r:.60} (in {chips!r:.200})")
    return ",".join(names)


def _choice_argument(value: object, name: str, choices: tuple) -> int:
    """``value`` if it is an int among ``choices``; else a CompileError that
    is an ArgumentTypeError (not an int) or an ArgumentError (not among
    them), naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _CompileArgumentTypeError(
            f"pattn.compile: argument '{name}' must be an int, got "
            f"{type(value).__name__}")
    if value not in choices:
        raise _CompileArgumentError(
            f"{name} must be one of {', '.join(map(str, choices))}, got "
            f"{value}")
    return value


def _flag_argument(value: object, name: str) -> bool:
    if isinstance(value, bool) or (isinstance(value, int) and
                                   value in (0, 1)):
        return bool(value)
    raise _CompileArgumentTypeError(
        f"pattn.compile: argument '{name}' must be True or False, got "
        f"{type(value).__name__} {value!r:.60}")


def _checked_compiler(path: str, origin: str,
                      tool: str = "pattn-compile") -> str:
    """``path`` (given as ``origin``) if it names an executable file; a
    bare name is looked up on ``PATH``. Otherwise a CompileError saying
    what is wrong with it (``tool`` is what it should have named)."""
    if os.sep not in path and (os.altsep is None or os.altsep not in path):
        found = shutil.which(path)
        if found:
            return found
    if not os.path.exists(path):
        raise CompileError(f"{origin} names {path}, which does not exist: "
                           f"point it at a {tool} executable (a pattn "
                           f"build's build/bin/{tool})")
    if not os.path.isfile(path):
        raise CompileError(f"{origin} names {path}, which is not a file: "
                           f"point it at the {tool} executable")
    if not os.access(path, os.X_OK):
        raise CompileError(f"{origin} names {path}, which is not executable "
                           "(no execute permission): point it at the "
                           f"{tool} executable or chmod +x it")
    return path


@_rejects_bad_calls(_CompileArgumentTypeError, "pattn.find_compiler")
def find_compiler(compiler: Optional[PathLike] = None) -> str:
    """The ``pattn-compile`` to use: ``compiler`` if given, else
    ``$PATTN_COMPILE``, else this checkout's ``build/bin/pattn-compile``
    (when the package runs from a pattn repository), else the first one on
    ``PATH``. A ``compiler`` or ``$PATTN_COMPILE`` that names a missing,
    non-file or non-executable path is a :class:`pattn.CompileError` saying
    so, as is finding none (which says where to get one)."""
    if compiler is not None:
        return _checked_compiler(
            _path_argument(compiler, "compiler", "pattn.find_compiler"),
            "compiler=")
    from_env = os.environ.get("PATTN_COMPILE")
    if from_env:
        return _checked_compiler(from_env, "PATTN_COMPILE")
    if _REPO_COMPILER is not None and _REPO_COMPILER.is_file():
        return str(_REPO_COMPILER)
    on_path = shutil.which("pattn-compile")
    if on_path:
        return on_path
    if _REPO_COMPILER is None:
        raise CompileError(
            f"pattn-compile not found: this pattn is installed as a package "
            f"({_PACKAGE_DIR}), not run from a pattn checkout, so there is no "
            "build tree to look in; build pattn-compile from the pattn "
            "repository (bash scripts/setup.sh there makes "
            "build/bin/pattn-compile), then set PATTN_COMPILE to it, pass "
            "compiler=, or put it on PATH")
    raise CompileError(
        "pattn-compile not found: pass compiler=, set PATTN_COMPILE, build "
        f"this checkout ({_REPO_COMPILER}: bash scripts/build.sh) or put it "
        "on PATH")


@_rejects_bad_calls(_CompileArgumentTypeError, "pattn.find_opt")
def find_opt(opt: Optional[PathLike] = None) -> str:
    """The ``pattn-opt`` to use (:meth:`pattn.ir.Module.verify` runs it):
    ``opt`` if given, else ``$PATTN_OPT``, else this checkout's
    ``build/bin/pattn-opt``, else the first one on ``PATH``. A path that is
    missing, not a file or not executable is a :class:`pattn.CompileError`
    saying so, as is finding none."""
    if opt is not None:
        return _checked_compiler(
            _path_argument(opt, "opt", "pattn.find_opt"), "opt=",
            "pattn-opt")
    from_env = os.environ.get("PATTN_OPT")
    if from_env:
        return _checked_compiler(from_env, "PATTN_OPT", "pattn-opt")
    if _REPO_OPT is not None and _REPO_OPT.is_file():
        return str(_REPO_OPT)
    on_path = shutil.which("pattn-opt")
    if on_path:
        return on_path
    where = (f"build this checkout ({_REPO_OPT}: bash scripts/build.sh)"
             if _REPO_OPT is not None else
             "build it from the pattn repository")
    raise CompileError(f"pattn-opt not found: pass opt=, set PATTN_OPT, "
                       f"{where} or put it on PATH")


# ---------------------------------------------------------------------------
# The compiler's identity: what the artifact cache keys on besides the input
# ---------------------------------------------------------------------------

# "pattn 0.1.0 (commit e7aa69d53e33)", as pattn-compile --version prints it
# and its binary holds it.
_VERSION_PATTERN = re.compile(
    rb"pattn (\d+\.\d+\.\d+[0-9A-Za-z.+-]*) \(commit ([0-9A-Za-z]+)\)")


@dataclasses.dataclass(frozen=True)
class _FileFacts:
    sha256: str
    version: Optional[str]  # what the file says of itself, if anything
    commit: Optional[str]


# (real path, size, mtime_ns, inode, device) -> what the file holds.
_FILE_FACTS: Dict[Tuple[str, int, int, int, int], _FileFacts] = {}
_FILE_FACTS_LOCK = threading.Lock()


def _read_file_facts(path: str) -> _FileFacts:
    """Hashes ``path`` and finds the version string in it, in one read."""
    digest = hashlib.sha256()
    found = None
    tail = b""
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
            if found is None:
                found = _VERSION_PATTERN.search(tail + block)
                tail = block[-128:]
    version = commit = None
    if found is not None:
        version, commit = (group.decode("ascii") for group in found.groups())
    return _FileFacts(digest.hexdigest(), version, commit)


def _file_facts(path: str) -> _FileFacts:
    """``_read_file_facts(path)``, memoized per real path, size, mtime and
    inode (a rebuilt or replaced file is read again)."""
    real = os.path.realpath(path)
    info = os.stat(real)
    key = (real, info.st_size, info.st_mtime_ns, info.st_ino, info.st_dev)
    with _FILE_FACTS_LOCK:
        facts = _FILE_FACTS.get(key)
    if facts is None:
        facts = _read_file_facts(real)
        with _FILE_FACTS_LOCK:
            _FILE_FACTS[key] = facts
    return facts


def _runtime_of(compiler: str) -> str:
    """The libpattn_runtime.so that ``compiler`` links artifacts against:
    ``../lib/`` of the executable's real location (pattn-compile's
    --runtime-dir default)."""
    real = os.path.realpath(compiler)
    return os.path.join(os.path.dirname(os.path.dirname(real)), "lib",
                        "libpattn_runtime.so")


@dataclasses.dataclass(frozen=True)
class _Identity:
    """Which compiler builds an artifact, as the artifact cache keys it."""

    compiler: str
    compiler_facts: _FileFacts
    runtime: str
    runtime_facts: Optional[_FileFacts]  # None: there is no runtime there

    def key_text(self) -> str:
        runtime = (self.runtime_facts.sha256 if self.runtime_facts
                   else "none")
        return (f"pattn-compile sha256={self.compiler_facts.sha256}\n"
                f"libpattn_runtime.so sha256={runtime}")


def _compiler_identity(compiler: str) -> _Identity:
    """The identity of ``compiler`` from its files (it is not run)."""
    try:
        facts = _file_facts(compiler)
    except OSError as error:
        raise CompileError(f"cannot read the compiler {compiler} to key the "
                           f"artifact cache: {error}") from None
    runtime = _runtime_of(compiler)
    try:
        runtime_facts: Optional[_FileFacts] = _file_facts(runtime)
    except FileNotFoundError:
        runtime_facts = None
    except OSError as error:
        raise CompileError(f"cannot read {runtime}, the runtime of "
                           f"{compiler}, to key the artifact cache: "
                           f"{error}") from None
    return _Identity(compiler, facts, runtime, runtime_facts)


def _is_path(source: Union[str, "os.PathLike[str]"]) -> bool:
    # MLIR text always holds a newline or a brace; a one-line string
    # naming a .mlir file is a path.
    if isinstance(source, os.PathLike):
        return True
    return ("\n" not in source and "{" not in source and
            source.endswith(".mlir"))


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _source_text(source: PathLike) -> str:
    if not _is_path(source):
        return os.fspath(source)
    path = os.fspath(source)
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except FileNotFoundError:
        raise CompileError(f"no such MLIR file: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise CompileError(f"cannot read the MLIR file {path}: {error}") \
            from None


def _cached_artifact(source: PathLike, variant: str, identity: _Identity,
                     directory: Optional[str]) -> Optional[str]:
    """The cache entry for ``source`` compiled as ``variant`` (the chips and
    options) by the compiler ``identity`` in the cache ``directory``, or
    None without an artifact cache."""
    if not directory:
        return None
    text = _source_text(source)
    key = hashlib.sha256(
        f"{identity.key_text()}\n{variant}\n{text}".encode()).hexdigest()[:24]
    return os.path.join(directory, f"{key}.so")


def _write_sidecar(entry: str, identity: _Identity, source: PathLike,
                   chip_list: str, variant: str) -> None:
    """``<key>.json`` beside ``entry``: what built it, for people. Written
    atomically; a failure to write it is ignored (nothing reads it)."""
    runtime = identity.runtime_facts
    record = {
        "artifact": os.path.basename(entry),
        "source_sha256": hashlib.sha256(
            _source_text(source).encode()).hexdigest(),
        "source_path": (os.path.abspath(os.fspath(source))
                        if _is_path(source) else None),
        "chips": chip_list.split(","),
        "options": variant.split(" ")[1:],
        "pattn_version": identity.compiler_facts.version,
        "pattn_commit": identity.compiler_facts.commit,
        "compiler": identity.compiler,
        "compiler_sha256": identity.compiler_facts.sha256,
        "runtime": identity.runtime if runtime else None,
        "runtime_sha256": runtime.sha256 if runtime else None,
        "python_package_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
    }
    target = entry[:-len(".so")] + ".json"
    with contextlib.suppress(OSError):
        handle, temporary = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".tmp",
            dir=os.path.dirname(target))
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(record, file, indent=1, sort_keys=True)
                file.write("\n")
            give_umask_mode(temporary)
            os.replace(temporary, target)
        finally:
            _remove(temporary)


# Entries already reported corrupt in this process (each is reported once).
_REPORTED: set = set()
_REPORTED_LOCK = threading.Lock()


def _report_corrupt(entry: str, problem: str, action: str) -> None:
    with _REPORTED_LOCK:
        if entry in _REPORTED:
            return
        _REPORTED.add(entry)
    warnings.warn(f"pattn: artifact cache entry {entry} {problem}; {action}",
                  CacheWarning, stacklevel=5)


def _entry_problem(entry: str) -> Optional[str]:
    """None if the cache entry ``entry`` may be served; "missing" if there
    is none; else why it is corrupt. An entry without a checksum that
    passes the ELF checks is given one."""
    if not os.path.isfile(entry):
        return "missing"
    try:
        return checksum_problem(entry)
    except FileNotFoundError:
        pass  # no checksum: an entry of an older pattn
    except OSError as error:
        return f"has a checksum that cannot be read ({error})"
    try:
        _inspect_elf(entry)
    except _BadElf as error:
        return f"has no checksum and {error}"
    with contextlib.suppress(OSError):  # a read-only cache stays as it is
        write_checksum(entry)
    return None


@contextlib.contextmanager
def _entry_lock(entry: str) -> Iterator[None]:
    """Serializes the writers of one entry (across threads and processes).
    Without a writable cache or ``fcntl``, entries are still replaced
    atomically; only the lock is skipped."""
    try:
        handle = os.open(entry[:-len(".so")] + ".lock",
                         os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock


def _fsync(path: str) -> None:
    with contextlib.suppress(OSError):
        handle = os.open(path, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


def _publish(temporary: str, target: str) -> None:
    """Moves the finished file ``temporary`` to ``target`` with its checksum:
    the checksum first, then the file, each renamed into place, so no
    reader ever sees a partial file (a reader between the two renames sees
    a mismatch and waits on the entry's lock)."""
    _fsync(temporary)
    give_umask_mode(temporary, executable=True)  # as a linker makes a .so
    digest = file_sha256(temporary)
    write_checksum(target, digest)
    os.replace(temporary, target)


def _copy_runtime(directory: str, compiler: str) -> None:
    """Puts the compiler's libpattn_runtime.so beside cached artifacts
    (atomically, with its checksum); a copy there that is truncated or
    corrupt is replaced."""
    runtime = _runtime_of(compiler)
    target = os.path.join(directory, "libpattn_runtime.so")
    if not os.path.isfile(runtime):
        return
    if os.path.isfile(target):
        problem = _entry_problem(target)
        if problem is None:
            return
        _report_corrupt(target, problem, "replacing it with " + runtime)
    handle, temporary = tempfile.mkstemp(prefix=".libpattn_runtime.",
                                         suffix=".so", dir=directory)
    os.close(handle)
    try:
        shutil.copy2(runtime, temporary)
        _publish(temporary, target)
    finally:
        _remove(temporary)


def _run_compiler(executable: str, source: PathLike, chip_list: str,
                  flags: List[str], output_path: str,
                  remove_on_failure: bool) -> None:
    """Runs pattn-compile on ``source`` into ``output_path``; raises
    CompileError (removing the output if ``remove_on_failure``) unless it
    succeeded and wrote a non-empty file."""
    with tempfile.TemporaryDirectory(prefix="pattn-compile-") as scratch:
        if _is_path(source):
            input_path = os.fspath(source)
            if not os.path.isfile(input_path):
                raise CompileError(f"no such MLIR file: {input_path}")
        else:
            input_path = os.path.join(scratch, "input.mlir")
            with open(input_path, "w", encoding="utf-8") as file:
                file.write(os.fspath(source))

        command = [executable, input_path, f"--chips={chip_list}", "-o",
                   output_path] + flags
        try:
            result = subprocess.run(command, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True,
                                    check=False)
        except OSError as error:
            if remove_on_failure:
                _remove(output_path)
            raise CompileError(f"cannot run {executable}: {error}",
                               command=command) from error

    wrote_artifact = (os.path.isfile(output_path) and
                      os.path.getsize(output_path) > 0)
    if remove_on_failure and (result.returncode != 0 or not wrote_artifact):
        _remove(output_path)
    if result.returncode != 0:
        raise CompileError(
            f"pattn-compile failed (exit status {result.returncode}):\n"
            f"{result.stderr.rstrip()}",
            command=command, returncode=result.returncode,
            stderr=result.stderr)
    if not wrote_artifact:
        raise CompileError(
            f"pattn-compile reported success but wrote no artifact to "
            f"{output_path}", command=command, returncode=0,
            stderr=result.stderr)


def _compile_into_cache(entry: str, executable: str, identity: _Identity,
                        source: PathLike, chip_list: str, flags: List[str],
                        variant: str) -> str:
    """Returns the cache entry ``entry``: served if it matches its checksum,
    else (re)built under the entry's lock and published atomically. A
    served entry never runs the compiler."""
    if _entry_problem(entry) is None:  # the common case takes no lock
        return entry
    directory = os.path.dirname(entry)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        raise CompileError(f"cannot create the artifact cache {directory} "
                           f"(cache_dir or $PATTN_ARTIFACT_DIR): {error}") from None
    with _entry_lock(entry):
        problem = _entry_problem(entry)  # another writer may have been first
        if problem is None:
            return entry
        if problem != "missing":
            _report_corrupt(entry, problem, "rebuilding it")
        try:
            _copy_runtime(directory, executable)
            handle, temporary = tempfile.mkstemp(
                prefix=f".{os.path.basename(entry)}.", suffix=".so",
                dir=directory)
            os.close(handle)
        except OSError as error:
            raise CompileError(f"cannot write to the artifact cache "
                               f"{directory}: {error}") from None
        try:
            try:
                _run_compiler(executable, source, chip_list, flags, temporary,
                              remove_on_failure=True)
            except CompileError as error:
                # Say which entry was wanted: on a machine where the
                # compiler cannot run, a miss means the cache was filled by
                # another compiler (or for other input or options).
                if problem == "missing":
                    what = (f"the artifact cache {directory} "
                            f"(cache_dir or $PATTN_ARTIFACT_DIR) has no entry "
                            f"{os.path.basename(entry)} for this source, "
                            f"these options and this compiler ({executable}, "
                            f"sha256 {identity.compiler_facts.sha256[:16]}..."
                            "), and building it failed")
                else:
                    what = (f"artifact cache entry {entry} {problem}, and "
                            f"rebuilding it with {executable} failed")
                raise CompileError(
                    f"{what}: {error}", command=error.command,
                    returncode=error.returncode, stderr=error.stderr) \
                    from None
            try:
                _publish(temporary, entry)
            except OSError as error:
                raise CompileError(f"cannot write the artifact cache entry "
                                   f"{entry}: {error}") from None
        finally:
            _remove(temporary)
        _write_sidecar(entry, identity, source, chip_list, variant)
        with _REPORTED_LOCK:
            _REPORTED.discard(entry)  # a later corruption is news again
    return entry


@_rejects_bad_calls(_CompileArgumentTypeError, "pattn.compile")
def compile(source: Union[PathLike, "pattn.ir.Module"],
            chips: Union[str, Iterable[str]] = ("sm_90a",),
            output: Optional[PathLike] = None,
            compiler: Optional[PathLike] = None,
            hardware_conversions: bool = True,
            backend: str = "auto", fold: bool = True,
            prompt_kernel: str = "prefill",
            cache_dir: Optional[PathLike] = None,
            xqa_keys_per_tile: int = 0, xqa_stages: int = 0,
            xqa_copy_warp: bool = False,
            xqa_scores_ahead: bool = False,
            xqa_cluster_heads: int = 0,
            xqa_cluster_splits: int = 0,
            xqa_merge_unsplit: bool = False) -> str:
    """Compiles ``source`` for ``chips`` into a shared-library artifact.

    ``source`` is MLIR text, the path of a ``.mlir`` file or a
    :class:`pattn.ir.Module` (compiled as its ``str()``); ``chips`` is a
    chip name, a comma-separated list, or an iterable of names. The artifact
    goes to ``output``, or to a new temporary file that the caller owns.
    Returns the artifact's path; raises :class:`pattn.CompileError` with the
    compiler's diagnostics on failure. ``hardware_conversions=False`` decodes
    with bit tricks even where a chip has conversion instructions (the two
    give the same values; this is for comparing them).

    ``backend`` chooses the lowering of every attention op: ``"auto"`` (the
    default: the tensor-core XQA kernel where the eligibility table allows,
    portable elsewhere), ``"xqa"`` (an ineligible op is a compile error) or
    ``"portable"`` (the fp32 CUDA-core kernel everywhere); any other value
    raises :class:`pattn.CompileError` before anything runs. ``fold=False``
    skips the channel-scale fold, so ops with K channel scales stay unfolded
    and go portable (for testing). ``prompt_kernel`` picks the tensor-core
    kernel of a prompt (more than 8 query tokens per sequence):
    ``"prefill"`` (the default: the prefill family, 64 query rows a block,
    with the batch's short sequences on the decode kernel; on wgmma where
    every chip built for has it and the caches are quantized),
    ``"prefill-mma-sync"`` (the prefill family on mma.sync everywhere),
    ``"prefill-wgmma"`` (on wgmma wherever it serves, 16-bit caches too) or
    ``"xqa"`` (the decode kernel in query tiles). ``xqa_keys_per_tile`` (16, 32,
    64 or 128; 0, the default, lets the planner choose) asks the XQA decode
    plans for that tile size where it fits (for tuning and comparing plans),
    and ``xqa_stages`` (2 to 8; 0, the default, lets the planner choose
    2 to 4) for that ring depth where it fits shared memory;
    ``xqa_copy_warp=True`` gives the XQA decode plans a copy warp (a fifth
    warp that copies the tiles and signals each ring stage with mbarriers);
    ``xqa_scores_ahead=True`` has the XQA decode plans of at most 8 rows
    compute each tile's scores one iteration ahead, under the previous
    tile's softmax and P V (``#pattn.xqa_plan<scores_ahead = true>``);
    ``xqa_cluster_heads`` (2, 4 or 8; 0, the default: none) launches the
    XQA decode blocks of that many consecutive KV heads as one thread-block
    cluster that meets at a barrier each tile, where every chip is sm_90 or
    later (``#pattn.xqa_plan<cluster_heads = C>``; for measuring);
    ``xqa_cluster_splits`` (2, 4 or 8; 0, the default: none) gives the XQA
    decodes that many splits, launched as one thread-block cluster per
    (sequence, KV head) that merges them into the output itself, with no
    merge launch, where every chip is sm_90 or later and the op has no
    guard (``#pattn.xqa_plan<cluster_splits = C>``; for measuring);
    ``xqa_merge_unsplit=True`` has an XQA decode's block merge its own rows
    into the output where the host picks one split, with no merge launch,
    for ops without a guard (``#pattn.xqa_plan<merges_unsplit = true>``;
    for measuring).

    Misuse (a source that is neither text nor a path, a chip that is not a
    string, a flag that is not a bool, an unknown keyword) raises a
    :class:`pattn.CompileError` that is also a :class:`pattn.ArgumentError`
    (``ValueError``) or :class:`pattn.ArgumentTypeError` (``TypeError``),
    naming the argument, before anything runs.
    """
    from .ir import Module as _IRModule
    if isinstance(source, _IRModule):
        source = str(source)
    if isinstance(source, bool) or not isinstance(source, (str,
                                                           os.PathLike)):
        raise _CompileArgumentTypeError(
            "pattn.compile: argument 'source' must be MLIR text (str) or the "
            "path of a .mlir file (str or os.PathLike) or a pattn.ir.Module, "
            f"got {type(source).__name__}")
    if isinstance(source, os.PathLike):
        source = pathlib.Path(_path_argument(source, "source",
                                             "pattn.compile"))
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise _CompileArgumentError(
            f"unknown backend {backend!r:.60}; expected one of "
            f"{', '.join(BACKENDS)}")
    if not isinstance(prompt_kernel, str) or prompt_kernel not in PROMPT_KERNELS:
        raise _CompileArgumentError(
            f"unknown prompt_kernel {prompt_kernel!r:.60}; expected one of "
            f"{', '.join(PROMPT_KERNELS)}")
    for name, value, choices in (
            ("xqa_keys_per_tile", xqa_keys_per_tile, XQA_TILE_KEYS),
            ("xqa_stages", xqa_stages, XQA_STAGES),
            ("xqa_cluster_heads", xqa_cluster_heads, XQA_CLUSTERS),
            ("xqa_cluster_splits", xqa_cluster_splits, XQA_CLUSTERS)):
        _choice_argument(value, name, choices)
    chip_list = _chip_list(chips)
    hardware_conversions = _flag_argument(hardware_conversions,
                                          "hardware_conversions")
    fold = _flag_argument(fold, "fold")
    xqa_copy_warp = _flag_argument(xqa_copy_warp, "xqa_copy_warp")
    xqa_scores_ahead = _flag_argument(xqa_scores_ahead, "xqa_scores_ahead")
    xqa_merge_unsplit = _flag_argument(xqa_merge_unsplit, "xqa_merge_unsplit")
    if output is not None:
        output = _path_argument(output, "output", "pattn.compile")
    if compiler is not None:
        compiler = _path_argument(compiler, "compiler", "pattn.compile")

    # pattn-compile's options besides the chips; defaults are left out.
    flags = []
    if not hardware_conversions:
        flags.append("--hardware-conversions=false")
    if backend != "auto":
        flags.append(f"--backend={backend}")
    if not fold:
        flags.append("--fold=false")
    if prompt_kernel != "prefill":
        flags.append(f"--prompt-kernel={prompt_kernel}")
    # The XQA plan requests, which the cache key names too (last, in this
    # order).
    xqa_flags = []
    if xqa_keys_per_tile:
        xqa_flags.append(f"--xqa-keys-per-tile={xqa_keys_per_tile}")
    if xqa_stages:
        xqa_flags.append(f"--xqa-stages={xqa_stages}")
    if xqa_copy_warp:
        xqa_flags.append("--xqa-copy-warp")
    if xqa_scores_ahead:
        xqa_flags.append("--xqa-scores-ahead")
    if xqa_cluster_heads > 1:
        xqa_flags.append(f"--xqa-cluster-heads={xqa_cluster_heads}")
    if xqa_cluster_splits > 1:
        xqa_flags.append(f"--xqa-cluster-splits={xqa_cluster_splits}")
    if xqa_merge_unsplit:
        xqa_flags.append("--xqa-merge-unsplit")
    flags += xqa_flags
    # The cache key names the backend and the fold even at their defaults,
    # so that an artifact cached under one default (pattn-compile defaulted
    # to portable before XQA passed the GPU suite) is never taken for
    # another.
    key_options = [f"--backend={backend}",
                   f"--fold={'true' if fold else 'false'}"]
    if not hardware_conversions:
        key_options.append("--hardware-conversions=false")
    # The prompt kernel too: the default was xqa before the prefill family
    # passed the GPU suite, and artifacts cached without naming it hold
    # xqa's prompt kernels.
    key_options.append(f"--prompt-kernel={prompt_kernel}")
    key_options += xqa_flags
    variant = " ".join([chip_list] + key_options)
    if cache_dir is not None:
        cache_dir = _path_argument(cache_dir, "cache_dir", "pattn.compile")
    else:
        cache_dir = os.environ.get("PATTN_ARTIFACT_DIR") or None
    if output is None and cache_dir:
        try:
            executable = find_compiler(compiler)
        except CompileError as error:
            raise CompileError(
                f"{error}. The artifact cache ($PATTN_ARTIFACT_DIR) keys its "
                "entries on the compiler's files (pattn-compile and the "
                "libpattn_runtime.so in its ../lib), so it needs them even "
                "where the compiler cannot run: set PATTN_COMPILE to the "
                "copy of the compiler that filled the cache "
                "(scripts/gpu-prepare.sh puts one in "
                ".gpu-artifacts/compiler/bin/pattn-compile)") from None
        identity = _compiler_identity(executable)
        cached = _cached_artifact(source, variant, identity, cache_dir)
        assert cached is not None
        return _compile_into_cache(cached, executable, identity, source,
                                   chip_list, flags, variant)

    executable = find_compiler(compiler)
    if output is None:
        try:
            handle, output_path = tempfile.mkstemp(prefix="pattn-",
                                                   suffix=".so")
        except OSError as error:
            raise CompileError(f"cannot create a temporary artifact: "
                               f"{error}") from None
        os.close(handle)
        owns_output = True
    else:
        output_path = output
        owns_output = False
    _run_compiler(executable, source, chip_list, flags, output_path,
                  remove_on_failure=owns_output)
    return output_path
