"""Running ``pattn-compile`` from Python.

``compile()`` turns MLIR (text or a file) into a loadable artifact by
running the ``pattn-compile`` executable; it never links against the
compiler, so this package stays pure Python and works with any build.

With ``$PATTN_ARTIFACT_DIR`` set, artifacts are cached there under a hash of
the source, the chips and the options: a machine with the compiler fills the
directory, and a GPU machine without it (the compiler needs LLVM/MLIR 22)
loads from it.
The runtime library is copied next to the artifacts, which find it through
their ``$ORIGIN`` rpath.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile
from typing import Iterable, Optional, Union

from ._errors import CompileError

# Where a build of this checkout puts the driver (python/pattn/ -> repo).
_REPO_COMPILER = (pathlib.Path(__file__).resolve().parents[2] / "build" /
                  "bin" / "pattn-compile")

PathLike = Union[str, "os.PathLike[str]"]

# The values of pattn-compile's --backend (pattn-select-backend's force=).
BACKENDS = ("auto", "xqa", "portable")


def find_compiler(compiler: Optional[PathLike] = None) -> str:
    """The ``pattn-compile`` to run: ``compiler`` if given, else
    ``$PATTN_COMPILE``, else this checkout's ``build/bin/pattn-compile``,
    else the first one on ``PATH``."""
    if compiler is not None:
        return os.fspath(compiler)
    from_env = os.environ.get("PATTN_COMPILE")
    if from_env:
        return from_env
    if _REPO_COMPILER.is_file():
        return str(_REPO_COMPILER)
    on_path = shutil.which("pattn-compile")
    if on_path:
        return on_path
    raise CompileError(
        "pattn-compile not found: pass compiler=, set PATTN_COMPILE, build "
        f"this checkout ({_REPO_COMPILER}) or put it on PATH")


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


def _cached_artifact(source: PathLike, variant: str) -> Optional[str]:
    """The cache entry for ``source`` compiled as ``variant`` (the chips and
    options), or None without an artifact cache."""
    directory = os.environ.get("PATTN_ARTIFACT_DIR")
    if not directory:
        return None
    if _is_path(source):
        with open(os.fspath(source), encoding="utf-8") as file:
            text = file.read()
    else:
        text = source
    key = hashlib.sha256(f"{variant}\n{text}".encode()).hexdigest()[:24]
    return os.path.join(directory, f"{key}.so")


def _copy_runtime(directory: str, compiler: str) -> None:
    """Puts the compiler's libpattn_runtime.so beside cached artifacts."""
    runtime = os.path.join(os.path.dirname(os.path.dirname(compiler)), "lib",
                           "libpattn_runtime.so")
    target = os.path.join(directory, "libpattn_runtime.so")
    if os.path.isfile(runtime) and not os.path.isfile(target):
        shutil.copy2(runtime, target)


def compile(source: PathLike, chips: Union[str, Iterable[str]] = ("sm_90a",),
            output: Optional[PathLike] = None,
            compiler: Optional[PathLike] = None,
            hardware_conversions: bool = True,
            backend: str = "auto", fold: bool = True) -> str:
    """Compiles ``source`` for ``chips`` into a shared-library artifact.

    ``source`` is MLIR text or the path of a ``.mlir`` file; ``chips`` is a
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
    raises :class:`pattn.CompileError` before anything runs. ``fold=False`` skips the channel-scale fold, so
    ops with K channel scales stay unfolded and go portable (for testing).
    """
    if backend not in BACKENDS:
        raise CompileError(f"unknown backend {backend!r}; expected one of "
                           f"{', '.join(BACKENDS)}")
    chip_list = chips if isinstance(chips, str) else ",".join(chips)
    if not chip_list:
        raise CompileError("no chips to compile for")
    # pattn-compile's options besides the chips; defaults are left out.
    flags = []
    if not hardware_conversions:
        flags.append("--hardware-conversions=false")
    if backend != "auto":
        flags.append(f"--backend={backend}")
    if not fold:
        flags.append("--fold=false")
    # The cache key names the backend and the fold even at their defaults,
    # so that an artifact cached under one default (pattn-compile defaulted
    # to portable before XQA passed the GPU suite) is never taken for
    # another.
    key_options = [f"--backend={backend}",
                   f"--fold={'true' if fold else 'false'}"]
    if not hardware_conversions:
        key_options.append("--hardware-conversions=false")
    variant = " ".join([chip_list] + key_options)
    cached = _cached_artifact(source, variant) if output is None else None
    if cached and os.path.isfile(cached):
        return cached
    executable = find_compiler(compiler)
    if cached:
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        _copy_runtime(os.path.dirname(cached), executable)
        output = cached

    with tempfile.TemporaryDirectory(prefix="pattn-compile-") as scratch:
        if _is_path(source):
            input_path = os.fspath(source)
            if not os.path.isfile(input_path):
                raise CompileError(f"no such MLIR file: {input_path}")
        else:
            input_path = os.path.join(scratch, "input.mlir")
            with open(input_path, "w", encoding="utf-8") as file:
                file.write(source)

        if output is None:
            handle, output_path = tempfile.mkstemp(prefix="pattn-",
                                                   suffix=".so")
            os.close(handle)
            owns_output = True
        else:
            output_path = os.fspath(output)
            owns_output = False

        command = [executable, input_path, f"--chips={chip_list}", "-o",
                   output_path] + flags
        try:
            result = subprocess.run(command, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True,
                                    check=False)
        except OSError as error:
            if owns_output:
                _remove(output_path)
            raise CompileError(f"cannot run {executable}: {error}",
                               command=command) from error

    wrote_artifact = (os.path.isfile(output_path) and
                      os.path.getsize(output_path) > 0)
    if owns_output and (result.returncode != 0 or not wrote_artifact):
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
    return output_path
