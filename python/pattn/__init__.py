"""pattn from Python: compile paged-attention MLIR and run it on torch tensors.

    import pattn
    path = pattn.compile("examples/decode_int4.mlir", chips=("sm_90a",))
    module = pattn.load(path)
    module.decode_step(k_pages, v_pages, ..., out)   # on torch's current stream

``compile`` runs the ``pattn-compile`` executable; ``load`` opens the
artifact with ctypes and reads its manifest; calling a function checks the
tensors against the manifest, then launches on a CUDA stream. The package is
pure Python (ctypes, json and the standard library); torch is imported only
when a call needs torch's current stream or device.

Errors all derive from :class:`pattn.Error`: :class:`CompileError`,
:class:`LoadError`, :class:`ArgumentError` (also a ``ValueError``) and
:class:`LaunchError` (also a ``RuntimeError``).
"""

from ._compiler import compile, find_compiler
from ._errors import (ArgumentError, CompileError, DeviceError, Error,
                      LaunchError, LoadError)
from ._loader import (DEVICE_ERROR_SLOT_OUT_OF_RANGE, DEVICE_ERRORS, ArgSpec,
                      Function, Module, load)

__all__ = [
    "ArgSpec", "ArgumentError", "CompileError", "DEVICE_ERRORS",
    "DEVICE_ERROR_SLOT_OUT_OF_RANGE", "DeviceError", "Error", "Function",
    "LaunchError", "LoadError", "Module", "compile", "find_compiler", "load",
]
