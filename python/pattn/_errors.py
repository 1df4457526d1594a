"""The exceptions of the pattn package.

Every error pattn raises derives from :class:`pattn.Error`, so callers can
catch the package's failures in one clause; each also derives from the
builtin that describes it best (``ValueError`` for bad arguments,
``TypeError`` for arguments of the wrong type or a call that does not match a
signature, ``RuntimeError`` for failed launches, ``AttributeError`` and
``KeyError`` for a function an artifact does not have), so generic handlers
keep working.

Misuse of ``pattn.load`` and ``pattn.compile`` raises the function's own
family (:class:`LoadError`, :class:`CompileError`) combined with
:class:`ArgumentError` or :class:`ArgumentTypeError`: ``pattn.load(None)`` is
a ``LoadError``, an ``ArgumentTypeError`` and a ``TypeError`` at once.
"""

from __future__ import annotations

from typing import Optional, Sequence


class Error(Exception):
    """Base class of every error raised by pattn."""


class CompileError(Error):
    """``pattn-compile`` could not be run, or it rejected the input.

    ``stderr`` holds the compiler's diagnostics and ``returncode`` its exit
    status (``None`` when it never ran); ``command`` is the command line.
    """

    def __init__(self, message: str, *, command: Optional[Sequence[str]] = None,
                 returncode: Optional[int] = None, stderr: str = ""):
        super().__init__(message)
        self.command = list(command) if command is not None else None
        self.returncode = returncode
        self.stderr = stderr


class LoadError(Error):
    """A file is not a loadable pattn artifact (or its manifest is broken)."""


class ArgumentError(Error, ValueError):
    """A call's arguments do not match the function's manifest, or a pattn
    API was given a value it cannot take (the message names the argument).

    Raised before anything is launched, so a rejected call has no effect.
    """


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of the wrong type, an unknown keyword argument or a wrong
    number of positional arguments (what Python itself reports as a
    ``TypeError``)."""


class UnknownFunctionError(Error, AttributeError, KeyError):
    """An artifact has no function of that name (``module.functions[name]``,
    ``module[name]``, ``module.fn.name`` or ``module.name``). Also an
    ``AttributeError`` (so ``hasattr`` works) and a ``KeyError`` (so
    mapping code works)."""

    def __str__(self) -> str:
        # KeyError would quote the message like a key.
        return str(self.args[0]) if self.args else ""


class TorchOpError(Error, RuntimeError):
    """An artifact's functions cannot become torch custom ops
    (:meth:`pattn.Module.torch_ops`): torch is missing or too old, a
    function or argument name is not one a torch schema can hold, or the
    namespace already has an op of that name with another schema (or one
    that pattn did not register). Raised before anything is registered."""


class IRError(ArgumentError):
    """A :mod:`pattn.ir` builder was given something it cannot build: an
    unknown dtype, encoding or option name, a name that cannot be an SSA,
    symbol or manifest name, a value of another function, a float that does
    not fit in f32, two definitions of one name. The message names the op
    (or type) and the argument. Raised by the builder call, before any text
    exists; the dialect's verifier (:meth:`pattn.ir.Module.verify`,
    ``pattn-opt``) checks everything else."""


class IRTypeError(IRError, ArgumentTypeError):
    """A :mod:`pattn.ir` builder argument of the wrong kind: a memref where
    an op takes a cache, a str where it takes an int, an unknown keyword.
    Also a ``TypeError``."""


class VerifyError(CompileError):
    """``pattn-opt`` rejected a module (:meth:`pattn.ir.Module.verify`): the
    message is its first error, ``stderr`` every diagnostic (each with the
    offending line of the module's text)."""


class CacheWarning(UserWarning):
    """An artifact cache entry was found corrupt (truncated, or not matching
    its checksum) and is being rebuilt. Issued once per entry and process."""


class LaunchError(Error, RuntimeError):
    """A compiled entry point returned a nonzero ``pattnStatus``.

    ``status`` is the code, ``status_name`` its name
    (``"PATTN_ERROR_LAUNCH"``) and ``detail`` the runtime's message.
    """

    def __init__(self, function: str, status: int, status_name: str,
                 detail: str):
        super().__init__(f"{function} failed with {status_name}: {detail}")
        self.function = function
        self.status = status
        self.status_name = status_name
        self.detail = detail


class DeviceError(Error, RuntimeError):
    """A kernel rejected input that only the device could see.

    ``bits`` are the runtime's device error bits (``DEVICE_ERROR_*``);
    ``str()`` names each. Raised by :meth:`pattn.Module.check_device_errors`
    after the caller has synchronized.
    """

    def __init__(self, bits: int, reasons: Sequence[str]):
        super().__init__("; ".join(reasons))
        self.bits = bits
        self.reasons = tuple(reasons)


# The combinations that pattn.load and pattn.compile raise for misuse: each
# is its function's error family and an argument error. Private: catch them
# by any of their bases.


class _LoadArgumentTypeError(LoadError, ArgumentTypeError):
    pass


class _CompileArgumentError(CompileError, ArgumentError):
    pass


class _CompileArgumentTypeError(CompileError, ArgumentTypeError):
    pass


def _rejects_bad_calls(error_class, qualname: str):
    """Wraps a public function so that a call that does not match its
    signature (an unknown keyword, too many positional arguments, a missing
    one) raises ``error_class`` (an :class:`ArgumentTypeError`) naming the
    function, rather than Python's bare ``TypeError``. The wrapper keeps the
    signature for ``help()`` and ``inspect``."""
    import functools
    import inspect

    def decorate(function):
        signature = inspect.signature(function)

        takes_any = any(p.kind is p.VAR_KEYWORD
                        for p in signature.parameters.values())

        @functools.wraps(function)
        def checked(*args, **kwargs):
            unknown = [] if takes_any else [
                key for key in kwargs if key not in signature.parameters]
            if unknown:  # first, as Python itself reports it
                names = ", ".join(repr(key) for key in unknown)
                plural = "" if len(unknown) == 1 else "s"
                raise error_class(f"{qualname}: got an unexpected keyword "
                                  f"argument{plural} {names}")
            try:
                signature.bind(*args, **kwargs)
            except TypeError as error:
                raise error_class(f"{qualname}: {error}") from None
            return function(*args, **kwargs)

        return checked

    return decorate
