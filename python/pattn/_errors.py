"""The exceptions of the pattn package.

Every error pattn raises derives from :class:`pattn.Error`, so callers can
catch the package's failures in one clause; each also derives from the
builtin that describes it best (``ValueError`` for bad arguments,
``RuntimeError`` for failed launches), so generic handlers keep working.
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
    """A call's arguments do not match the function's manifest.

    Raised before anything is launched, so a rejected call has no effect.
    """


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
