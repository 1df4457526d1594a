"""pattn functions as torch custom ops: :meth:`pattn.Module.torch_ops`.

Every function of a loaded artifact becomes ``torch.ops.<namespace>.<name>``,
defined with ``torch.library`` from the manifest alone::

    decode_step(Tensor(a!) k_pages, Tensor(b!) v_pages, Tensor k_new, ...,
                Tensor(c!) out) -> ()

One ``Tensor`` per argument, under the name the MLIR function gives it;
``Tensor(x!)`` (each in an alias set of its own) for the arguments the
function writes (the manifest's ``written``; all of them for a manifest
that does not say), so functionalization and torch.compile order the op
after what it reads and before what reads its outputs. Ops return nothing.

* The CUDA kernel calls the :class:`pattn.Function` with the tensors, on
  torch's current stream of their device (so ``torch.cuda.graph`` captures
  it and inductor's stream is used).
* The fake kernel (``torch.library.register_fake``: FakeTensorMode, the Meta
  key, torch.compile's tracing) runs :meth:`pattn.Function.check_fake`, the
  call's own checks of dtype, rank, static sizes, device and contiguity, and
  returns None.

torch is imported only when :func:`register` runs: ``import pattn`` never
imports it. Registrations live as long as the process (torch.library keeps
an op only while its ``Library`` object lives, so this module holds them).
"""

from __future__ import annotations

import collections.abc
import hashlib
import keyword
import os
import re
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ._errors import (ArgumentError, ArgumentTypeError, TorchOpError,
                      UnknownFunctionError)

# What a torch schema takes as an operator, argument or namespace name.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

_LOCK = threading.RLock()
# namespace -> the torch.library.Library (kind FRAGMENT) holding pattn's ops
_LIBRARIES: Dict[str, Any] = {}
# "namespace::name" -> (schema text, the target its kernels call)
_REGISTERED: Dict[str, Tuple[str, "_Target"]] = {}


class _Target:
    """What an op's kernels call; re-pointed when the op is registered
    again for another module of the same schema."""

    __slots__ = ("function",)

    def __init__(self, function: Any):
        self.function = function


def _import_torch() -> Any:
    try:
        import torch
        import torch.library
    except ImportError as error:
        raise TorchOpError(
            "pattn.Module.torch_ops needs torch, which is not importable "
            f"({error}); install torch (pip install torch)") from None
    if not hasattr(torch.library, "register_fake"):
        raise TorchOpError(
            f"pattn.Module.torch_ops needs torch >= 2.4 "
            f"(torch.library.register_fake); this is torch "
            f"{getattr(torch, '__version__', '?')}")
    return torch


def default_namespace(module: Any) -> str:
    """``pattn_`` and 12 hex digits of the SHA-256 of the module's manifest
    and real path: stable across processes, distinct per artifact."""
    digest = hashlib.sha256(module._manifest_text)
    digest.update(b"\0" + os.fsencode(os.path.realpath(module.path)))
    return "pattn_" + digest.hexdigest()[:12]


def _is_identifier(name: str) -> bool:
    return bool(_IDENTIFIER.match(name)) and not keyword.iskeyword(name)


def _namespace_argument(module: Any, namespace: Any) -> str:
    if namespace is None:
        return default_namespace(module)
    if not isinstance(namespace, str):
        raise ArgumentTypeError(
            "pattn.Module.torch_ops: argument 'namespace' must be a str (an "
            f"identifier) or None, got {type(namespace).__name__}")
    if not _is_identifier(namespace):
        raise ArgumentError(
            f"pattn.Module.torch_ops: argument 'namespace' {namespace!r:.80} "
            "must be an ASCII identifier that is not a Python keyword "
            "(letters, digits and '_', not starting with a digit): it is "
            "spelled torch.ops.<namespace>")
    return namespace


def _alias_set(index: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return letters[index] if index < len(letters) else f"w{index}"


def schema(function: Any) -> str:
    """The op schema of ``function`` (without the namespace), from its
    manifest entry. Raises :class:`TorchOpError` for a name a schema cannot
    hold."""
    path = getattr(getattr(function, "_module", None), "path", "?")
    if not _is_identifier(function.name):
        raise TorchOpError(
            f"{path}: function '{function.name}' cannot be a torch op: its "
            "name is not an ASCII identifier (torch ops are "
            "torch.ops.<namespace>.<identifier>); rename the func.func")
    parts: List[str] = []
    written = 0
    for spec in function.args:
        if not _is_identifier(spec.name):
            raise TorchOpError(
                f"{path}: function '{function.name}' cannot be a torch op: "
                f"its argument '{spec.name}' is not an ASCII identifier that "
                "is not a Python keyword, which a torch schema needs; name "
                "it in the MLIR with {pattn.name = \"...\"} or loc(\"...\")")
        if spec.written:
            parts.append(f"Tensor({_alias_set(written)}!) {spec.name}")
            written += 1
        else:
            parts.append(f"Tensor {spec.name}")
    return f"{function.name}({', '.join(parts)}) -> ()"


def _torch_has_op(torch: Any, qualname: str) -> bool:
    try:
        return bool(torch._C._jit_get_schemas_for_operator(qualname))
    except Exception:  # noqa: BLE001 - a private API: fall back to lookup
        namespace, name = qualname.split("::")
        try:
            getattr(getattr(torch.ops, namespace), name)
        except (AttributeError, RuntimeError):
            return False
        return True


def _cuda_kernel(target: _Target) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> None:
        # The Function's default stream is torch's current one.
        target.function(*args, **kwargs)
    return kernel


def _fake_kernel(target: _Target) -> Any:
    def fake(*args: Any, **kwargs: Any) -> None:
        target.function.check_fake(*args, **kwargs)
    return fake


def register(module: Any, namespace: Optional[str] = None) -> "TorchOps":
    """Registers every function of ``module`` as
    ``torch.ops.<namespace>.<name>`` (see :meth:`pattn.Module.torch_ops`)."""
    namespace = _namespace_argument(module, namespace)
    torch = _import_torch()
    plans = []
    for function in module.functions.values():
        text = schema(function)
        qualname = f"{namespace}::{function.name}"
        try:
            parsed = torch._C.parse_schema(f"{namespace}::{text}")
        except RuntimeError as error:
            raise TorchOpError(
                f"{module.path}: function '{function.name}' cannot be a "
                f"torch op: torch does not take its schema {text!r} "
                f"({error})") from None
        names = tuple(argument.name for argument in parsed.arguments)
        if names != tuple(spec.name for spec in function.args):
            raise TorchOpError(
                f"{module.path}: torch reads the schema of "
                f"'{function.name}' with arguments {names}, not the "
                "manifest's")
        plans.append((function, text, qualname))

    with _LOCK:
        for function, text, qualname in plans:
            known = _REGISTERED.get(qualname)
            if known is not None and known[0] != text:
                raise TorchOpError(
                    f"cannot register {module.path} in torch namespace "
                    f"'{namespace}': op {qualname} is already registered with "
                    f"schema {known[0]!r}, and this artifact's "
                    f"'{function.name}' is {text!r}; pass another "
                    "namespace= (the default namespace is one per artifact)")
            if known is None and _torch_has_op(torch, qualname):
                raise TorchOpError(
                    f"cannot register {module.path} in torch namespace "
                    f"'{namespace}': torch already has an op {qualname} that "
                    "pattn did not register; pass another namespace=")
        for function, text, qualname in plans:
            known = _REGISTERED.get(qualname)
            if known is not None:
                known[1].function = function
                continue
            library = _LIBRARIES.get(namespace)
            if library is None:
                library = torch.library.Library(namespace, "FRAGMENT")
                _LIBRARIES[namespace] = library
            target = _Target(function)
            library.define(text)
            library.impl(function.name, _cuda_kernel(target), "CUDA")
            torch.library.register_fake(qualname, _fake_kernel(target),
                                        lib=library)
            _REGISTERED[qualname] = (text, target)

    ops_namespace = getattr(torch.ops, namespace)
    ops = {function.name: getattr(ops_namespace, function.name)
           for function, _, _ in plans}
    schemas = {function.name: f"{namespace}::{text}"
               for function, text, _ in plans}
    return TorchOps(module, namespace, ops, schemas)


class TorchOps(collections.abc.Mapping):
    """The torch ops of one module (:meth:`pattn.Module.torch_ops`): a
    read-only mapping from function name to ``torch.ops.<namespace>.<name>``
    (an ``OpOverloadPacket``).

    ``ops[name]`` always works; ``ops.<name>`` is a shortcut (a plain
    attribute, so torch.compile traces through it) unless the name is one
    of this object's own attributes (``namespace``, ``module``,
    ``schemas``, ``keys``, ...). ``namespace`` is the torch namespace,
    ``schemas[name]`` each op's schema text.
    """

    def __init__(self, module: Any, namespace: str, ops: Dict[str, Any],
                 schemas: Dict[str, str]):
        self.module = module
        self.namespace = namespace
        self.schemas = dict(schemas)
        self._ops = dict(ops)
        for name, op in ops.items():
            if not name.startswith("_") and not hasattr(type(self), name) \
                    and name not in self.__dict__:
                self.__dict__[name] = op

    def __getitem__(self, name: str) -> Any:
        try:
            return self._ops[name]
        except (KeyError, TypeError):
            raise UnknownFunctionError(
                f"torch namespace '{self.namespace}' of "
                f"{getattr(self.module, 'path', '?')} has no op "
                f"{name!r:.200} (it has: {', '.join(self._ops) or 'none'})") \
                from None

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails.
        if name.startswith("__") or name == "_ops":
            raise AttributeError(name)
        return self[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def __repr__(self) -> str:
        return (f"<pattn.TorchOps torch.ops.{self.namespace}: "
                f"{', '.join(self._ops) or 'none'}>")
