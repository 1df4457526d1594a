"""pattn from Python: build paged-attention MLIR, compile it and run it on
torch tensors.

    import pattn
    path = pattn.compile("examples/decode_int4.mlir", chips=("sm_90a",))
    module = pattn.load(path)
    module.decode_step(k_pages, v_pages, k_new, v_new, slots, k_scale,
                       v_scale, query=q, block_table=bt, seq_lens=lens,
                       out=out)          # on torch's current stream
    ops = module.torch_ops()             # torch.ops.<ops.namespace>.decode_step

:mod:`pattn.ir` builds modules in Python instead (``pattn.compile`` takes a
``pattn.ir.Module``); ``Module.verify()`` runs the dialect's verifier
through ``pattn-opt`` (:func:`find_opt`).

Install it with ``pip install .`` at the repository root (its version is
the repository's VERSION). ``compile`` runs the ``pattn-compile``
executable (:func:`find_compiler`: ``compiler=``, ``$PATTN_COMPILE``, this
checkout's ``build/bin``, then ``PATH``); ``load`` opens the artifact with
ctypes and reads its manifest; calling a function checks the tensors
against the manifest, then launches on a CUDA stream. The package is pure
Python (ctypes, json and the standard library); torch is imported only when
a call needs torch's current stream or device, or by
:meth:`Module.torch_ops`: ``import pattn`` never imports it.

A :class:`Function` takes its tensors by position, then by name, like a
Python function; the names are the MLIR function's (``pattn.name``, else
``loc("name")``, else the SSA name), in ``function.arg_names``.
``stream=`` is keyword-only and always the launch stream; an MLIR argument
named ``stream`` is passed by position. The manifest also says which
arguments a function writes (:attr:`ArgSpec.written`).

:meth:`Module.torch_ops` registers every function as a torch custom op
whose schema marks the written arguments ``Tensor(a!)``, with a CUDA kernel
on torch's current stream and a fake kernel that checks shapes and dtypes
(:meth:`Function.check_fake`), so ``torch.compile(fullgraph=True)``,
FakeTensorMode and CUDA graphs take it (:class:`TorchOps`).

A module's entry points have their own namespace, which none of the
module's attributes can hide: ``module.functions[name]``, ``module[name]`` and
``module.fn.<name>`` always work; ``module.<name>`` is a shortcut that works
unless the name is one of the module's own attributes (``path``, ``chips``,
``functions``, ``fn``, ``torch_ops``, ...).

``load`` checks a file before ctypes maps it (size, ELF header and tables
against the file and the host, the checksum the artifact cache stores beside
its entries), so a truncated library is a :class:`LoadError`, not a crash.
With ``$PATTN_ARTIFACT_DIR`` set, ``compile`` is a cache keyed on the
source, the chips, the options and the compiler's identity (the SHA-256 of
``pattn-compile`` and of its ``libpattn_runtime.so``, read from the files);
it rebuilds a corrupt entry, saying so once with a :class:`CacheWarning`.

Errors all derive from :class:`pattn.Error`: :class:`CompileError`,
:class:`LoadError`, :class:`ArgumentError` (also a ``ValueError``; its
subclass :class:`ArgumentTypeError` is also a ``TypeError``),
:class:`UnknownFunctionError` (also an ``AttributeError`` and a ``KeyError``),
:class:`LaunchError`, :class:`DeviceError` and :class:`TorchOpError` (also
``RuntimeError``s); :mod:`pattn.ir` raises :class:`IRError` (an
``ArgumentError``), :class:`IRTypeError` (an ``ArgumentTypeError``) and
:class:`VerifyError` (a ``CompileError``). Misusing ``load`` or
``compile`` (a path that is not a path, a chip that is not a string, an
unknown keyword) raises the function's own error that is also an
:class:`ArgumentError` or :class:`ArgumentTypeError`.
"""

from ._compiler import compile, find_compiler, find_opt
from ._version import __version__
from ._errors import (ArgumentError, ArgumentTypeError, CacheWarning,
                      CompileError, DeviceError, Error, IRError, IRTypeError,
                      LaunchError, LoadError, TorchOpError,
                      UnknownFunctionError, VerifyError)
from ._loader import (DEVICE_ERROR_POSITION_OUT_OF_RANGE,
                      DEVICE_ERROR_SLOT_OUT_OF_RANGE, DEVICE_ERRORS, ArgSpec,
                      Function, FunctionNamespace, Functions, Module, load,
                      validate_artifact)
from ._torch_ops import TorchOps
from . import ir

__all__ = [
    "ArgSpec", "ArgumentError", "ArgumentTypeError", "CacheWarning",
    "CompileError", "DEVICE_ERRORS", "DEVICE_ERROR_POSITION_OUT_OF_RANGE",
    "DEVICE_ERROR_SLOT_OUT_OF_RANGE",
    "DeviceError", "Error", "Function", "FunctionNamespace", "Functions",
    "IRError", "IRTypeError", "LaunchError", "LoadError", "Module",
    "TorchOpError", "TorchOps", "UnknownFunctionError", "VerifyError",
    "compile", "find_compiler", "find_opt", "ir", "load",
    "validate_artifact", "__version__",
]
