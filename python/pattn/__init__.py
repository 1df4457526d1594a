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

A module's entry points have their own namespace, which none of the
module's attributes can hide: ``module.functions[name]``, ``module[name]`` and
``module.fn.<name>`` always work; ``module.<name>`` is a shortcut that works
unless the name is one of the module's own attributes (``path``, ``chips``,
``functions``, ``fn``, ...).

``load`` checks a file before ctypes maps it (size, ELF header and tables
against the file and the host, the checksum the artifact cache stores beside
its entries), so a truncated library is a :class:`LoadError`, not a crash;
the cache rebuilds a corrupt entry, saying so once with a
:class:`CacheWarning`.

Errors all derive from :class:`pattn.Error`: :class:`CompileError`,
:class:`LoadError`, :class:`ArgumentError` (also a ``ValueError``; its
subclass :class:`ArgumentTypeError` is also a ``TypeError``),
:class:`UnknownFunctionError` (also an ``AttributeError`` and a ``KeyError``),
:class:`LaunchError` and :class:`DeviceError` (also ``RuntimeError``s).
Misusing ``load`` or ``compile`` (a path that is not a path, a chip that is
not a string, an unknown keyword) raises the function's own error that is
also an :class:`ArgumentError` or :class:`ArgumentTypeError`.
"""

from ._compiler import compile, find_compiler
from ._version import __version__
from ._errors import (ArgumentError, ArgumentTypeError, CacheWarning,
                      CompileError, DeviceError, Error, LaunchError,
                      LoadError, TorchOpError, UnknownFunctionError)
from ._loader import (DEVICE_ERROR_SLOT_OUT_OF_RANGE, DEVICE_ERRORS, ArgSpec,
                      Function, FunctionNamespace, Functions, Module, load,
                      validate_artifact)
from ._torch_ops import TorchOps

__all__ = [
    "ArgSpec", "ArgumentError", "ArgumentTypeError", "CacheWarning",
    "CompileError", "DEVICE_ERRORS", "DEVICE_ERROR_SLOT_OUT_OF_RANGE",
    "DeviceError", "Error", "Function", "FunctionNamespace", "Functions",
    "LaunchError", "LoadError", "Module", "TorchOpError", "TorchOps",
    "UnknownFunctionError", "compile",
    "find_compiler", "load", "validate_artifact", "__version__",
]
