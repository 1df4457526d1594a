"""Loading pattn artifacts and calling their entry points.

An artifact is a shared library written by ``pattn-compile``. It exports
``const char *pattn_manifest(void)``, a JSON description of its entry points::

    {"version": 1, "chips": ["sm_80", "sm_90a"],
     "functions": [{"name": "decode_step", "symbol": "decode_step",
                    "args": [{"name": "k_pages", "dtype": "i8",
                              "shape": [-1, 16, 8, 64]}, ...]}]}

and, per entry point, a C function that takes each memref argument in MLIR's
expanded form (allocated pointer, aligned pointer, offset, sizes, strides)
followed by a CUDA stream, and returns a ``pattnStatus`` (0 on success).

Arguments are checked against the manifest before anything is launched.
After a failed call the runtime's message is read through the artifact's
own handle: the artifact links ``libpattn_runtime.so``, and ``dlsym`` on a
library also searches its dependencies, so this finds the very copy of the
runtime the artifact called (the one holding this thread's error), however
rpath or ``LD_LIBRARY_PATH`` located it, without ``RTLD_GLOBAL``.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._errors import ArgumentError, DeviceError, LaunchError, LoadError

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

#: What each device error bit means.
DEVICE_ERRORS = {
    DEVICE_ERROR_SLOT_OUT_OF_RANGE:
        "a cache write rejected its whole batch: a slot was below -1 or "
        "past the cache's pages (nothing of that batch was written)",
}

_TENSOR_PROTOCOL = "data_ptr(), shape, dtype, device and is_contiguous()"


@dataclasses.dataclass(frozen=True)
class ArgSpec:
    """One entry-point argument: its name, manifest dtype and shape, with
    -1 for a dynamic dimension."""

    name: str
    dtype: str
    shape: Tuple[int, ...]

    def shape_text(self) -> str:
        return "[" + ", ".join("?" if d < 0 else str(d)
                               for d in self.shape) + "]"

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{self.shape_text()}"


def _shape_text(shape: Sequence[int]) -> str:
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


class Function:
    """A callable entry point of a loaded artifact.

    ``function(*tensors, stream=None)`` checks every tensor against the
    manifest (count, dtype, rank, static dimensions, one CUDA device,
    contiguity) and raises :class:`pattn.ArgumentError` without launching
    anything if one does not match; then it runs the entry point on
    ``stream`` (an int handle or an object with ``cuda_stream``, such as
    ``torch.cuda.Stream``; default: torch's current stream on the tensors'
    device) and raises :class:`pattn.LaunchError` if it fails. Work is
    enqueued on the stream; the call does not wait for it.
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

    def __repr__(self) -> str:
        return (f"<pattn.Function {self.name}("
                f"{', '.join(str(spec) for spec in self.args)})>")

    def __call__(self, *args: Any, stream: Any = None) -> None:
        values, device = self._expand(args)
        torch = sys.modules.get("torch")
        # The runtime launches in the calling thread's current CUDA context;
        # make it the tensors' device's (PyTorch's primary context there).
        if torch is not None and isinstance(device, torch.device):
            guard = torch.cuda.device(device)
        else:
            guard = contextlib.nullcontext()
        with guard:
            values.append(self._stream_handle(stream, device))
            status = self._c_function(*values)
        if status != 0:
            raise self._module._launch_error(self.name, status)

    def _fail(self, message: str) -> ArgumentError:
        return ArgumentError(f"{self.name}: {message}")

    def _expand(self, args: Sequence[Any]) -> Tuple[List[Any], Any]:
        """Checks ``args`` and returns the C arguments (without the stream)
        and the device they are on."""
        if len(args) != len(self.args):
            names = ", ".join(spec.name for spec in self.args)
            plural = "" if len(self.args) == 1 else "s"
            raise ArgumentError(
                f"{self.name}() takes {len(self.args)} argument{plural} "
                f"({names}), got {len(args)}")

        values: List[Any] = []
        first: Optional[Tuple[ArgSpec, Any]] = None
        for spec, arg in zip(self.args, args):
            try:
                dtype = str(arg.dtype)
                shape = tuple(int(d) for d in arg.shape)
                device = arg.device
                contiguous = arg.is_contiguous()
                pointer = int(arg.data_ptr())
            except (AttributeError, TypeError) as error:
                raise self._fail(
                    f"argument '{spec.name}' must be a tensor with "
                    f"{_TENSOR_PROTOCOL}; got {type(arg).__name__} "
                    f"({error})") from None

            accepted = _TORCH_DTYPES[spec.dtype]
            if dtype not in accepted:
                raise self._fail(
                    f"argument '{spec.name}' must have dtype {spec.dtype} "
                    f"({' or '.join(accepted)}), got {dtype}")
            if len(shape) != len(spec.shape):
                raise self._fail(
                    f"argument '{spec.name}' must have rank {len(spec.shape)} "
                    f"(shape {spec.shape_text()}), got shape "
                    f"{_shape_text(shape)}")
            for dim, (expected, actual) in enumerate(zip(spec.shape, shape)):
                if expected >= 0 and expected != actual:
                    raise self._fail(
                        f"dimension {dim} of argument '{spec.name}' must be "
                        f"{expected} (shape {spec.shape_text()}), got shape "
                        f"{_shape_text(shape)}")
            if device.type != "cuda":
                raise self._fail(f"argument '{spec.name}' is on {device}, "
                                 "expected a CUDA device")
            if first is None:
                first = (spec, device)
            elif _device_key(device) != _device_key(first[1]):
                raise self._fail(
                    f"argument '{spec.name}' is on {device}, but "
                    f"'{first[0].name}' is on {first[1]}; all arguments must "
                    "be on one device")
            if not contiguous:
                raise self._fail(f"argument '{spec.name}' must be contiguous "
                                 "(use .contiguous())")
            if pointer == 0 and all(d > 0 for d in shape):
                raise self._fail(
                    f"argument '{spec.name}' has a null data pointer")

            values += [pointer, pointer, 0, *shape, *_row_major_strides(shape)]
        return values, (first[1] if first is not None else None)

    def _stream_handle(self, stream: Any, device: Any) -> int:
        if stream is None:
            try:
                import torch
            except ImportError:
                raise self._fail("stream= is required when torch is not "
                                 "installed") from None
            return torch.cuda.current_stream(device).cuda_stream
        stream_device = getattr(stream, "device", None)
        if (device is not None and stream_device is not None and
                _device_key(stream_device) != _device_key(device)):
            raise self._fail(f"the stream is on {stream_device}, but the "
                             f"arguments are on {device}")
        handle = getattr(stream, "cuda_stream", stream)
        if not isinstance(handle, int):
            raise self._fail(
                "stream must be an int handle or have a 'cuda_stream' "
                f"attribute, got {type(stream).__name__}")
        return handle


class Module:
    """A loaded artifact: ``functions`` maps each entry point's name to its
    :class:`Function`, which is also an attribute (``module.decode_step``);
    ``chips`` lists the chips the artifact holds kernels for."""

    def __init__(self, path: "os.PathLike[str] | str"):
        self.path = os.path.abspath(os.fspath(path))
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
        self.chips: Tuple[str, ...] = tuple(manifest["chips"])
        self.functions: Dict[str, Function] = {}
        for entry in manifest["functions"]:
            c_function = self._symbol(entry["symbol"])
            if c_function is None:
                raise LoadError(
                    f"{self.path}: the manifest names entry point "
                    f"'{entry['symbol']}', which the library does not export")
            self.functions[entry["name"]] = Function(
                self, entry["name"], c_function, entry["args"])

    def __getattr__(self, name: str) -> Function:
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(
            f"pattn artifact {self.__dict__.get('path')} has no function "
            f"'{name}' (it has: {', '.join(functions) or 'none'})")

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self.functions))

    def __repr__(self) -> str:
        return (f"<pattn.Module {self.path}: "
                f"{', '.join(self.functions) or 'no functions'}>")

    def _symbol(self, name: str) -> Any:
        try:
            return getattr(self._library, name)
        except AttributeError:
            return None

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
        try:
            return _parse_manifest(json.loads(text.decode("utf-8")))
        except (UnicodeDecodeError, ValueError) as error:
            raise LoadError(f"{self.path}: bad manifest: {error}") from None

    def _launch_error(self, function: str, status: int) -> LaunchError:
        name = self._status_string(status).decode("utf-8", "replace")
        detail = self._last_error_message().decode("utf-8", "replace")
        if status == _PATTN_ERROR_NO_BINARY_FOR_DEVICE and self.chips:
            detail += f" (this artifact holds {', '.join(self.chips)})"
        return LaunchError(function, status, name, detail)


def _parse_manifest(manifest: Any) -> Dict[str, Any]:
    """Checks the manifest's structure; returns it with ``args`` turned into
    :class:`ArgSpec` lists. Raises ValueError naming what is wrong."""

    def expect(condition: bool, what: str) -> None:
        if not condition:
            raise ValueError(what)

    expect(isinstance(manifest, dict), "not a JSON object")
    version = manifest.get("version")
    expect(version == MANIFEST_VERSION,
           f"version {version!r} is not supported (this pattn reads "
           f"version {MANIFEST_VERSION})")
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
               f"function entry {entry!r} needs a name, a symbol and args")
        expect(entry["name"] not in names,
               f"function '{entry['name']}' is listed twice")
        names.add(entry["name"])
        args = []
        for arg in entry["args"]:
            expect(isinstance(arg, dict) and isinstance(arg.get("name"), str)
                   and isinstance(arg.get("shape"), list) and
                   all(isinstance(d, int) and d >= -1 for d in arg["shape"]),
                   f"argument {arg!r} of '{entry['name']}' needs a name and "
                   "a shape of sizes (-1 for dynamic)")
            expect(arg.get("dtype") in _TORCH_DTYPES,
                   f"argument '{arg['name']}' of '{entry['name']}' has dtype "
                   f"{arg.get('dtype')!r}; supported: "
                   f"{', '.join(_TORCH_DTYPES)}")
            args.append(ArgSpec(arg["name"], arg["dtype"],
                                tuple(arg["shape"])))
        parsed.append({"name": entry["name"], "symbol": entry["symbol"],
                       "args": args})
    return {"version": version, "chips": chips, "functions": parsed}


def load(path: "os.PathLike[str] | str") -> Module:
    """Loads the artifact at ``path`` and reads its manifest. Raises
    :class:`pattn.LoadError` if it is not a usable pattn artifact."""
    return Module(path)
