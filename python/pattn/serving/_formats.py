"""Cache formats: what a serving cache stores for K and for V.

A format names an encoding and a scale granularity per side (SPEC §2), the
choices a serving engine makes once per model. The presets are the ones a
generation loop can fill without knowing its data in advance:

========= ====================== ====================== =================
name      K                      V                      bytes per element
========= ====================== ====================== =================
f16       f16                    f16                    2
bf16      bf16                   bf16                   2
i8        i8, per-token scale    i8, per-token scale    1 (+4 per row)
f8e4m3    e4m3, per-token scale  e4m3, per-token scale  1 (+4 per row)
i4        i4, per-channel scale  i4, per-token scale    0.5 (+4 per row)
nvfp4     e2m1, 16-groups, token e2m1, 16-groups, token 0.5 (+1/16, +4)
========= ====================== ====================== =================

Per-token scales are derived by the write itself (amax / max code per
token and KV head), so those sides need no calibration. The int4 K side
keeps pattn's per-channel table, which the compiler folds into the query
(SPEC §5): its table is calibrated from the first prompt a cache sees
(:func:`channel_scales`) or given by the user.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple, Union

from .._errors import ArgumentError, ArgumentTypeError

__all__ = ["CacheFormat", "FORMATS", "MAX_CODE", "cache_format",
           "row_bytes"]

_ENCODINGS = ("f16", "bf16", "i8", "f8e4m3", "f8e5m2", "i4", "nvfp4")
_SCALES = ("none", "tensor", "channel", "token")

#: The largest code magnitude of each quantized encoding (SPEC §2; nvfp4:
#: e2m1's 6 times e4m3's 448), what a calibrated scale maps amax to.
MAX_CODE = {"i8": 127.0, "i4": 7.0, "f8e4m3": 448.0, "f8e5m2": 57344.0,
            "nvfp4": 2688.0}


def row_bytes(encoding: str, head_dim: int) -> int:
    """Bytes of one (token, KV head) row of ``encoding`` (SPEC §3)."""
    if encoding in ("f16", "bf16"):
        return 2 * head_dim
    if encoding in ("i4", "nvfp4"):
        return (head_dim + 1) // 2
    return head_dim


@dataclasses.dataclass(frozen=True)
class CacheFormat:
    """The encoding and scale granularity of K and of V.

    ``CacheFormat("i4")`` is a preset (:data:`FORMATS`);
    ``CacheFormat("mine", k=("i4", "channel"), v=("i8", "token"))`` spells
    one out. Tensor and channel scales other than int4's K table are
    calibrated from the first prompt like it (:func:`channel_scales`).
    """

    name: str
    k: Tuple[str, str] = ("", "")
    v: Tuple[str, str] = ("", "")

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ArgumentTypeError(
                "pattn.serving.CacheFormat: 'name' must be a non-empty str")
        if self.k == ("", "") and self.v == ("", ""):
            preset = FORMATS.get(self.name)
            if preset is None:
                raise ArgumentError(
                    f"pattn.serving.CacheFormat: unknown format "
                    f"{self.name!r:.60}; presets are {', '.join(FORMATS)}, "
                    "or give k=(encoding, scale) and v=(encoding, scale)")
            object.__setattr__(self, "k", preset.k)
            object.__setattr__(self, "v", preset.v)
        for side in ("k", "v"):
            _check_side(side, getattr(self, side))

    @property
    def sides(self) -> Tuple[Tuple[str, str, str], ...]:
        """``(("k", encoding, scale), ("v", encoding, scale))``."""
        return (("k",) + tuple(self.k), ("v",) + tuple(self.v))

    @property
    def calibrated(self) -> Tuple[str, ...]:
        """The sides whose scale is a table fixed for the cache's life
        (``tensor`` or ``channel``), which a prompt calibrates."""
        return tuple(side for side, _, scale in self.sides
                     if scale in ("tensor", "channel"))

    def bytes_per_token(self, kv_heads: int, head_dim: int) -> int:
        """Cache bytes one token takes in one layer (pages, nvfp4 group
        scales, per-token scales)."""
        total = 0
        for _, encoding, scale in self.sides:
            total += kv_heads * row_bytes(encoding, head_dim)
            if encoding == "nvfp4":
                total += kv_heads * (head_dim // 16)
            if scale == "token":
                total += kv_heads * 4
        return total


def _check_side(side: str, value: object) -> None:
    where = f"pattn.serving.CacheFormat: '{side}'"
    if not isinstance(value, tuple) or len(value) != 2:
        raise ArgumentTypeError(f"{where} must be a pair (encoding, scale), "
                                f"got {value!r:.80}")
    encoding, scale = value
    if encoding not in _ENCODINGS:
        raise ArgumentError(f"{where}: unknown encoding {encoding!r:.40}; "
                            f"expected one of {', '.join(_ENCODINGS)}")
    if scale not in _SCALES:
        raise ArgumentError(f"{where}: unknown scale {scale!r:.40}; "
                            f"expected one of {', '.join(_SCALES)}")
    if encoding in ("f16", "bf16") and scale != "none":
        raise ArgumentError(f"{where}: {encoding} pages take no scale "
                            f"(scale 'none'), not {scale!r}")
    if encoding not in ("f16", "bf16") and scale == "none":
        raise ArgumentError(
            f"{where}: {encoding} pages need a scale ('token' needs no "
            "calibration)")
    if encoding == "nvfp4" and scale not in ("tensor", "token"):
        raise ArgumentError(f"{where}: nvfp4's outer scale is 'tensor' or "
                            f"'token' (SPEC §2), not {scale!r}")


FORMATS = {}
for _name, _k, _v in (
        ("f16", ("f16", "none"), ("f16", "none")),
        ("bf16", ("bf16", "none"), ("bf16", "none")),
        ("i8", ("i8", "token"), ("i8", "token")),
        ("f8e4m3", ("f8e4m3", "token"), ("f8e4m3", "token")),
        ("i4", ("i4", "channel"), ("i4", "token")),
        ("nvfp4", ("nvfp4", "token"), ("nvfp4", "token"))):
    FORMATS[_name] = CacheFormat(_name, _k, _v)
del _name, _k, _v


def cache_format(value: Union[str, CacheFormat, None],
                 activation: Optional[str] = None) -> CacheFormat:
    """``value`` as a :class:`CacheFormat`: a preset name, a format, or
    None (the 16-bit format of ``activation``, "f16" or "bf16")."""
    if value is None:
        return FORMATS["bf16" if activation == "bf16" else "f16"]
    if isinstance(value, CacheFormat):
        return value
    if isinstance(value, str):
        return CacheFormat(value)
    raise ArgumentTypeError(
        "a cache format must be a preset name (" + ", ".join(FORMATS) +
        f") or a pattn.serving.CacheFormat, got {type(value).__name__}")
