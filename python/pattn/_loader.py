"""Loading pattn artifacts and calling their entry points.

An artifact is a shared library written by ``pattn-compile``. It exports
``const char *pattn_manifest(void)``, a JSON description of its entry points::

    {"version": 1, "chips": ["sm_80", "sm_90a"],
     "functions": [{"name": "decode_step", "symbol": "decode_step",
                    "args": [{"name": "k_pages", "dtype": "i8",
                              "shape": [-1, 16, 8, 64], "written": true},
                             ...]}]}

and, per entry point, a C function that takes each memref argument in MLIR's
expanded form (allocated pointer, aligned pointer, offset, sizes, strides)
followed by a CUDA stream, and returns a ``pattnStatus`` (0 on success).
An argument's ``name`` is the MLIR function's (unique within it), which a
call takes as a keyword; ``written`` says whether the function may write it
(absent in older manifests: then every argument counts as written).

Arguments are checked against the manifest before anything is launched.
After a failed call the runtime's message is read through the artifact's
own handle: the artifact links ``libpattn_runtime.so``, and ``dlsym`` on a
library also searches its dependencies, so this finds the very copy of the
runtime the artifact called (the one holding this thread's error), however
rpath or ``LD_LIBRARY_PATH`` located it, without ``RTLD_GLOBAL``.

Before ``ctypes`` maps a file, :func:`validate_artifact` checks it: a regular
file, an ELF shared object for this interpreter's class, byte order and
machine, whose header tables, segments, sections and dynamic strings all lie
inside the file, and which matches its checksum (``<file>.sha256``, written
by the artifact cache) if it has one; the libraries it needs that its
rpath/runpath or ``LD_LIBRARY_PATH`` finds get the same checks. The dynamic
loader maps segments without checking them against the file's size, so a
truncated library would otherwise kill the interpreter with SIGBUS. The
manifest is only reachable by calling into the library; it is checked right
after mapping, before any entry point is bound.
"""

from __future__ import annotations

import collections.abc
import contextlib
import ctypes
import dataclasses
import functools
import hashlib
import json
import operator
import os
import reprlib
import stat
import struct
import sys
import tempfile
from typing import (Any, Dict, Iterator, List, NamedTuple, Optional,
                    Sequence, Tuple)

from ._errors import (ArgumentError, ArgumentTypeError, DeviceError,
                      LaunchError, LoadError, UnknownFunctionError,
                      _LoadArgumentTypeError, _rejects_bad_calls)

MANIFEST_VERSION = 1

# Manifest dtype -> the str() of the torch dtypes that may carry it. Raw i8
# storage (paged caches) is often allocated as uint8, and only the bytes
# matter, so both are accepted.
_TORCH_DTYPES: Dict[str, Tuple[str, ...]] = {
    "f16": ("torch.float16",),
    "bf16": ("torch.bfloat16",),
    "f32": ("torch.float32",),
    "i8": ("torch.int8", "torch.uint8"),
    "i32": ("torch.int32",),
    "i64": ("torch.int64",),
    "f8E4M3FN": ("torch.float8_e4m3fn",),
    "f8E5M2": ("torch.float8_e5m2",),
}

# pattnStatus values the loader treats specially (include/pattn/Runtime).
_PATTN_ERROR_NO_BINARY_FOR_DEVICE = 3

#: PATTN_DEVICE_ERROR_SLOT_OUT_OF_RANGE (pattn/Runtime/Runtime.h).
DEVICE_ERROR_SLOT_OUT_OF_RANGE = 1
#: PATTN_DEVICE_ERROR_POSITION_OUT_OF_RANGE.
DEVICE_ERROR_POSITION_OUT_OF_RANGE = 2

#: What each device error bit means.
DEVICE_ERRORS = {
    DEVICE_ERROR_SLOT_OUT_OF_RANGE:
        "a cache write rejected its whole batch: a slot was below -1 or "
        "past the cache's pages (nothing of that batch was written)",
    DEVICE_ERROR_POSITION_OUT_OF_RANGE:
        "a rotary embedding rejected its whole batch: a token's position "
        "was below 0 or past its cos/sin tables (nothing was written)",
}

_TENSOR_PROTOCOL = "data_ptr(), shape, dtype, device and is_contiguous()"


# ---------------------------------------------------------------------------
# Validating a file before the dynamic loader maps it
# ---------------------------------------------------------------------------

_INT64_MAX = (1 << 63) - 1
_POINTER_LIMIT = 1 << (8 * ctypes.sizeof(ctypes.c_void_p))

#: The suffix of a file's checksum: ``<artifact>.sha256`` holds
#: ``<hex digest>  <artifact name>`` (the format of ``sha256sum``).
CHECKSUM_SUFFIX = ".sha256"

_ELF_MAGIC = b"\x7fELF"
_ELFCLASS = {1: "32-bit", 2: "64-bit"}
_ELFDATA = {1: "little", 2: "big"}
_ET_DYN = 3
_PT_LOAD, _PT_DYNAMIC = 1, 2
_SHT_NOBITS = 8
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_STRSZ = 0, 1, 5, 10
_DT_RPATH, _DT_RUNPATH = 15, 29
_PN_XNUM = 0xFFFF
_MACHINES = {3: "x86", 8: "MIPS", 20: "PowerPC", 21: "PowerPC64",
             22: "S/390", 40: "ARM", 62: "x86-64", 183: "AArch64",
             243: "RISC-V", 258: "LoongArch"}
# How many program headers, sections and dynamic entries a sane library
# has at most; more means a corrupt header (and would make checking slow).
_MAX_TABLE_ENTRIES = 1 << 16


class _BadElf(Exception):
    """Why a file is not a loadable shared object (internal)."""


class _ElfLayout(NamedTuple):
    """What the checks read of one class of ELF (32- or 64-bit)."""
    header: str          # struct format of e_type .. e_shstrndx
    header_size: int
    phdr: str            # p_type, p_offset, p_vaddr, p_filesz, p_memsz order
    phdr_size: int
    shdr: str
    shdr_size: int
    dyn: str
    dyn_size: int


_LAYOUTS = {
    1: _ElfLayout("HHIIIIIHHHHHH", 52, "IIIIIIII", 32, "IIIIIIIIII", 40,
                  "iI", 8),
    2: _ElfLayout("HHIQQQIHHHHHH", 64, "IIQQQQQQ", 56, "IIQQQQIIQQ", 64,
                  "qQ", 16),
}


@dataclasses.dataclass
class _ElfFacts:
    needed: List[str]
    rpath: List[str]
    runpath: List[str]


def _machine_name(machine: int) -> str:
    return _MACHINES.get(machine, f"machine {machine}")


@functools.lru_cache(maxsize=1)
def _host_elf() -> Tuple[int, int, Optional[int]]:
    """(class, byte order, machine) of this interpreter: what ``dlopen``
    here can load. The machine is read from the interpreter's own ELF
    header; None where that is not readable (then any machine passes)."""
    elf_class = 2 if struct.calcsize("P") == 8 else 1
    data = 1 if sys.byteorder == "little" else 2
    machine = None
    for candidate in ("/proc/self/exe", sys.executable):
        try:
            with open(candidate, "rb") as file:
                ident = file.read(20)
        except OSError:
            continue
        if len(ident) == 20 and ident[:4] == _ELF_MAGIC and \
                ident[4] == elf_class and ident[5] == data:
            order = "<" if data == 1 else ">"
            machine = struct.unpack(order + "H", ident[18:20])[0]
            break
    return elf_class, data, machine


def _read_at(file: Any, offset: int, size: int, what: str,
             file_size: int) -> bytes:
    if offset < 0 or size < 0 or offset + size > file_size:
        raise _BadElf(f"has {what} at bytes {offset}..{offset + size}, past "
                      f"the end of the file ({file_size} bytes): it is "
                      "truncated or corrupt")
    file.seek(offset)
    data = file.read(size)
    if len(data) != size:
        raise _BadElf(f"shrank while {what} was read")
    return data


def _inspect_elf(path: str) -> _ElfFacts:
    """Checks that ``path`` is a shared object this process can map without
    touching bytes past its end. Raises _BadElf with the reason."""
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            return _inspect_open_elf(file, size)
    except OSError as error:
        raise _BadElf(f"cannot be read: {error.strerror or error}") from None


def _inspect_open_elf(file: Any, size: int) -> _ElfFacts:
    if size < 16:
        raise _BadElf(f"is {size} bytes long, too short for an ELF header")
    ident = _read_at(file, 0, 16, "its ELF identification", size)
    if ident[:4] != _ELF_MAGIC:
        raise _BadElf("is not an ELF file (no \\x7fELF magic)")
    host_class, host_data, host_machine = _host_elf()
    elf_class, data, version = ident[4], ident[5], ident[6]
    if elf_class not in _LAYOUTS:
        raise _BadElf(f"has an invalid ELF class {elf_class}")
    if elf_class != host_class:
        raise _BadElf(f"is a {_ELFCLASS[elf_class]} ELF file; this Python "
                      f"is {_ELFCLASS[host_class]}")
    if data not in _ELFDATA:
        raise _BadElf(f"has an invalid ELF byte order {data}")
    if data != host_data:
        raise _BadElf(f"is a {_ELFDATA[data]}-endian ELF file; this machine "
                      f"is {_ELFDATA[host_data]}-endian")
    if version != 1:
        raise _BadElf(f"has ELF version {version}, expected 1")
    order = "<" if data == 1 else ">"
    layout = _LAYOUTS[elf_class]
    raw = _read_at(file, 16, layout.header_size - 16, "its ELF header", size)
    (e_type, machine, e_version, _entry, phoff, shoff, _flags, ehsize,
     phentsize, phnum, shentsize, shnum, _shstrndx) = struct.unpack(
         order + layout.header, raw)
    if e_type != _ET_DYN:
        raise _BadElf(f"is an ELF file of type {e_type}, not a shared "
                      f"object (type {_ET_DYN})")
    if host_machine is not None and machine != host_machine:
        raise _BadElf(f"is built for {_machine_name(machine)}; this Python "
                      f"runs on {_machine_name(host_machine)}")
    if e_version != 1:
        raise _BadElf(f"has ELF version {e_version} in its header")
    if ehsize != layout.header_size:
        raise _BadElf(f"declares an ELF header of {ehsize} bytes, expected "
                      f"{layout.header_size}")

    # Program headers: what the dynamic loader maps.
    if phnum == 0 or phnum == _PN_XNUM:
        raise _BadElf(f"has {phnum or 'no'} program headers")
    if phentsize != layout.phdr_size:
        raise _BadElf(f"declares program headers of {phentsize} bytes, "
                      f"expected {layout.phdr_size}")
    table = _read_at(file, phoff, phnum * phentsize,
                     "its program header table", size)
    segments = []
    dynamic = None
    for index in range(phnum):
        fields = struct.unpack_from(order + layout.phdr, table,
                                    index * phentsize)
        if elf_class == 2:
            p_type, _pflags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz, \
                _align = fields
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz, p_memsz, _pflags, \
                _align = fields
        if p_filesz and p_offset + p_filesz > size:
            raise _BadElf(f"has segment {index} (type {p_type}) at bytes "
                          f"{p_offset}..{p_offset + p_filesz}, past the end "
                          f"of the file ({size} bytes): it is truncated or "
                          "corrupt")
        if p_type == _PT_LOAD:
            if p_filesz > p_memsz:
                raise _BadElf(f"has segment {index} with more bytes in the "
                              f"file ({p_filesz}) than in memory ({p_memsz})")
            segments.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if not segments:
        raise _BadElf("has no loadable segment")
    if dynamic is None:
        raise _BadElf("has no dynamic section: not a shared library")

    # Section headers: not used by the dynamic loader, but a table past the
    # end of the file is the clearest sign of truncation.
    if shoff:
        if shentsize != layout.shdr_size:
            raise _BadElf(f"declares section headers of {shentsize} bytes, "
                          f"expected {layout.shdr_size}")
        count = shnum
        if count == 0:  # the real count is in section 0's sh_size
            first = _read_at(file, shoff, shentsize, "its section header "
                             "table", size)
            count = struct.unpack_from(order + layout.shdr, first)[5]
        if count > _MAX_TABLE_ENTRIES:
            raise _BadElf(f"declares {count} sections")
        sections = _read_at(file, shoff, count * shentsize,
                            "its section header table", size)
        for index in range(count):
            fields = struct.unpack_from(order + layout.shdr, sections,
                                        index * shentsize)
            sh_type, sh_offset, sh_size = fields[1], fields[4], fields[5]
            if sh_type != _SHT_NOBITS and sh_size and \
                    sh_offset + sh_size > size:
                raise _BadElf(f"has section {index} at bytes {sh_offset}.."
                              f"{sh_offset + sh_size}, past the end of the "
                              f"file ({size} bytes): it is truncated or "
                              "corrupt")

    return _dynamic_facts(file, size, order, layout, segments, dynamic)


def _dynamic_facts(file: Any, size: int, order: str, layout: _ElfLayout,
                   segments: List[Tuple[int, int, int]],
                   dynamic: Tuple[int, int]) -> _ElfFacts:
    """Reads DT_NEEDED, DT_RPATH and DT_RUNPATH, checking that the dynamic
    string table lies inside the file."""
    offset, length = dynamic
    count = min(length // layout.dyn_size, _MAX_TABLE_ENTRIES)
    table = _read_at(file, offset, count * layout.dyn_size,
                     "its dynamic section", size)
    entries = []
    strtab = strsz = None
    for index in range(count):
        tag, value = struct.unpack_from(order + layout.dyn, table,
                                        index * layout.dyn_size)
        if tag == _DT_NULL:
            break
        if tag == _DT_STRTAB:
            strtab = value
        elif tag == _DT_STRSZ:
            strsz = value
        elif tag in (_DT_NEEDED, _DT_RPATH, _DT_RUNPATH):
            entries.append((tag, value))
    facts = _ElfFacts([], [], [])
    if not entries:
        return facts
    if strtab is None or strsz is None:
        raise _BadElf("names libraries but has no dynamic string table")
    for vaddr, file_offset, file_size in segments:
        if vaddr <= strtab and strtab + strsz <= vaddr + file_size:
            strings = _read_at(file, file_offset + strtab - vaddr, strsz,
                               "its dynamic string table", size)
            break
    else:
        raise _BadElf("has a dynamic string table outside its loadable "
                      "segments")
    for tag, value in entries:
        end = strings.find(b"\0", value)
        if value >= len(strings) or end < 0:
            raise _BadElf("has a dynamic entry pointing outside its string "
                          "table")
        text = os.fsdecode(strings[value:end])
        if tag == _DT_NEEDED:
            facts.needed.append(text)
        elif tag == _DT_RPATH:
            facts.rpath += [d for d in text.split(":") if d]
        else:
            facts.runpath += [d for d in text.split(":") if d]
    return facts


def _expand_origin(directory: str, origin: str) -> Optional[str]:
    for token in ("$ORIGIN", "${ORIGIN}"):
        directory = directory.replace(token, origin)
    return None if "$" in directory else directory


def _dependency_paths(path: str, facts: _ElfFacts) -> List[str]:
    """The file the dynamic loader would take for each library ``path``
    needs, where its rpath, ``LD_LIBRARY_PATH`` or runpath finds one (the
    system's own directories are not searched: their libraries are the
    system's)."""
    origin = os.path.dirname(path)
    directories = [] if facts.runpath else list(facts.rpath)
    directories += os.environ.get("LD_LIBRARY_PATH", "").split(":")
    directories += facts.runpath
    expanded = [d for d in (_expand_origin(d, origin) for d in directories
                            if d) if d]
    found = []
    for name in facts.needed:
        if "/" in name:
            candidates = [name]
        else:
            candidates = [os.path.join(d, name) for d in expanded]
        for candidate in candidates:
            if os.path.isfile(candidate):
                found.append(candidate)
                break
    return found


def checksum_path(path: "os.PathLike[str] | str") -> str:
    """Where the checksum of the artifact at ``path`` lives."""
    return os.fspath(path) + CHECKSUM_SUFFIX


def file_sha256(path: "os.PathLike[str] | str") -> str:
    """The hex SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def process_umask() -> int:
    """The process's umask, read without changing it where Linux reports
    it (/proc/self/status), else by setting and restoring it."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def give_umask_mode(path: str, executable: bool = False) -> None:
    """Gives ``path`` (a temporary file about to be renamed into place) the
    mode a file created under the umask would have: 0666, or 0777 for
    ``executable``, less the umask. ``tempfile.mkstemp`` makes files 0600,
    which would keep a cache filled by one account (a build machine)
    unreadable by another (a serving account)."""
    os.chmod(path, (0o777 if executable else 0o666) & ~process_umask())


def write_checksum(path: "os.PathLike[str] | str",
                   digest: Optional[str] = None) -> str:
    """Writes ``<path>.sha256`` atomically (a temporary file renamed over
    it); returns the digest."""
    path = os.fspath(path)
    digest = digest or file_sha256(path)
    target = checksum_path(path)
    handle, temporary = tempfile.mkstemp(
        prefix=f".{os.path.basename(target)}.", suffix=".tmp",
        dir=os.path.dirname(os.path.abspath(target)))
    try:
        with os.fdopen(handle, "w", encoding="ascii") as file:
            file.write(f"{digest}  {os.path.basename(path)}\n")
            file.flush()
            os.fsync(file.fileno())
        give_umask_mode(temporary)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return digest


def checksum_problem(path: "os.PathLike[str] | str") -> Optional[str]:
    """Why the file at ``path`` does not match ``<path>.sha256``; None when
    it matches. Raises FileNotFoundError when there is no checksum."""
    path = os.fspath(path)
    with open(checksum_path(path), "rb") as file:
        text = file.read(4096)
    fields = text.split()
    expected = fields[0].decode("ascii", "replace").lower() if fields else ""
    if len(expected) != 64 or any(c not in "0123456789abcdef"
                                  for c in expected):
        return f"has a malformed checksum file {checksum_path(path)}"
    actual = file_sha256(path)
    if actual != expected:
        return (f"does not match its checksum ({os.path.getsize(path)} "
                f"bytes with sha256 {actual[:16]}..., expected "
                f"{expected[:16]}...): it is truncated or corrupt")
    return None


def _file_problem(path: str) -> Tuple[Optional[str], Optional[_ElfFacts]]:
    """Why ``path`` cannot safely be mapped (None when it can) and, when it
    can, what its dynamic section says. Checks the file itself, then its
    checksum if it has one, then its ELF structure."""
    try:
        info = os.stat(path)
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or error
        return f"cannot be read: {reason}", None
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file", None
    try:
        problem = checksum_problem(path)
    except FileNotFoundError:
        problem = None
    except OSError as error:
        problem = f"has a checksum that cannot be read: {error}"
    if problem:
        return problem, None
    try:
        return None, _inspect_elf(path)
    except _BadElf as error:
        return str(error), None


def validate_artifact(path: "os.PathLike[str] | str") -> None:
    """Checks that the file at ``path`` can be mapped by the dynamic loader
    without crashing this process (see the module's documentation), and so
    can the libraries it needs that its rpath, runpath or
    ``LD_LIBRARY_PATH`` finds. Raises :class:`pattn.LoadError` naming what
    is wrong. :func:`load` calls it before mapping anything."""
    path = os.path.abspath(os.fspath(path))
    problem, facts = _file_problem(path)
    if problem:
        raise LoadError(f"cannot load {path}: the file {problem}")
    assert facts is not None
    for dependency in _dependency_paths(path, facts):
        problem, _ = _file_problem(dependency)
        if problem:
            raise LoadError(f"cannot load {path}: the library it needs, "
                            f"{dependency}, {problem}")


def _index(value: Any) -> int:
    """``value`` as an exact integer (no floats, no bools)."""
    if isinstance(value, bool):
        raise TypeError("a bool is not a size or pointer")
    return operator.index(value)


@dataclasses.dataclass(frozen=True)
class ArgSpec:
    """One entry-point argument: its name, manifest dtype and shape, with
    -1 for a dynamic dimension, and whether the function may write it.

    ``name`` is the name the MLIR function gives the argument (its
    ``pattn.name`` attribute, else its ``loc("name")``, else its SSA name:
    ``%k_pages`` is ``k_pages``; ``argN`` when it has none), unique within
    the function. ``written`` is True for what the function may write
    (outputs, cache storage a write_cache or write_record fills) and False
    for what it only reads; a manifest that does not say (one written by an
    older pattn-compile) has every argument written, the safe assumption.
    """

    name: str
    dtype: str
    shape: Tuple[int, ...]
    written: bool = True
    #: Strides in elements of a page-strided buffer (pages a static stride
    #: apart, row-major inside: K or V viewed out of an engine's
    #: ``[blocks, 2, ...]`` allocation); None for a contiguous one.
    strides: Optional[Tuple[int, ...]] = None

    def shape_text(self) -> str:
        return "[" + ", ".join("?" if d < 0 else str(d)
                               for d in self.shape) + "]"

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{self.shape_text()}"


def _shape_text(shape: Sequence[Any]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _row_major_strides(shape: Sequence[int]) -> List[int]:
    # Strides in elements of a contiguous tensor. Computed rather than read
    # from the tensor, whose strides along size-1 dimensions are arbitrary
    # even when it is contiguous.
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(shape[i + 1], 1)
    return strides


def _device_key(device: Any) -> Tuple[str, Optional[int]]:
    return (device.type, device.index)


_DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "i8": 1, "i32": 4, "i64": 8,
                "f8E4M3FN": 1, "f8E5M2": 1}


def _limit_text(limit: int) -> str:
    return f"2^{limit.bit_length() - 1}"


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()

# The one keyword a call takes besides the arguments' names.
_STREAM_KEYWORD = "stream"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _bind_arguments(function: str, specs: Sequence[ArgSpec],
                    args: Sequence[Any], kwargs: Dict[str, Any]) -> List[Any]:
    """The tensors of a call in the manifest's order: ``args`` by position,
    then ``kwargs`` by the arguments' names, as Python binds a signature.
    Raises :class:`ArgumentTypeError` naming the function and the argument
    for too many, missing, unknown or doubly given arguments."""
    names = ", ".join(spec.name for spec in specs) or "none"
    count = len(specs)

    def stream_note(missing: Sequence[str]) -> str:
        # A short call of a function with an argument named "stream" may
        # have meant that tensor by stream=.
        if not missing or all(spec.name != _STREAM_KEYWORD for spec in specs):
            return ""
        return (f"; the argument named '{_STREAM_KEYWORD}' is passed by "
                f"position, since the keyword {_STREAM_KEYWORD}= is the CUDA "
                "stream of the launch")

    if len(args) > count:
        raise ArgumentTypeError(
            f"{function}() takes {_plural(count, 'argument')} ({names}), got "
            f"{len(args)}" + (" by position" if kwargs else ""))
    if not kwargs and len(args) < count:
        missing = [spec.name for spec in specs[len(args):]]
        raise ArgumentTypeError(
            f"{function}() takes {_plural(count, 'argument')} ({names}), got "
            f"{len(args)}" + stream_note(missing))
    if not kwargs:
        return list(args)

    positions = {spec.name: index for index, spec in enumerate(specs)}
    unknown = [key for key in kwargs if key not in positions]
    if unknown:
        listed = ", ".join(repr(key) for key in unknown)
        raise ArgumentTypeError(
            f"{function}() got {'an ' if len(unknown) == 1 else ''}unexpected "
            f"keyword argument{'' if len(unknown) == 1 else 's'} {listed}: "
            f"its arguments are {names} (by position or by name), and "
            f"{_STREAM_KEYWORD}= is the CUDA stream")
    bound: List[Any] = list(args) + [_MISSING] * (count - len(args))
    for key, value in kwargs.items():
        position = positions[key]
        if position < len(args):
            raise ArgumentTypeError(
                f"{function}() got multiple values for argument '{key}': "
                f"argument {position} by position and '{key}=' by name")
        bound[position] = value
    missing = [spec.name for spec, value in zip(specs, bound)
               if value is _MISSING]
    if missing:
        listed = ", ".join(repr(name) for name in missing)
        raise ArgumentTypeError(
            f"{function}() missing {len(missing)} required "
            f"argument{'' if len(missing) == 1 else 's'}: {listed} (it takes "
            f"{names})" + stream_note(missing))
    return bound


def _check_tensors(function: str, specs: Sequence[ArgSpec],
                   args: Sequence[Any], fake: bool = False
                   ) -> Tuple[List[Any], Any]:
    """Checks the tensors ``args`` (in the manifest's order) against
    ``specs``; returns the C arguments (without the stream) and the device
    they are on. Raises :class:`ArgumentError` naming the argument.

    ``fake=True`` checks what a tensor without storage can show (torch's
    meta and fake tensors, as a torch op's fake implementation sees them):
    dtype, rank, static sizes, one device (CUDA, or meta standing for one)
    and contiguity; dynamic sizes, which may be symbolic there, are not
    read, and no C arguments are returned."""

    def fail(message: str, error_class: type = ArgumentError) -> Any:
        return error_class(f"{function}: {message}")

    values: List[Any] = []
    first: Optional[Tuple[ArgSpec, Any]] = None
    first_key: Any = None
    devices = ("cuda", "meta") if fake else ("cuda",)
    for spec, arg in zip(specs, args):
        try:
            dtype = str(arg.dtype)
            raw_shape = tuple(arg.shape)
            device = arg.device
            device_key = _device_key(device)
            contiguous = bool(arg.is_contiguous())
            given_strides = tuple(arg.stride()) if spec.strides else ()
            raw_pointer = None if fake else arg.data_ptr()
        except Exception as error:  # noqa: BLE001 - any protocol failure
            raise fail(
                f"argument '{spec.name}' must be a tensor with "
                f"{_TENSOR_PROTOCOL}; got {type(arg).__name__} "
                f"({type(error).__name__}: {error})",
                ArgumentTypeError) from None
        pointer = 0
        if fake:
            shape: Tuple[Any, ...] = raw_shape
        else:
            try:
                shape = tuple(_index(d) for d in raw_shape)
                pointer = _index(raw_pointer)
            except TypeError:
                raise fail(
                    f"argument '{spec.name}' must have integer sizes and an "
                    f"integer data_ptr(); got shape {raw_shape!r:.200} and "
                    f"data_ptr() {raw_pointer!r:.100}",
                    ArgumentTypeError) from None

        accepted = _TORCH_DTYPES[spec.dtype]
        if dtype not in accepted:
            raise fail(
                f"argument '{spec.name}' must have dtype {spec.dtype} "
                f"({' or '.join(accepted)}), got {dtype}")
        if len(shape) != len(spec.shape):
            raise fail(
                f"argument '{spec.name}' must have rank {len(spec.shape)} "
                f"(shape {spec.shape_text()}), got shape "
                f"{_shape_text(shape)}")
        for dim, (expected, actual) in enumerate(zip(spec.shape, shape)):
            if not fake and not 0 <= actual <= _INT64_MAX:
                raise fail(
                    f"dimension {dim} of argument '{spec.name}' is "
                    f"{actual}, outside [0, 2^63) (shape "
                    f"{_shape_text(shape)})")
            if expected >= 0 and expected != actual:
                raise fail(
                    f"dimension {dim} of argument '{spec.name}' must be "
                    f"{expected} (shape {spec.shape_text()}), got shape "
                    f"{_shape_text(shape)}")
        strides: List[int] = []
        if not fake:
            strides = list(spec.strides) if spec.strides else \
                _row_major_strides(shape)
            elements = 1
            for d, s in zip(shape, strides):  # one past the last element
                elements += (d - 1) * s if d else 0
            if 0 in shape:
                elements = 0
            if (any(s > _INT64_MAX for s in strides) or
                    elements * _DTYPE_BYTES[spec.dtype] > _INT64_MAX):
                raise fail(
                    f"argument '{spec.name}' of shape {_shape_text(shape)} is "
                    "too large: its strides and size in bytes must be below "
                    "2^63")
        if device.type not in devices:
            raise fail(f"argument '{spec.name}' is on {device}, expected a "
                       "CUDA device")
        if first is None:
            first = (spec, device)
            first_key = device_key
        elif device_key != first_key:
            raise fail(
                f"argument '{spec.name}' is on {device}, but "
                f"'{first[0].name}' is on {first[1]}; all arguments must "
                "be on one device")
        if spec.strides:
            # Strides along dimensions of one element are arbitrary.
            # (Fake tensors may have symbolic sizes: only ints are read.)
            if any(isinstance(size, int) and size > 1 and
                   isinstance(got, int) and got != want
                   for size, got, want in
                   zip(shape, given_strides, spec.strides)):
                raise fail(
                    f"argument '{spec.name}' must have strides "
                    f"{_shape_text(spec.strides)} (pages "
                    f"{spec.strides[0]} elements apart, row-major inside), "
                    f"got strides {_shape_text(given_strides)}")
        elif not contiguous:
            raise fail(f"argument '{spec.name}' must be contiguous "
                       "(use .contiguous())")
        if fake:
            continue
        if not 0 <= pointer < _POINTER_LIMIT:
            raise fail(
                f"argument '{spec.name}' has data pointer {pointer:#x}, "
                f"outside [0, {_limit_text(_POINTER_LIMIT)})")
        if pointer == 0 and all(d > 0 for d in shape):
            raise fail(f"argument '{spec.name}' has a null data pointer")

        values += [pointer, pointer, 0, *shape, *strides]
    return values, (first[1] if first is not None else None)


class Function:
    """A callable entry point of a loaded artifact.

    ``function(*tensors, stream=None, **named_tensors)`` takes the
    arguments as a Python function would: by position in the manifest's
    order, then by name (the names the MLIR function gives its arguments:
    ``decode_step(k_pages, v_pages, query=q, out=o)``). Too many, missing,
    unknown or doubly given arguments raise :class:`pattn.ArgumentTypeError`
    (also a ``TypeError``) naming them. Then every tensor is checked against
    the manifest (dtype, rank, static dimensions, one CUDA device,
    contiguity, sizes that fit the C signature's int64 and pointers that fit
    a pointer), raising :class:`pattn.ArgumentError` naming the argument
    without launching anything if one does not match (an object that is not
    a tensor is an :class:`pattn.ArgumentTypeError`); then the entry point
    runs on ``stream`` and a failure raises :class:`pattn.LaunchError`. Work
    is enqueued on the stream; the call does not wait for it.

    ``stream`` is keyword-only and always the launch stream: an int handle
    in [0, 2^64) or an object with ``cuda_stream``, such as
    ``torch.cuda.Stream``; default: torch's current stream on the tensors'
    device. An MLIR argument that is itself named ``stream`` is passed by
    position (``stream=`` still names the CUDA stream, never that tensor).
    """

    def __init__(self, module: "Module", name: str,
                 c_function: Any, args: Sequence[ArgSpec]):
        self.name = name
        self.args: Tuple[ArgSpec, ...] = tuple(args)
        self._module = module
        self._c_function = c_function
        argtypes: List[Any] = []
        for spec in self.args:
            argtypes += [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
            argtypes += [ctypes.c_int64] * (2 * len(spec.shape))
        argtypes.append(ctypes.c_void_p)  # the stream
        c_function.argtypes = argtypes
        c_function.restype = ctypes.c_int32

    @property
    def arg_names(self) -> Tuple[str, ...]:
        """The arguments' names, in order (the keywords a call takes)."""
        return tuple(spec.name for spec in self.args)

    def __repr__(self) -> str:
        return (f"<pattn.Function {self.name}("
                f"{', '.join(str(spec) for spec in self.args)})>")

    def __call__(self, /, *args: Any, stream: Any = None,
                 **kwargs: Any) -> None:
        ordered = _bind_arguments(self.name, self.args, args, kwargs)
        values, device = _check_tensors(self.name, self.args, ordered)
        handle = self._stream_handle(stream, device)
        torch = sys.modules.get("torch")
        # The runtime launches in the calling thread's current CUDA context;
        # make it the tensors' device's (PyTorch's primary context there).
        if torch is not None and isinstance(device, torch.device):
            guard = torch.cuda.device(device)
        else:
            guard = contextlib.nullcontext()
        with guard:
            values.append(handle)
            status = self._c_function(*values)
        if status != 0:
            raise self._module._launch_error(self.name, status)

    def check_fake(self, /, *args: Any, **kwargs: Any) -> None:
        """Checks a call as far as tensors without storage allow (torch's
        meta and fake tensors): binds the arguments like a call, then checks
        dtype, rank, static sizes, one device and contiguity, raising what
        the call would. Launches nothing; the torch op's fake implementation
        (:meth:`pattn.Module.torch_ops`) is this check."""
        ordered = _bind_arguments(self.name, self.args, args, kwargs)
        _check_tensors(self.name, self.args, ordered, fake=True)

    def _fail(self, message: str, error_class: type = ArgumentError) -> Any:
        return error_class(f"{self.name}: {message}")

    def _stream_handle(self, stream: Any, device: Any) -> int:
        if stream is None:
            try:
                import torch
            except ImportError:
                raise self._fail("stream= is required when torch is not "
                                 "installed") from None
            try:
                handle = torch.cuda.current_stream(device).cuda_stream
            except Exception as error:  # noqa: BLE001 - torch's own failure
                raise self._fail(
                    f"stream=None needs torch's current CUDA stream on "
                    f"{device}, which torch could not give "
                    f"({type(error).__name__}: {error}); pass stream=") \
                    from None
            return self._checked_handle(handle, stream)
        try:
            stream_device = getattr(stream, "device", None)
            stream_key = (None if stream_device is None
                          else _device_key(stream_device))
            handle = getattr(stream, "cuda_stream", stream)
        except Exception as error:  # noqa: BLE001 - a broken stream object
            raise self._fail(
                "stream must be an int handle or have a 'cuda_stream' "
                f"attribute; reading {type(stream).__name__} failed "
                f"({type(error).__name__}: {error})",
                ArgumentTypeError) from None
        if (device is not None and stream_key is not None and
                stream_key != _device_key(device)):
            raise self._fail(f"the stream is on {stream_device}, but the "
                             f"arguments are on {device}")
        return self._checked_handle(handle, stream)

    def _checked_handle(self, handle: Any, stream: Any) -> int:
        if isinstance(handle, bool) or not isinstance(handle, int):
            raise self._fail(
                "stream must be an int handle or have a 'cuda_stream' "
                f"attribute, got {type(stream).__name__}", ArgumentTypeError)
        if not 0 <= handle < _POINTER_LIMIT:
            raise self._fail(
                f"stream handle {handle} is outside [0, "
                f"{_limit_text(_POINTER_LIMIT)}): a CUDA stream is a "
                "pointer (0 is the default stream)")
        return handle


class Functions(collections.abc.Mapping):
    """The entry points of a :class:`Module` by name (a read-only mapping).
    A missing name raises :class:`pattn.UnknownFunctionError`, which is
    also a ``KeyError``."""

    def __init__(self, module_path: str, functions: Dict[str, Function]):
        self._path = module_path
        self._functions = dict(functions)

    def __getitem__(self, name: str) -> Function:
        try:
            return self._functions[name]
        except (KeyError, TypeError):
            raise UnknownFunctionError(
                f"pattn artifact {self._path} has no function {name!r:.200} "
                f"(it has: {', '.join(self._functions) or 'none'})") \
                from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def __repr__(self) -> str:
        return f"<pattn.Functions {', '.join(self._functions) or 'none'}>"


class FunctionNamespace:
    """``module.fn``: every entry point as an attribute and nothing else, so
    ``module.fn.path`` is the function ``path`` even though ``module.path``
    is the artifact's path. Function names win over every attribute of
    this object."""

    __slots__ = ("_pattn_functions",)

    def __init__(self, functions: Functions):
        object.__setattr__(self, "_pattn_functions", functions)

    def __getattribute__(self, name: str) -> Any:
        functions = object.__getattribute__(self, "_pattn_functions")
        if name in functions:
            return functions[name]
        if name.startswith("__") and name.endswith("__"):
            return object.__getattribute__(self, name)
        return functions[name]  # raises UnknownFunctionError

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("the functions of a pattn module are read-only")

    def __dir__(self) -> List[str]:
        return sorted(object.__getattribute__(self, "_pattn_functions"))

    def __repr__(self) -> str:
        functions = object.__getattribute__(self, "_pattn_functions")
        return f"<pattn functions: {', '.join(functions) or 'none'}>"


class Module:
    """A loaded artifact.

    Its entry points live in their own namespace, which no attribute of the
    module can hide: ``module.functions[name]`` (a read-only mapping),
    ``module[name]`` and ``module.fn.<name>`` always give the
    :class:`Function`. As a shortcut, ``module.<name>`` gives it too, unless
    ``name`` is one of the module's own attributes (``path``, ``chips``,
    ``functions``, ``fn``, ``take_device_errors``, ... — anything in
    ``dir(pattn.Module)`` or set on the instance), which always wins: for an
    entry point named ``path`` use ``module.fn.path`` or ``module["path"]``.
    A name that is neither raises :class:`pattn.UnknownFunctionError` (also
    an ``AttributeError``). ``chips`` lists the chips the artifact holds
    kernels for.
    """

    def __init__(self, path: "os.PathLike[str] | str"):
        if isinstance(path, bool) or not isinstance(path, (str, bytes,
                                                           os.PathLike)):
            raise _LoadArgumentTypeError(
                "pattn.load: argument 'path' must be a str, bytes or "
                f"os.PathLike naming an artifact, got {type(path).__name__}")
        try:
            self.path = os.path.abspath(os.fsdecode(os.fspath(path)))
        except (TypeError, ValueError) as error:
            raise _LoadArgumentTypeError(
                f"pattn.load: argument 'path' is not a usable path "
                f"({error})") from None
        if "\0" in self.path:
            raise _LoadArgumentTypeError(
                f"pattn.load: argument 'path' {self.path!r:.200} holds a NUL "
                "character")
        self.chips: Tuple[str, ...] = ()
        self._manifest_text = b""
        self.functions: Functions = Functions(self.path, {})
        self.fn = FunctionNamespace(self.functions)
        # Nothing is mapped before the file passed every check: a truncated
        # or corrupt library would crash the interpreter inside dlopen.
        validate_artifact(self.path)
        try:
            self._library = ctypes.CDLL(self.path)
        except OSError as error:
            raise LoadError(f"cannot load {self.path}: {error}") from None
        manifest = self._read_manifest()
        self._status_string = self._runtime_function(
            "pattnStatusString", [ctypes.c_int32])
        self._last_error_message = self._runtime_function(
            "pattnRuntimeLastErrorMessage", [])
        self._take_device_errors = self._runtime_function(
            "pattnRuntimeTakeDeviceErrors", [], ctypes.c_int32)
        functions: Dict[str, Function] = {}
        for entry in manifest["functions"]:
            c_function = self._symbol(entry["symbol"])
            if c_function is None:
                raise LoadError(
                    f"{self.path}: the manifest names entry point "
                    f"'{entry['symbol']}', which the library does not export")
            functions[entry["name"]] = Function(
                self, entry["name"], c_function, entry["args"])
        self.chips = tuple(manifest["chips"])
        self.functions = Functions(self.path, functions)
        self.fn = FunctionNamespace(self.functions)

    def __getattr__(self, name: str) -> Function:
        # Only reached when normal lookup fails: the module's own
        # attributes always win over a function of the same name.
        functions = self.__dict__.get("functions")
        if functions is not None and name in functions:
            return functions[name]
        known = ", ".join(functions) if functions else "none"
        raise UnknownFunctionError(
            f"pattn artifact {self.__dict__.get('path')} has no function "
            f"'{name}' (it has: {known})")

    def __getitem__(self, name: str) -> Function:
        return self.functions[name]

    def __contains__(self, name: object) -> bool:
        return name in self.functions

    def __iter__(self) -> Iterator[str]:
        """The names of the functions (as ``module.functions``)."""
        return iter(self.functions)

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self.functions))

    def __repr__(self) -> str:
        return (f"<pattn.Module {self.path}: "
                f"{', '.join(self.functions) or 'no functions'}>")

    def _symbol(self, name: str) -> Any:
        # Item access, not getattr: getattr refuses dunder names and caches
        # one function object per name (shared argtypes).
        try:
            return self._library[name]
        except (AttributeError, TypeError, ValueError):
            return None

    @_rejects_bad_calls(ArgumentTypeError, "pattn.Module.torch_ops")
    def torch_ops(self, namespace: Optional[str] = None) -> "TorchOps":
        """Registers every function of the artifact as a torch custom op,
        ``torch.ops.<namespace>.<function>``, and returns them as a
        :class:`pattn.TorchOps` (needs torch >= 2.4; pattn imports torch
        only here).

        Each op's schema comes from the manifest: one ``Tensor`` per
        argument under the argument's name, ``Tensor(a!)`` for those the
        function writes, returning ``()``; so torch.compile and
        functionalization see the mutations. Its CUDA kernel calls the
        :class:`Function` on torch's current stream; its fake (meta)
        implementation runs :meth:`Function.check_fake` and returns None, so
        FakeTensorMode, meta tensors and ``torch.compile(fullgraph=True)``
        trace it without a graph break.

        ``namespace`` defaults to ``pattn_<12 hex digits>``, a hash of the
        manifest and the artifact's real path: the same artifact gets the
        same namespace in every process. A namespace of one's own must be
        an ASCII identifier. Registering again (the same artifact loaded
        twice, or :meth:`torch_ops` called twice) reuses the ops of the same
        schema and points them at this module; an op of the same name but
        another schema in the namespace, or one pattn did not register, is
        a :class:`pattn.TorchOpError`, and nothing is registered then."""
        from ._torch_ops import register
        return register(self, namespace)

    def take_device_errors(self) -> int:
        """The device error bits kernels raised since the last call, and
        clears them (process-wide). Read them after synchronizing the
        streams of the calls they should cover: kernels raise them without
        a host sync. 0 when none; see :data:`DEVICE_ERRORS`."""
        return int(self._take_device_errors())

    def check_device_errors(self) -> None:
        """Raises :class:`pattn.DeviceError` naming every device error
        raised since the last check (see :meth:`take_device_errors`)."""
        bits = self.take_device_errors()
        if bits:
            reasons = [text for bit, text in DEVICE_ERRORS.items()
                       if bits & bit]
            unknown = bits & ~sum(DEVICE_ERRORS)
            if unknown:
                reasons.append(f"unknown device error bits {unknown:#x}")
            raise DeviceError(bits, reasons)

    def _runtime_function(self, name: str, argtypes: List[Any],
                          restype: Any = ctypes.c_char_p) -> Any:
        function = self._symbol(name)
        if function is None:
            raise LoadError(
                f"{self.path}: {name} not found; a pattn artifact links "
                "libpattn_runtime.so, which exports it")
        function.argtypes = argtypes
        function.restype = restype
        return function

    def _read_manifest(self) -> Dict[str, Any]:
        manifest_function = self._symbol("pattn_manifest")
        if manifest_function is None:
            raise LoadError(f"{self.path} is not a pattn artifact: it does "
                            "not export pattn_manifest")
        manifest_function.argtypes = []
        manifest_function.restype = ctypes.c_char_p
        text = manifest_function()
        if text is None:
            raise LoadError(f"{self.path}: pattn_manifest() returned null")
        if len(text) > _MAX_MANIFEST_BYTES:
            raise LoadError(f"{self.path}: bad manifest: {len(text)} bytes, "
                            f"more than {_MAX_MANIFEST_BYTES}")
        self._manifest_text = bytes(text)
        try:
            return _parse_manifest(json.loads(text.decode("utf-8")))
        except RecursionError:
            raise LoadError(f"{self.path}: bad manifest: nested too deeply "
                            "(a manifest is a few levels deep)") from None
        except (UnicodeDecodeError, ValueError) as error:
            raise LoadError(f"{self.path}: bad manifest: {error}") from None

    def _launch_error(self, function: str, status: int) -> LaunchError:
        name = self._status_string(status).decode("utf-8", "replace")
        detail = self._last_error_message().decode("utf-8", "replace")
        if status == _PATTN_ERROR_NO_BINARY_FOR_DEVICE and self.chips:
            detail += f" (this artifact holds {', '.join(self.chips)})"
        return LaunchError(function, status, name, detail)


# Manifests are a few KiB; a bound keeps a corrupt one from exhausting
# memory in the parser.
_MAX_MANIFEST_BYTES = 64 << 20

_short_repr = reprlib.Repr()
_short_repr.maxlevel = 3
_short_repr.maxstring = 60
_short_repr.maxother = 60


def _parse_manifest(manifest: Any) -> Dict[str, Any]:
    """Checks the manifest's structure; returns it with ``args`` turned into
    :class:`ArgSpec` lists. Raises ValueError naming what is wrong."""

    def expect(condition: bool, what: str) -> None:
        if not condition:
            raise ValueError(what)

    def is_size(d: Any) -> bool:
        return (isinstance(d, int) and not isinstance(d, bool) and
                -1 <= d <= _INT64_MAX)

    expect(isinstance(manifest, dict), "not a JSON object")
    version = manifest.get("version")
    expect(version == MANIFEST_VERSION and not isinstance(version, bool),
           f"version {_short_repr.repr(version)} is not supported (this "
           f"pattn reads version {MANIFEST_VERSION})")
    chips = manifest.get("chips", [])
    expect(isinstance(chips, list) and
           all(isinstance(chip, str) for chip in chips),
           "'chips' must be a list of strings")
    functions = manifest.get("functions")
    expect(isinstance(functions, list), "'functions' must be a list")

    parsed = []
    names = set()
    for entry in functions:
        expect(isinstance(entry, dict) and isinstance(entry.get("name"), str)
               and isinstance(entry.get("symbol"), str) and
               isinstance(entry.get("args"), list),
               f"function entry {_short_repr.repr(entry)} needs a name, a "
               "symbol and args")
        expect(entry["name"] not in names,
               f"function '{entry['name']}' is listed twice")
        names.add(entry["name"])
        args = []
        arg_names = set()
        for arg in entry["args"]:
            expect(isinstance(arg, dict) and isinstance(arg.get("name"), str)
                   and isinstance(arg.get("shape"), list) and
                   all(is_size(d) for d in arg["shape"]),
                   f"argument {_short_repr.repr(arg)} of '{entry['name']}' "
                   "needs a name and a shape of sizes below 2^63 (-1 for "
                   "dynamic)")
            expect(arg["name"] not in arg_names,
                   f"argument '{arg['name']}' of '{entry['name']}' is listed "
                   "twice: argument names are unique within a function")
            arg_names.add(arg["name"])
            dtype = arg.get("dtype")
            expect(isinstance(dtype, str) and dtype in _TORCH_DTYPES,
                   f"argument '{arg['name']}' of '{entry['name']}' has dtype "
                   f"{_short_repr.repr(dtype)}; supported: "
                   f"{', '.join(_TORCH_DTYPES)}")
            # Absent in manifests of older compilers: every argument may be
            # written, the assumption that cannot be wrong.
            written = arg.get("written", True)
            expect(isinstance(written, bool),
                   f"argument '{arg['name']}' of '{entry['name']}' has "
                   f"'written' {_short_repr.repr(written)}; it must be true or "
                   "false")
            strides = arg.get("strides")
            expect(strides is None or (
                isinstance(strides, list) and
                len(strides) == len(arg["shape"]) and
                all(is_size(d) and d >= 0 for d in strides)),
                   f"argument '{arg['name']}' of '{entry['name']}' has "
                   f"strides {_short_repr.repr(strides)}; they must be one "
                   "size below 2^63 per dimension")
            args.append(ArgSpec(arg["name"], arg["dtype"],
                                tuple(arg["shape"]), written,
                                None if strides is None else tuple(strides)))
        parsed.append({"name": entry["name"], "symbol": entry["symbol"],
                       "args": args})
    return {"version": version, "chips": chips, "functions": parsed}


@_rejects_bad_calls(_LoadArgumentTypeError, "pattn.load")
def load(path: "os.PathLike[str] | str") -> Module:
    """Loads the artifact at ``path`` and reads its manifest. Raises
    :class:`pattn.LoadError` if it is not a usable pattn artifact (checked
    before anything is mapped: see :func:`validate_artifact`), or if
    ``path`` is not a path (then the error is also a ``TypeError``)."""
    return Module(path)
