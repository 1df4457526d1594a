"""pattn.ir, the Python IR builder (issue 11, item 1).

The text the builder prints is checked in Python (types, names, floats,
layout); everything it builds is then run through the real ``pattn-opt``
(found as ``pattn.find_opt`` finds it: ``$PATTN_OPT``, this checkout's
build/bin, ``PATH``; those tests skip, saying so, without one): every op
with every combination of its optional operands and attributes must parse
and verify, print back to the same generic form, and land in the operand
segments and attributes it was given; the bundled examples rebuilt with the
builder must be the examples after pattn-opt's normalization; every module
of the GPU suite's emitter (python/tests/gpu/ir.py) must verify. Bad input
raises pattn errors naming the op and the argument, and the verifier's
message comes back through ``Module.verify`` and ``pattn.compile``.
``pattn.compile`` of a builder module needs ``pattn-compile`` (no GPU).
"""

import importlib.util
import itertools
import os
import pathlib
import random
import re
import struct
import subprocess
import sys

import pytest

import pattn
from pattn import ir

REPO = pathlib.Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------
# pattn-opt
# ---------------------------------------------------------------------------


def run_opt(opt, text, *flags):
    """pattn-opt's output for ``text``; the test fails with its
    diagnostics if it rejects it."""
    result = subprocess.run([opt, "-", *flags], input=text,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{result.stderr}\n--- input:\n{text}"
    return result.stdout


def round_trip(opt, module):
    """The generic form of ``module``, after checking that pattn-opt's own
    print of it parses back to the same generic form."""
    text = str(module)
    generic = run_opt(opt, text, "--mlir-print-op-generic")
    reprinted = run_opt(opt, run_opt(opt, text), "--mlir-print-op-generic")
    assert generic == reprinted
    return generic


def _split_top_level(text):
    """``a = 1, b = #x<c = 2, d = 3>`` split at the commas outside <>."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += char in "<([{"
        depth -= char in ">)]}"
        if char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return parts


_OP = re.compile(r'^\s*(?:%\S+ = )?"([\w.]+)"\(([^)]*)\)(?: <\{(.*)\}>)?')


def generic_ops(generic):
    """Function name -> [(op name, operands, properties)] of a generic
    print: operands as the index of the function argument they are (the
    generic form numbers block arguments across the module), else their
    name; properties as name -> text."""
    functions, current, arguments = {}, None, []
    for line in generic.splitlines():
        named = re.search(r'sym_name = "(\w+)"', line)
        if line.lstrip().startswith('"func.func"') and named:
            current = functions.setdefault(named.group(1), [])
            arguments = []
            continue
        if line.lstrip().startswith("^bb0("):
            arguments = re.findall(r"(%\w+):", line)
            continue
        match = _OP.match(line)
        if match and current is not None and match.group(1) != "func.return":
            operands = [arguments.index(o) if o in arguments else o
                        for o in (o.strip() for o in
                                  match.group(2).split(",")) if o]
            properties = {}
            for item in _split_top_level(match.group(3) or ""):
                if item:
                    name, _, value = item.partition(" = ")
                    properties[name] = value
            current.append((match.group(1), operands, properties))
    return functions


def f32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def printed_f32(text):
    """The fp32 value of an attribute MLIR printed (``1.5e+00 : f32``)."""
    number = text.rsplit(" : ", 1)[0]
    if number.startswith("0x"):
        return struct.unpack(">f", bytes.fromhex(number[2:]))[0]
    return f32(float(number))


# ---------------------------------------------------------------------------
# Printing (pure Python)
# ---------------------------------------------------------------------------


def test_memref_types_print_as_mlir():
    assert str(ir.memref([4, 32, 128], "f16")) == "memref<4x32x128xf16>"
    assert str(ir.memref((None, 16, 8, 64), "i8")) == "memref<?x16x8x64xi8>"
    assert str(ir.memref([], "f32")) == "memref<f32>"
    assert str(ir.memref([None], "f8E4M3FN")) == "memref<?xf8E4M3FN>"
    assert ir.memref([2], "i32") == ir.memref((2,), "i32")
    assert ir.memref([2], "i32") != ir.memref([None], "i32")


def test_cache_types_print_their_parameters_and_leave_defaults_out():
    plain = ir.cache(block_size=16, kv_heads=8, head_dim=128, encoding="i4",
                     scale="channel")
    assert str(plain) == ("!pattn.cache<block_size = 16, kv_heads = 8, "
                          "head_dim = 128, encoding = i4, scale = channel>")
    explicit = plain.replace(layout="nhd")
    assert str(explicit).endswith("scale = channel, layout = nhd>")
    assert explicit == plain and hash(explicit) == hash(plain)
    assert plain.layout == explicit.layout == "nhd"
    assert plain.replace(layout="hnd") != plain
    f16 = ir.cache(block_size=32, kv_heads=1, head_dim=64, encoding="f16")
    assert str(f16).endswith("encoding = f16, scale = none>")


@pytest.mark.parametrize("encoding, head_dim, row", [
    ("f16", 128, 256), ("bf16", 64, 128), ("i8", 128, 128),
    ("f8e4m3", 96, 96), ("f8e5m2", 64, 64), ("i4", 128, 64),
    ("nvfp4", 64, 32)])
def test_cache_types_derive_their_buffers(encoding, head_dim, row):
    scale = {"f16": "none", "bf16": "none", "nvfp4": "token"}.get(encoding,
                                                                  "channel")
    nhd = ir.cache(block_size=16, kv_heads=8, head_dim=head_dim,
                   encoding=encoding, scale=scale)
    hnd = nhd.replace(layout="hnd")
    assert nhd.row_bytes == row
    assert nhd.storage_type() == ir.memref([None, 16, 8, row], "i8")
    assert hnd.storage_type(7) == ir.memref([7, 8, 16, row], "i8")
    if encoding == "nvfp4":
        assert hnd.group_scales_type() == ir.memref(
            [None, 8, 16, head_dim // 16], "f8E4M3FN")
        assert nhd.token_scales_type(3) == ir.memref([3, 16, 8], "f32")
        assert nhd.scale_type() is None
    else:
        assert nhd.group_scales_type() is None
        assert nhd.token_scales_type() is None
    if scale == "channel":
        assert nhd.scale_type() == ir.memref([8, head_dim], "f32")
        assert nhd.replace(scale="tensor").scale_type() == ir.memref([1],
                                                                     "f32")


def test_page_strided_storage_for_an_engines_allocation(opt):
    """storage_type(page_stride=) gives K or V of an engine's
    [blocks, 2, ...] allocation: pages that far apart, row-major inside;
    the verifier takes it (bind_cache's page-strided rule)."""
    k = ir.cache(block_size=16, kv_heads=8, head_dim=128, encoding="i8",
                 scale="token")
    assert k.page_bytes == 16 * 8 * 128
    strided = k.storage_type(page_stride=2 * k.page_bytes)
    assert str(strided) == ("memref<?x16x8x128xi8, strided<[32768, 1024, "
                            "128, 1]>>")
    assert strided != k.storage_type()
    assert strided.strides == (32768, 1024, 128, 1)
    hnd = k.replace(layout="hnd").storage_type(3, page_stride=32768)
    assert str(hnd) == "memref<3x8x16x128xi8, strided<[32768, 2048, 128, 1]>>"
    for bad in (8192, 16392, 2.0 * 16384, True):
        with pytest.raises(pattn.ArgumentError, match="page_stride must be"):
            k.storage_type(page_stride=bad)
    with pytest.raises(pattn.ArgumentError, match="strides must be one"):
        ir.memref([None, 4], "i8", strides=[16])
    m = ir.Module()
    f = m.function("f")
    f.bind_cache(f.arg("k_pages", strided), k,
                 token_scales=f.arg("k_tokens", k.token_scales_type()))
    m.verify(opt)


def test_records_print_presets_by_name_and_lanes_written_out():
    assert str(ir.record("fp8_ds_mla")) == "!pattn.record<fp8_ds_mla>"
    token = ir.record("nvfp4_ds_mla_fp8_rope", "token")
    assert str(token) == "!pattn.record<nvfp4_ds_mla_fp8_rope, token>"
    assert token.bytes == 368 and token.mode == "token"
    assert token.lane("rope") == ir.lane("rope", 64, "f8E4M3FN", 304,
                                         scaled_by="rope_scale")
    assert ir.record("nvfp4_ds_mla").mode == "tensor"
    assert ir.record("nvfp4_ds_mla", "tensor") == ir.record("nvfp4_ds_mla")
    lanes = [ir.lane("vals", 16, "f8E4M3FN", 0, scaled_by="s"),
             ir.lane("s", 1, "f32", 16), ir.lane("raw bits", 8, "i8", 20)]
    written = ir.record(bytes=32, mode="none", lanes=lanes)
    assert str(written) == (
        '!pattn.record<32 bytes, none, {vals: 16 x f8E4M3FN at 0 scaled_by '
        's, s: 1 x f32 at 16, "raw bits": 8 x i8 at 20}>')
    # A preset written lane by lane is the preset, as in the dialect.
    size, mode, preset_lanes = ir.PRESETS["fp8_ds_mla"]
    assert ir.record(bytes=size, mode=mode, lanes=preset_lanes) == \
        ir.record("fp8_ds_mla")
    records = ir.record_cache(64, token)
    assert str(records) == ("!pattn.record_cache<block_size = 64, record = "
                            "!pattn.record<nvfp4_ds_mla_fp8_rope, token>>")
    assert records.storage_type() == ir.memref([None, 64, 368], "i8")


def test_plans_print_as_the_dialect_does():
    assert str(ir.xqa_plan(rows=16, keys_per_tile=64, stages=3, key_warps=4,
                           value_warps=1, keys_per_split=2048,
                           shared_bytes=41984, resident_blocks=[4, 2],
                           targets=["sm_90a", "sm_86"])) == (
        "#pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, "
        "stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 2048, "
        "shared_bytes = 41984, resident_blocks = [4, 2], "
        "targets = [sm_90a, sm_86]>")
    # The schedule's fields are printed where they are not the default.
    assert str(ir.xqa_plan(operand="bf16", rows=32, keys_per_tile=32,
                           stages=2, key_warps=2, value_warps=2,
                           keys_per_split=1024, shared_bytes=1024,
                           resident_blocks=[1], targets=["sm_80"],
                           most_splits=16)) == (
        "#pattn.xqa_plan<operand = bf16, rows = 32, keys_per_tile = 32, "
        "stages = 2, key_warps = 2, value_warps = 2, keys_per_split = 1024, "
        "shared_bytes = 1024, resident_blocks = [1], most_splits = 16, "
        "targets = [sm_80]>")
    assert str(ir.portable_plan(heads_per_block=4, keys_per_split=512,
                                targets=["sm_80"])) == (
        "#pattn.portable_plan<heads_per_block = 4, keys_per_split = 512, "
        "targets = [sm_80]>")
    assert str(ir.xqa_mla_plan(heads_per_block=16, keys_per_tile=32,
                               shared_bytes=80640, resident_blocks=[2],
                               targets=["sm_90a"])) == (
        "#pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, "
        "shared_bytes = 80640, resident_blocks = [2], targets = [sm_90a]>")
    # The plan names its kernel where it is not the default, as pattn-opt
    # prints it, and the warpgroup kernel's 256 threads.
    assert str(ir.xqa_mla_plan(kernel="wgmma", heads_per_block=64,
                               keys_per_tile=32, shared_bytes=226944,
                               resident_blocks=[1],
                               targets=["sm_90a"])) == (
        "#pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, "
        "keys_per_tile = 32, shared_bytes = 226944, resident_blocks = [1], "
        "threads = 256, targets = [sm_90a]>")
    with pytest.raises(ir.IRTypeError, match="kernel must be one of"):
        ir.xqa_mla_plan(kernel="mma", heads_per_block=16, keys_per_tile=32,
                        shared_bytes=80640, resident_blocks=[1],
                        targets=["sm_90a"])


@pytest.mark.parametrize("build, message", [
    (lambda: ir.portable_plan(heads_per_block=4, keys_per_split=512,
                              targets=[]), "at least one chip"),
    (lambda: ir.portable_plan(heads_per_block=4, keys_per_split=512,
                              targets=["sm_90a", "sm_90a"]), "each once"),
    (lambda: ir.portable_plan(heads_per_block=4, keys_per_split=512,
                              targets=["h100"]), "'h100' is not a chip"),
    (lambda: ir.portable_plan(heads_per_block=4, keys_per_split=512,
                              targets="sm_90a"), "must be a list of chips"),
    (lambda: ir.xqa_mla_plan(heads_per_block=16, keys_per_tile=32,
                             shared_bytes=1, resident_blocks=[1, 2],
                             targets=["sm_90a"]), "2 counts for 1 targets"),
    (lambda: ir.xqa_plan(operand="f32", rows=16, keys_per_tile=64, stages=3,
                         key_warps=4, value_warps=1, keys_per_split=2048,
                         shared_bytes=1, resident_blocks=[1],
                         targets=["sm_90a"]), "operand must be f16 or bf16"),
])
def test_plans_reject_bad_targets_and_schedules(build, message):
    with pytest.raises(ir.IRError, match=message):
        build()


def test_mla_decode_takes_its_own_xqa_plan():
    """pattn.mla_decode's tensor-core kernel has its own plan: the paged
    XQA plan is refused for it, as the dialect's verifier refuses it."""
    m = ir.Module()
    f = m.function("mla")
    record = ir.record("fp8_ds_mla")
    args = [f.arg("q", ir.memref([2, 16, 576], "bf16")),
            f.arg("c", ir.record_cache(64, record)),
            f.arg("bt", ir.memref([2, 8], "i32")),
            f.arg("sl", ir.memref([2], "i32")),
            f.arg("o", ir.memref([2, 16, 512], "bf16"))]
    with pytest.raises(ir.IRError, match=r"backend 'xqa' needs an "
                       r"ir.xqa_mla_plan\(...\), got #pattn.xqa_plan"):
        f.mla_decode(*args, backend="xqa", plan=XQA)
    f.mla_decode(*args, backend="xqa", plan=XQA_MLA)


def test_floats_print_exactly():
    rng = random.Random(11)
    patterns = [0x00000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x80000000,
                0x3F800000, 0x3DB5DCC6, 0x4B000001, 0x5A0E1BCA]
    patterns += [rng.getrandbits(32) & 0x7F7FFFFF | rng.getrandbits(1) << 31
                 for _ in range(2000)]
    for bits in patterns:
        value = struct.unpack("<I", struct.pack("<I", bits))[0]
        number = struct.unpack("<f", struct.pack("<I", value))[0]
        text = ir.f32_literal(number)
        assert "." in text, text
        assert struct.pack("<f", float(text)) == struct.pack("<I", bits), text
    assert ir.f32_literal(0.0721) == "0.07209999859333038"
    assert ir.f32_literal(1e16) == "1.0000000272564224e+16"
    assert ir.f32_literal(2.0 ** 60) == "1.152921504606847e+18"
    assert ir.f32_literal(float("inf")) == "0x7F800000"
    assert ir.f32_literal(float("-inf")) == "0xFF800000"
    assert ir.f32_literal(float("nan")) == "0x7FC00000"


def test_functions_name_their_arguments():
    f = ir.Function("decode_step")
    q = f.arg("query", ir.memref([4, 32, 128], "f16"))
    s = f.arg("seq_lens", ir.memref([4], "i32"), pattn_name=True)
    assert str(q) == "%query" and q.type == ir.memref([4, 32, 128], "f16")
    assert f.args == (q, s)
    assert str(f) == ("func.func @decode_step(\n"
                      "    %query: memref<4x32x128xf16>,\n"
                      '    %seq_lens: memref<4xi32> {pattn.name = "seq_lens"}'
                      ") {\n  return\n}\n")
    assert str(ir.Function("empty")) == "func.func @empty() {\n  return\n}\n"


def test_results_are_named_or_numbered():
    f = ir.Function("f")
    kind = ir.cache(block_size=16, kv_heads=1, head_dim=64, encoding="f16")
    pages = f.arg("pages", kind.storage_type())
    first = f.bind_cache(pages, kind)
    named = f.bind_cache(pages, kind, name="k")
    second = f.bind_cache(pages, kind)
    assert [str(v) for v in (first, named, second)] == ["%0", "%k", "%1"]
    assert [op.name for op in f.ops] == ["pattn.bind_cache"] * 3
    assert f.ops[1].operands == {"storage": pages}
    assert f.ops[1].results == (named,)


def test_module_prints_comment_aliases_globals_then_functions():
    m = ir.Module(comment="two\nlines")
    kind = m.alias("kc", ir.cache(block_size=16, kv_heads=1, head_dim=8,
                                  encoding="i8", scale="channel"))
    records = ir.Alias("rec", ir.record("fp8_ds_mla"))
    rc = m.alias("rc", ir.record_cache(64, records))
    f = m.function("f")
    f.arg("k", kind)
    f.constant_table("t", [[1.0] * 8])
    g = m.function("g")
    g.arg("r", rc)
    g.constant_table("t", [[1.0] * 8])  # the same global, shared
    assert m.aliases == (kind, records, rc)
    assert str(m) == (
        "// two\n// lines\n"
        "!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, "
        "encoding = i8, scale = channel>\n"
        "!rec = !pattn.record<fp8_ds_mla>\n"
        "!rc = !pattn.record_cache<block_size = 64, record = !rec>\n\n"
        'memref.global "private" constant @t : memref<1x8xf32> = dense<"0x'
        + "0000803F" * 8 + '">\n\n'
        "func.func @f(\n    %k: !kc) {\n"
        "  %t = memref.get_global @t : memref<1x8xf32>\n  return\n}\n\n"
        "func.func @g(\n    %r: !rc) {\n"
        "  %t = memref.get_global @t : memref<1x8xf32>\n  return\n}\n")
    assert m["g"] is g and m.functions == (f, g)
    assert str(ir.Module()) == ""


def test_import_is_torch_and_numpy_free():
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import pattn; "
              "from pattn import ir; "
              "print(sorted(m for m in ('torch', 'numpy') "
              "if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", script,
                             str(REPO / "python")], capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == "[]"


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def _function():
    f = ir.Function("f")
    kind = ir.cache(block_size=16, kv_heads=2, head_dim=64, encoding="i8",
                    scale="tensor")
    pages = f.arg("pages", kind.storage_type())
    q = f.arg("q", ir.memref([None, 8, 64], "f16"))
    k = f.bind_cache(pages, kind, name="k")
    return f, pages, q, k


def _other_function_value():
    f, _, _, _ = _function()
    g = ir.Function("g")
    q = g.arg("q", ir.memref([2, 8, 64], "f16"))
    f.paged_attention(q, q, q, q, q, q)


def _attention(**kwargs):
    f, pages, q, k = _function()
    operands = dict(query=q, key=k, value=k, block_table=pages,
                    seq_lens=pages, out=q)
    operands.update(kwargs)
    f.paged_attention(**operands)


BAD = [
    (lambda: ir.memref([4], "float16"), ir.IRError,
     r"ir.memref: argument 'element' is 'float16', not an element type; "
     r"did you mean 'f16'\?"),
    (lambda: ir.memref([4], "f8e4m3"), ir.IRError, r"did you mean 'f8E4M3FN'"),
    (lambda: ir.memref([4], "q7"), ir.IRError,
     r"argument 'element' is 'q7'; expected one of f16, bf16"),
    (lambda: ir.memref([4.0], "f16"), ir.IRTypeError,
     r"ir.memref: argument 'shape\[0\]' must be an int, got float 4.0"),
    (lambda: ir.memref([True], "f16"), ir.IRTypeError,
     r"argument 'shape\[0\]' must be an int, got bool"),
    (lambda: ir.memref([-1], "f16"), ir.IRError,
     r"argument 'shape\[0\]' is -1, outside \[0, "),
    (lambda: ir.memref("4x4", "f16"), ir.IRTypeError,
     r"argument 'shape' must be a sequence of sizes"),
    (lambda: ir.memref([4], "f16", "x"), ir.IRTypeError,
     r"ir.memref: too many positional arguments"),
    (lambda: ir.cache(block_size=16, kv_heads=8, head_dim=128,
                      encoding="int4"), ir.IRError,
     r"ir.cache: argument 'encoding' is 'int4'; expected one of f16, bf16, "
     r"i8, f8e4m3, f8e5m2, i4, nvfp4"),
    (lambda: ir.cache(block_size=16, kv_heads=8, head_dim=128,
                      encoding="i8", scale="row"), ir.IRError,
     r"argument 'scale' is 'row'; expected one of none, tensor, channel"),
    (lambda: ir.cache(block_size=16, kv_heads=8, head_dim=128,
                      encoding="i8", layout="NHD"), ir.IRError,
     r"argument 'layout' is 'NHD'; expected one of nhd, hnd"),
    (lambda: ir.cache(block_size="16", kv_heads=8, head_dim=128,
                      encoding="i8"), ir.IRTypeError,
     r"ir.cache: argument 'block_size' must be an int, got str"),
    (lambda: ir.cache(16, 8, 128, "i8"), ir.IRTypeError,
     r"ir.cache: too many positional arguments"),
    (lambda: ir.cache(block_size=16, kv_heads=8, head_dim=128, encoding="i8",
                      blocks=4), ir.IRTypeError,
     r"ir.cache: got an unexpected keyword argument 'blocks'"),
    (lambda: ir.cache(block_size=16, kv_heads=8, head_dim=128,
                      encoding="i8").replace(heads=2), ir.IRTypeError,
     r"CacheType.replace: unknown parameter 'heads'"),
    (lambda: ir.record("fp4_ds_mla"), ir.IRError,
     r"ir.record: argument 'preset' is 'fp4_ds_mla'; expected one of "
     r"fp8_ds_mla, nvfp4_ds_mla, nvfp4_ds_mla_fp8_rope"),
    (lambda: ir.record("fp8_ds_mla", "channel"), ir.IRError,
     r"argument 'mode' is 'channel'; expected one of none, tensor, token"),
    (lambda: ir.record(bytes=32, lanes=[ir.lane("a", 4, "f32", 0)]),
     ir.IRTypeError, r"needs its 'mode'"),
    (lambda: ir.record(bytes=32, mode="none", lanes=["a"]), ir.IRTypeError,
     r"ir.record: lanes\[0\] must be an ir.lane\(...\), got str"),
    (lambda: ir.record(), ir.IRTypeError, r"give a preset"),
    (lambda: ir.lane("a", 4, "f64", 0), ir.IRError,
     r"ir.lane: argument 'element' is 'f64'; expected one of f32, f16"),
    (lambda: ir.lane("a", -4, "f32", 0), ir.IRError,
     r"argument 'count' is -4, outside \[0, 4294967295\]"),
    (lambda: ir.record_cache(64, ir.memref([4], "i8")), ir.IRTypeError,
     r"ir.record_cache: argument 'record' must be an ir.record\(...\)"),
    (lambda: ir.Function("decode-step"), ir.IRError,
     r"ir.Function: argument 'name' is 'decode-step', which is not an "
     r"identifier .*C entry point"),
    (lambda: ir.Function("f").arg("k pages", ir.memref([4], "i8")),
     ir.IRError,
     r"ir.Function.arg: argument 'name' is 'k pages', which is not an "
     r"identifier \(\[A-Za-z_\]\[A-Za-z0-9_\]\*\): pattn-compile's manifest"),
    (lambda: ir.Function("f").arg("k", "memref<4xi8>"), ir.IRTypeError,
     r"ir.Function.arg: argument 'type' must be an ir type"),
    (lambda: _function()[0].arg("pages", ir.memref([4], "i8")), ir.IRError,
     r"ir.Function.arg: function @f already has a value named %pages"),
    (_other_function_value, ir.IRError,
     r"pattn.paged_attention: argument 'query' is %q of function @g, not of "
     r"@f"),
    (lambda: _attention(key="k"), ir.IRTypeError,
     r"pattn.paged_attention: argument 'key' must be an ir.Value"),
    (lambda: _attention(block_table=None), ir.IRTypeError,
     r"argument 'block_table' must be an ir.Value"),
    (lambda: _attention(num_heads=8.0), ir.IRTypeError,
     r"pattn.paged_attention: argument 'num_heads' must be an int, got "
     r"float 8.0"),
    (lambda: _attention(softmax_scale="0.1"), ir.IRTypeError,
     r"argument 'softmax_scale' must be a float, got str"),
    (lambda: _attention(softcap=1e39), ir.IRError,
     r"argument 'softcap' is 1e\+39, which does not fit in f32"),
    (lambda: _attention(guard_value=1), ir.IRError,
     r"arguments 'guard' and 'guard_value' come together"),
    (lambda: _attention(backend="cuda"), ir.IRError,
     r"argument 'backend' is 'cuda'; expected one of xqa, portable"),
    (lambda: _attention(plan=ir.portable_plan(heads_per_block=4,
                                              keys_per_split=512,
                                              targets=["sm_90a"])),
     ir.IRError, r"argument 'plan' needs backend='xqa' or 'portable'"),
    (lambda: _attention(backend="xqa", plan=ir.portable_plan(
        heads_per_block=4, keys_per_split=512, targets=["sm_90a"])),
     ir.IRError,
     r"backend 'xqa' needs an ir.xqa_plan\(...\), got "
     r"#pattn.portable_plan"),
    (lambda: _attention(backend="xqa", plan="xqa"), ir.IRTypeError,
     r"argument 'plan' must be an ir.xqa_plan\(...\) or "
     r"ir.portable_plan\(...\), got str"),
    (lambda: _attention(num_head=8), ir.IRTypeError,
     r"pattn.paged_attention: got an unexpected keyword argument "
     r"'num_head'"),
]


def _function_misuse():
    """Misuse of one function's ops."""
    f, pages, q, k = _function()
    return [
        (lambda: f.bind_cache(pages, ir.memref([4], "i8")), ir.IRTypeError,
         r"pattn.bind_cache: argument 'cache_type' must be an ir.cache"),
        (lambda: f.write_cache(k, k, pages), ir.IRTypeError,
         r"pattn.write_cache: argument 'values' must be a memref value, got "
         r"%k: !pattn.cache<block_size = 16"),
        (lambda: f.write_cache(q, pages, pages), ir.IRTypeError,
         r"pattn.write_cache: argument 'into' must be a !pattn.cache value, "
         r"got %pages: memref<\?x16x2x64xi8>"),
        (lambda: f.write_record(q, q, k, pages), ir.IRTypeError,
         r"pattn.write_record: argument 'into' must be a "
         r"!pattn.record_cache value, got %k"),
        (lambda: f.mla_decode(q, k, pages, pages, q), ir.IRTypeError,
         r"pattn.mla_decode: argument 'cache' must be a !pattn.record_cache "
         r"value"),
        (lambda: f.paged_attention(f.arg("dq", ir.memref([None, None, 64],
                                                          "f16")),
                                   k, k, pages, pages, q), ir.IRError,
         r"pattn.paged_attention: argument 'num_heads' is needed: the query "
         r"\(%dq: memref<\?x\?x64xf16>\) has no static head count"),
        (lambda: f.paged_attention(q, k, k, pages, pages, q, guard=pages,
                                   guard_value=1 << 31), ir.IRError,
         r"argument 'guard_value' is 2147483648, outside \[-2147483648, "
         r"2147483647\]"),
        (lambda: f.rescale_view(pages, "tensor"), ir.IRTypeError,
         r"pattn.rescale_view: argument 'source' must be a !pattn.cache "
         r"value"),
        (lambda: f.rescale_view(k, "row"), ir.IRError,
         r"pattn.rescale_view: argument 'to' is 'row'; expected one of"),
        (lambda: f.bind_cache(pages, k.type, name="k"), ir.IRError,
         r"pattn.bind_cache: function @f already has a value named %k"),
        (lambda: f.bind_cache(pages, k.type, name="bad name"), ir.IRError,
         r"argument 'name' is 'bad name', which is not an SSA name"),
        (lambda: f.bind_cache(pages, k.type, group_scales=k), ir.IRTypeError,
         r"pattn.bind_cache: argument 'group_scales' must be a memref value"),
        (lambda: f.scale_normalizer(pages, pages, pages), ir.IRTypeError,
         r"pattn.scale_normalizer: missing a required argument: "
         r"'softmax_scale'"),
        (lambda: f.constant_table("t", [[1.0, 2.0], [3.0]]), ir.IRError,
         r"ir.Function.constant_table: argument 'values' is ragged"),
        (lambda: f.constant_table("t", [1.0, 2.0], [3]), ir.IRError,
         r"shape \[3\] holds 3 values, but 'values' has 2"),
        (lambda: f.constant_table("t", [1.0], [None]), ir.IRError,
         r"a constant table has a static shape"),
        (lambda: f.constant_table("t", [1e39]), ir.IRError,
         r"argument 'values\[0\]' is 1e\+39, which does not fit in f32"),
        (lambda: f.constant_table("t", ["1"]), ir.IRTypeError,
         r"argument 'values\[0\]' must be a float, got str"),
        (lambda: f.constant_table("t", [1.5], element="i32"), ir.IRTypeError,
         r"argument 'values\[0\]' must be an int, got float"),
        (lambda: f.constant_table("t", [1.0], element="bf16"), ir.IRError,
         r"argument 'element' is 'bf16'; expected one of f32, f16, i8, i32, "
         r"i64"),
        (lambda: f.constant_table("t", 1.0), ir.IRTypeError,
         r"argument 'values' must be a sequence"),
        (lambda: (f.constant_table("t", [1.0]),
                  f.constant_table("u", [2.0], symbol="t")), ir.IRError,
         r"function @f already has a constant table @t with other values"),
    ]


def _module_misuse():
    m = ir.Module()
    m.alias("kc", ir.cache(block_size=16, kv_heads=1, head_dim=8,
                           encoding="f16"))
    return [
        (lambda: m.alias("kc", ir.cache(block_size=32, kv_heads=1,
                                        head_dim=8, encoding="f16")),
         ir.IRError, r"ir.Module.alias: !kc is already !pattn.cache<"
                     r"block_size = 16"),
        (lambda: m.alias("k.c", ir.memref([1], "f32")), ir.IRError,
         r"ir.Alias: argument 'name' is 'k.c', which is not an identifier"),
        (lambda: m.alias("a", m.alias("b", ir.memref([1], "f32"))),
         ir.IRTypeError, r"argument 'type' must be a type \(not an alias\)"),
        (lambda: (m.function("f"), m.add(ir.Function("f"))), ir.IRError,
         r"ir.Module.add: the module already has a function @f"),
        (lambda: m.add("f"), ir.IRTypeError,
         r"ir.Module.add: argument 'function' must be an ir.Function"),
        (lambda: ir.Module(comment=3), ir.IRTypeError,
         r"ir.Module: argument 'comment' must be a str"),
    ]


def _conflicting_globals():
    m = ir.Module()
    m.function("f").constant_table("t", [1.0])
    m.function("g").constant_table("t", [2.0])
    str(m)


def _conflicting_aliases():
    m = ir.Module()
    m.function("f").arg("a", ir.Alias("x", ir.memref([1], "f32")))
    m.function("g").arg("a", ir.Alias("x", ir.memref([2], "f32")))
    m.aliases


@pytest.mark.parametrize("call, error, message", BAD + _function_misuse()
                         + _module_misuse() + [
    (_conflicting_globals, ir.IRError,
     r"ir.Module: @f and @g define the constant table @t differently"),
    (_conflicting_aliases, ir.IRError,
     r"ir.Module: @g uses !x = memref<2xf32>, but the module has "
     r"!x = memref<1xf32>"),
])
def test_bad_input_raises_pattn_errors_naming_the_argument(call, error,
                                                           message):
    with pytest.raises(error, match=message) as caught:
        call()
    assert isinstance(caught.value, pattn.ArgumentError)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, TypeError) == issubclass(
        error, ir.IRTypeError)


def test_a_rejected_op_leaves_the_function_as_it_was():
    f, pages, q, k = _function()
    before = str(f)
    with pytest.raises(ir.IRError):
        f.paged_attention(q, k, k, pages, pages, q, guard_value=1)
    with pytest.raises(ir.IRError):
        f.bind_cache(pages, k.type, group_scales=ir.Function("g").arg(
            "x", ir.memref([1], "i8")), name="kept")
    assert str(f) == before
    f.bind_cache(pages, k.type, name="kept")  # the name was not taken


# ---------------------------------------------------------------------------
# Through pattn-opt: every op, operand and attribute
# ---------------------------------------------------------------------------

HEAD, KV, HEADS, BATCH = 64, 2, 8, 2
XQA = ir.xqa_plan(rows=16, keys_per_tile=64, stages=3, key_warps=4,
                  value_warps=1, keys_per_split=2048, shared_bytes=41984,
                  resident_blocks=[4], targets=["sm_90a"])
PORTABLE = ir.portable_plan(heads_per_block=4, keys_per_split=512,
                            targets=["sm_90a"])
ATTENTION_OPERANDS = ("query", "key", "value", "block_table", "seq_lens",
                      "query_start", "k_scale", "v_scale", "sinks",
                      "out_scale", "guard", "query_exponents", "out")
XQA_MLA = ir.xqa_mla_plan(heads_per_block=16, keys_per_tile=32,
                          shared_bytes=80640, resident_blocks=[2],
                          targets=["sm_90a"])


def _scaled_cache(scale):
    encoding = {"none": "f16", "tensor": "i8", "channel": "i4"}[scale]
    return ir.cache(block_size=16, kv_heads=KV, head_dim=HEAD,
                    encoding=encoding, scale=scale)


def _attention_function(module, index, k, v, features, attributes,
                        backend):
    """Function ``c<index>``: paged_attention over K and V caches of the
    scales ``k``/``v`` with the optional operands in ``features``, the
    attributes in ``attributes`` and ``backend`` (None, a backend, or one
    with its plan). Returns it with the operands it was given by name and
    the attributes expected in the generic form."""
    f = module.function(f"c{index}")
    key = f.arg("key", _scaled_cache(k))
    value = f.arg("value", _scaled_cache(v))
    tokens = 3 * BATCH if "query_start" in features else BATCH
    given = {
        "query": f.arg("query", ir.memref([tokens, HEADS, HEAD], "bf16")),
        "key": key, "value": value,
        "block_table": f.arg("block_table", ir.memref([BATCH, 4], "i32")),
        "seq_lens": f.arg("seq_lens", ir.memref([BATCH], "i32")),
        "out": f.arg("out", ir.memref([tokens, HEADS, HEAD], "bf16"))}
    if k != "none":
        given["k_scale"] = f.arg("k_scale", key.type.scale_type())
    if v != "none":
        given["v_scale"] = f.arg("v_scale", value.type.scale_type())
    shapes = {"query_start": ([BATCH + 1], "i32"), "sinks": ([HEADS], "f32"),
              "out_scale": ([KV, HEAD], "f32"), "guard": ([1], "i32"),
              "query_exponents": ([tokens, HEADS], "i32")}
    for name in features:
        given[name] = f.arg(name, ir.memref(*shapes[name]))
    expected = {"num_heads": f"{HEADS} : i64",
                "max_query_len": "1 : i64", "softcap": 0.0,
                "window": "-1 : i64"}
    kwargs = {}
    if "query_start" in features:
        kwargs["max_query_len"] = 3
        expected["max_query_len"] = "3 : i64"
    if "guard" in features:
        kwargs["guard_value"] = -7
        expected["guard_value"] = "-7 : i32"
    if "softmax_scale" in attributes:
        kwargs["softmax_scale"] = expected["softmax_scale"] = 0.0883883
    if "softcap" in attributes:
        kwargs["softcap"] = expected["softcap"] = 50.0
    if "window" in attributes:
        kwargs["window"] = 4096
        expected["window"] = "4096 : i64"
    if backend:
        name = backend.split("+")[0]
        kwargs["backend"] = name
        expected["backend"] = f"#pattn.backend<{name}>"
        if backend.endswith("+plan"):
            kwargs["plan"] = XQA if name == "xqa" else PORTABLE
            expected["plan"] = str(kwargs["plan"])
    # num_heads is inferred from the query every other time.
    if index % 2:
        kwargs["num_heads"] = HEADS
    f.paged_attention(**given, **kwargs)
    return f, given, expected


def _attention_cases():
    optional = ("query_start", "sinks", "out_scale", "guard",
                "query_exponents")
    for k, v in itertools.product(("none", "tensor", "channel"), repeat=2):
        for count in range(len(optional) + 1):
            for features in itertools.combinations(optional, count):
                if "query_exponents" in features and k != "tensor":
                    continue  # the verifier's rule: a folded (tensor) K
                yield k, v, features


def _check_segments(f, operands, properties, order, given):
    """The op's operands are the ``given`` ones, in the op's ``order``,
    wired to the right arguments, with one segment size each."""
    present = [n for n in order if n in given]
    assert operands == [f.args.index(given[n]) for n in present]
    sizes = [int(x) for x in re.search(
        r"array<i32: ([\d, ]+)>", properties["operandSegmentSizes"]
    ).group(1).split(",")]
    assert sizes == [int(n in given) for n in order]


def _check_properties(properties, expected):
    for name, want in expected.items():
        assert name in properties, (name, properties)
        if isinstance(want, float):
            assert printed_f32(properties[name]) == f32(want), (name,
                                                               properties)
        else:
            assert properties[name] == want, (name, properties)
    others = set(properties) - set(expected) - {"operandSegmentSizes"}
    assert not others, others


def test_paged_attention_every_operand_and_attribute_combination(opt):
    """Every subset of the optional operands over every pair of K/V scale
    granularities, and every subset of the attributes with every backend
    (and plan), as one module of functions: each verifies, re-prints to the
    same generic form, and has its operands in the right segments, wired
    to the right arguments, with the given attributes."""
    m = ir.Module()
    built = []
    attribute_sets = [set(c) for n in range(4) for c in itertools.combinations(
        ("softmax_scale", "softcap", "window"), n)]
    backends = (None, "xqa", "portable", "xqa+plan", "portable+plan")
    cases = list(_attention_cases())
    for index, (k, v, features) in enumerate(cases):
        attributes = attribute_sets[index % len(attribute_sets)]
        built.append(_attention_function(m, index, k, v, features,
                                         attributes,
                                         backends[index % len(backends)]))
    # ... and every attribute subset with every backend, on all operands.
    for attributes, backend in itertools.product(attribute_sets, backends):
        built.append(_attention_function(
            m, len(built), "tensor", "channel",
            ("query_start", "sinks", "out_scale", "guard",
             "query_exponents"), attributes, backend))
    assert len(built) == len(cases) + 40 == 232
    ops = generic_ops(round_trip(opt, m))
    for f, given, expected in built:
        [(name, operands, properties)] = ops[f.name]
        assert name == "pattn.paged_attention"
        _check_segments(f, operands, properties, ATTENTION_OPERANDS, given)
        _check_properties(properties, expected)


def test_mla_decode_every_operand_and_attribute_combination(opt):
    m = ir.Module()
    built = []
    records = [("fp8_ds_mla", None), ("nvfp4_ds_mla", "tensor"),
               ("nvfp4_ds_mla_fp8_rope", "token"),
               ("nvfp4_ds_mla_fp8_rope", None)]
    backends = (None, "xqa", "portable", "xqa+plan", "portable+plan")
    for (preset, mode), spec, scaled, backend in itertools.product(
            records, (False, True), (False, True), backends):
        f = m.function(f"m{len(built)}")
        record = ir.record(preset, mode)
        tokens = 4 * BATCH if spec else BATCH
        given = {"query": f.arg("query", ir.memref([tokens, 16, 576], "f16")),
                 "cache": f.arg("cache", ir.record_cache(64, record)),
                 "block_table": f.arg("bt", ir.memref([BATCH, 8], "i32")),
                 "seq_lens": f.arg("sl", ir.memref([BATCH], "i32"))}
        kwargs = {}
        expected = {"num_heads": "16 : i64", "max_query_len": "1 : i64"}
        if spec:
            given["query_start"] = f.arg("qs", ir.memref([BATCH + 1], "i32"))
            kwargs["max_query_len"] = 4
            expected["max_query_len"] = "4 : i64"
        if record.mode == "tensor":
            given["outer_scale"] = f.arg("s", ir.memref([1], "f32"))
        given["out"] = f.arg("out", ir.memref([tokens, 16, 512], "f16"))
        if scaled:
            kwargs["softmax_scale"] = expected["softmax_scale"] = 0.041666
        if backend:
            name = backend.split("+")[0]
            kwargs["backend"] = name
            expected["backend"] = f"#pattn.backend<{name}>"
            if backend.endswith("+plan"):
                kwargs["plan"] = XQA_MLA if name == "xqa" else PORTABLE
                expected["plan"] = str(kwargs["plan"])
        f.mla_decode(given["query"], given["cache"], given["block_table"],
                     given["seq_lens"], given["out"],
                     query_start=given.get("query_start"),
                     outer_scale=given.get("outer_scale"), **kwargs)
        built.append((f, given, expected))
    ops = generic_ops(round_trip(opt, m))
    order = ("query", "cache", "block_table", "seq_lens", "query_start",
             "outer_scale", "out")
    for f, given, expected in built:
        [(name, operands, properties)] = ops[f.name]
        assert name == "pattn.mla_decode"
        assert operands == [f.args.index(given[n]) for n in order
                            if n in given]
        sizes = ", ".join(str(int(n in given)) for n in order)
        assert properties["operandSegmentSizes"] == f"array<i32: {sizes}>"
        _check_properties(properties, expected)


def _every_cache_kind():
    for encoding in ir.ENCODINGS:
        scales = {"f16": ("none",), "bf16": ("none",),
                  "nvfp4": ("tensor", "token")}.get(
            encoding, ("tensor", "channel", "token"))
        for scale, layout in itertools.product(scales, (None, "nhd", "hnd")):
            yield ir.cache(block_size=32, kv_heads=4, head_dim=64,
                           encoding=encoding, scale=scale, layout=layout)


def test_every_cache_binds_its_derived_buffers_and_takes_writes(opt):
    """bind_cache with the buffers the cache type derives (storage, group
    scales, token scales) and write_cache with its scale, for every
    encoding, granularity and layout: the verifier agrees with the derived
    shapes, and the optional operands land in their segments."""
    m = ir.Module()
    built = []
    for index, kind in enumerate(_every_cache_kind()):
        f = m.function(f"w{index}")
        buffers = {"storage": f.arg("pages", kind.storage_type())}
        if kind.group_scales_type() is not None:
            buffers["group_scales"] = f.arg("groups",
                                            kind.group_scales_type())
        if kind.token_scales_type() is not None:
            buffers["token_scales"] = f.arg("tokens",
                                            kind.token_scales_type())
        values = f.arg("values", ir.memref([None, 4, 64], "f32"))
        slots = f.arg("slots", ir.memref([None], "i32"))
        scale = (f.arg("scale", kind.scale_type()) if kind.scale_type()
                 else None)
        cache = f.bind_cache(buffers["storage"], kind,
                             group_scales=buffers.get("group_scales"),
                             token_scales=buffers.get("token_scales"))
        f.write_cache(values, cache, slots, scale=scale)
        built.append((f, buffers, scale))
    ops = generic_ops(round_trip(opt, m))
    for f, buffers, scale in built:
        [(bind, bind_operands, bind_properties),
         (write, write_operands, _)] = ops[f.name]
        assert (bind, write) == ("pattn.bind_cache", "pattn.write_cache")
        order = ("storage", "group_scales", "token_scales")
        assert bind_operands == [f.args.index(buffers[n])
                                 for n in order if n in buffers]
        assert bind_properties["operandSegmentSizes"] == \
            f"array<i32: {', '.join(str(int(n in buffers)) for n in order)}>"
        assert len(write_operands) == 3 + (scale is not None)


def test_write_record_and_record_types(opt):
    m = ir.Module()
    for index, (preset, mode) in enumerate([
            ("fp8_ds_mla", None), ("fp8_ds_mla", "none"),
            ("nvfp4_ds_mla", None), ("nvfp4_ds_mla", "tensor"),
            ("nvfp4_ds_mla_fp8_rope", "tensor"),
            ("nvfp4_ds_mla_fp8_rope", "token")]):
        record = ir.record(preset, mode)
        f = m.function(f"r{index}")
        kind = ir.record_cache(16, m.alias(f"rec{index}", record))
        pages = f.arg("pages", kind.storage_type(5))
        latent = f.arg("latent", ir.memref([3, 512], "bf16"))
        rope = f.arg("rope", ir.memref([3, 64], "bf16"))
        slots = f.arg("slots", ir.memref([3], "i64"))
        outer = (f.arg("outer", ir.memref([1], "f32"))
                 if record.mode == "tensor" else None)
        f.write_record(latent, rope, f.bind_cache(pages, kind), slots,
                       outer_scale=outer)
    # Records written lane by lane, a preset among them, as types.
    lanes = [ir.lane("q", 32, "f4E2M1FN", 0, scaled_by="sf"),
             ir.lane("sf", 2, "f8E4M3FN", 16),
             ir.lane("raw bits", 8, "i8", 18), ir.lane("h", 4, "f16", 26)]
    size, mode, preset_lanes = ir.PRESETS["fp8_ds_mla"]
    f = m.function("types")
    f.arg("a", ir.record_cache(64, ir.record(bytes=48, mode="tensor",
                                             lanes=lanes)))
    f.arg("b", ir.record_cache(64, ir.record(bytes=size, mode=mode,
                                             lanes=preset_lanes)))
    generic = round_trip(opt, m)
    assert generic.count('"pattn.write_record"') == 6
    assert generic.count("operandSegmentSizes") == 6  # the bind_caches
    printed = run_opt(opt, str(m))
    assert ('!pattn.record<48 bytes, tensor, {q: 32 x f4E2M1FN at 0 '
            'scaled_by sf, sf: 2 x f8E4M3FN at 16, "raw bits": 8 x i8 at 18, '
            'h: 4 x f16 at 26}>') in printed
    assert "record = !pattn.record<fp8_ds_mla>>" in printed


ROTARY_OPERANDS = ("input", "cos", "sin", "positions", "seq_lens",
                   "query_start", "norm_weight", "out")


def test_rotary_every_position_mode_and_attribute(opt):
    """pattn.rotary with each position source (i32 and i64 positions,
    seq_lens, seq_lens + query_start), with and without the norm weight,
    every table type, in place and into another buffer, and its attributes
    set and at their defaults: each verifies, re-prints to the same generic
    form, and has its operands in the right segments with the given
    attributes (defaults left out)."""
    m = ir.Module()
    built = []
    modes = ("positions_i32", "positions_i64", "seq_lens", "query_start")
    for index, (mode, norm, table, in_place) in enumerate(itertools.product(
            modes, (None, "bf16"), ("f16", "bf16", "f32"), (False, True))):
        f = m.function(f"rot{index}")
        tokens = 6
        given = {"input": f.arg("x", ir.memref([tokens, 12, 64], "f16")),
                 "cos": f.arg("cos", ir.memref([None, 16], table)),
                 "sin": f.arg("sin", ir.memref([None, 16], table))}
        if mode.startswith("positions"):
            given["positions"] = f.arg("pos", ir.memref([tokens],
                                                        mode[-3:]))
        else:
            batch = 3 if mode == "query_start" else tokens
            given["seq_lens"] = f.arg("sl", ir.memref([batch], "i32"))
            if mode == "query_start":
                given["query_start"] = f.arg("qs", ir.memref([4], "i32"))
        if norm:
            given["norm_weight"] = f.arg("w", ir.memref([64], norm))
        given["out"] = given["input"] if in_place else f.arg(
            "out", ir.memref([tokens, 4, 64], "f16"))
        kwargs, expected = {}, {}
        if index % 2:
            kwargs.update(interleaved=True, position_offset=-3,
                          norm_epsilon=1e-5)
            expected.update(interleaved="true", position_offset="-3 : i64",
                            norm_epsilon=1e-5)
        if not in_place and index % 3 == 0:
            kwargs["first_head"] = 8
            expected["first_head"] = "8 : i64"
        f.rotary(given["input"], given["cos"], given["sin"], given["out"],
                 **{k: v for k, v in given.items()
                    if k not in ("input", "cos", "sin", "out")}, **kwargs)
        built.append((f, given, expected))
    ops = generic_ops(round_trip(opt, m))
    assert len(built) == 48
    for f, given, expected in built:
        [(name, operands, properties)] = ops[f.name]
        assert name == "pattn.rotary"
        _check_segments(f, operands, properties, ROTARY_OPERANDS, given)
        # The printed defaults are left out; the parsed op has them all.
        want = {"interleaved": "false", "first_head": "0 : i64",
                "position_offset": "0 : i64", "norm_epsilon": 1e-6}
        want.update(expected)
        _check_properties(properties, want)
    printed = str(m)
    assert "interleaved = false" not in printed
    assert "norm_epsilon = 9.999999974752427e-07" not in printed


def test_rotary_takes_exactly_one_position_source():
    m = ir.Module()
    f = m.function("f")
    x = f.arg("x", ir.memref([2, 4, 64], "f16"))
    table = f.arg("cos", ir.memref([None, 32], "f16"))
    pos = f.arg("pos", ir.memref([2], "i32"))
    with pytest.raises(pattn.IRError, match="exactly one of 'positions'"):
        f.rotary(x, table, table, x)
    with pytest.raises(pattn.IRError, match="exactly one of 'positions'"):
        f.rotary(x, table, table, x, positions=pos, seq_lens=pos)
    with pytest.raises(pattn.IRTypeError,
                       match="argument 'interleaved' must be True or False"):
        f.rotary(x, table, table, x, positions=pos, interleaved=1)


def test_the_fold_forms(opt):
    """rescale_view (to a type, to a granularity), scale_normalizer,
    fold_query and the folded paged_attention, as the fold pass writes
    them (round-trip.mlir's fold_forms)."""
    m = ir.Module()
    f = m.function("fold_forms")
    i4c = ir.cache(block_size=16, kv_heads=8, head_dim=128, encoding="i4",
                   scale="channel")
    i8c = i4c.replace(encoding="i8")
    k, v = f.arg("k", i4c), f.arg("v", i8c)
    q = f.arg("q", ir.memref([4, 32, 128], "f16"))
    ks = f.arg("ks", ir.memref([8, 128], "f32"))
    vs = f.arg("vs", ir.memref([8, 128], "f32"))
    n = f.arg("n", ir.memref([1], "f32"))
    flag = f.arg("flag", ir.memref([1], "i32"))
    qf = f.arg("qf", ir.memref([4, 32, 128], "f16"))
    e = f.arg("e", ir.memref([4, 32], "i32"))
    bt = f.arg("bt", ir.memref([4, 8], "i32"))
    sl = f.arg("sl", ir.memref([4], "i32"))
    o = f.arg("o", ir.memref([4, 32, 128], "f16"))
    kt = f.rescale_view(k, i4c.replace(scale="tensor"), name="kt")
    vu = f.rescale_view(v, "none")
    assert vu.type == i8c.replace(scale="none")
    f.scale_normalizer(ks, n, flag, softmax_scale=0.08837890625)
    f.fold_query(q, ks, n, qf, e)
    f.fold_query(q, ks, n, qf, e, num_heads=32)
    f.paged_attention(qf, kt, vu, bt, sl, o, k_scale=n, out_scale=vs,
                      guard=flag, guard_value=1, query_exponents=e,
                      backend="xqa", plan=XQA)
    ops = generic_ops(round_trip(opt, m))["fold_forms"]
    assert [name for name, _, _ in ops] == [
        "pattn.rescale_view", "pattn.rescale_view", "pattn.scale_normalizer",
        "pattn.fold_query", "pattn.fold_query", "pattn.paged_attention"]
    assert printed_f32(ops[2][2]["softmax_scale"]) == 0.08837890625
    assert ops[3][2] == ops[4][2] == {"num_heads": "32 : i64"}
    assert ops[3][1] == [2, 3, 5, 7, 8]


@pytest.mark.parametrize("form", ["global", "tensor"])
def test_constant_tables_fold_at_compile_time(opt, form):
    """A K channel table from constant_table, in either form, is folded by
    --pattn-fold-channel-scales statically: a normalizer global, no
    device-side scale_normalizer or guard."""
    m = ir.Module()
    kind = m.alias("kc", ir.cache(block_size=16, kv_heads=1, head_dim=8,
                                  encoding="i8", scale="channel"))
    f = m.function("seed")
    k = f.arg("k", kind)
    q = f.arg("q", ir.memref([2, 4, 8], "f16"))
    bt = f.arg("bt", ir.memref([2, 4], "i32"))
    sl = f.arg("sl", ir.memref([2], "i32"))
    o = f.arg("o", ir.memref([2, 4, 8], "f16"))
    table = f.constant_table(
        "k_scale", [[1000.0, 0.0, -500.0, 1.0, 250.0, 0.5, 0.25, 999.0]],
        form=form)
    assert table.type == ir.memref([1, 8], "f32")
    f.paged_attention(q, k, k, bt, sl, o, k_scale=table, v_scale=table)
    folded = run_opt(opt, str(m), "--pattn-fold-channel-scales")
    assert "@__pattn_k_normalizer : memref<1xf32> = dense<1.024000e+03>" in \
        folded
    assert "pattn.fold_query" in folded
    assert "scale_normalizer" not in folded and "guard" not in folded


# ---------------------------------------------------------------------------
# The examples, rebuilt
# ---------------------------------------------------------------------------


def _decode_int4():
    m = ir.Module()
    k_cache = m.alias("k_cache", ir.cache(block_size=16, kv_heads=8,
                                          head_dim=128, encoding="i4",
                                          scale="channel"))
    v_cache = m.alias("v_cache", k_cache.replace(encoding="i8",
                                                 scale="tensor"))
    f = m.function("decode_step")
    k_pages = f.arg("k_pages", k_cache.storage_type())
    v_pages = f.arg("v_pages", v_cache.storage_type())
    k_new = f.arg("k_new", ir.memref([4, 8, 128], "f16"))
    v_new = f.arg("v_new", ir.memref([4, 8, 128], "f16"))
    slots = f.arg("slots", ir.memref([4], "i64"))
    k_scale = f.arg("k_scale", k_cache.scale_type())
    v_scale = f.arg("v_scale", v_cache.scale_type())
    query = f.arg("query", ir.memref([4, 32, 128], "f16"))
    block_table = f.arg("block_table", ir.memref([4, 512], "i32"))
    seq_lens = f.arg("seq_lens", ir.memref([4], "i32"))
    out = f.arg("out", ir.memref([4, 32, 128], "f16"))
    k = f.bind_cache(k_pages, k_cache, name="k")
    v = f.bind_cache(v_pages, v_cache, name="v")
    f.write_cache(k_new, k, slots, scale=k_scale)
    f.write_cache(v_new, v, slots, scale=v_scale)
    f.paged_attention(query, k, v, block_table, seq_lens, out,
                      k_scale=k_scale, v_scale=v_scale, num_heads=32)
    return m


def _decode_nvfp4_hnd():
    m = ir.Module()
    k_cache = m.alias("k_cache", ir.cache(block_size=32, kv_heads=8,
                                          head_dim=64, encoding="nvfp4",
                                          scale="token", layout="hnd"))
    v_cache = m.alias("v_cache", k_cache.replace(encoding="f8e4m3"))
    f = m.function("decode_sliding")
    k_pages = f.arg("k_pages", k_cache.storage_type())
    k_groups = f.arg("k_groups", k_cache.group_scales_type())
    k_tokens = f.arg("k_tokens", k_cache.token_scales_type())
    v_pages = f.arg("v_pages", v_cache.storage_type())
    v_tokens = f.arg("v_tokens", v_cache.token_scales_type())
    query = f.arg("query", ir.memref([None, 64, 64], "bf16"))
    block_table = f.arg("block_table", ir.memref([None, 128], "i32"))
    seq_lens = f.arg("seq_lens", ir.memref([None], "i32"))
    sinks = f.arg("sinks", ir.memref([64], "f32"))
    out = f.arg("out", ir.memref([None, 64, 64], "bf16"))
    k = f.bind_cache(k_pages, k_cache, group_scales=k_groups,
                     token_scales=k_tokens, name="k")
    v = f.bind_cache(v_pages, v_cache, token_scales=v_tokens, name="v")
    f.paged_attention(query, k, v, block_table, seq_lens, out, sinks=sinks,
                      num_heads=64, softcap=30.0, window=4096)
    return m


def _mla_nvfp4():
    m = ir.Module()
    records = m.alias("records", ir.record_cache(
        64, ir.record("nvfp4_ds_mla_fp8_rope", "token")))
    f = m.function("mla_step")
    pages = f.arg("pages", records.storage_type())
    latent = f.arg("latent", ir.memref([8, 512], "bf16"))
    rope = f.arg("rope", ir.memref([8, 64], "bf16"))
    slots = f.arg("slots", ir.memref([8], "i64"))
    query = f.arg("query", ir.memref([8, 16, 576], "bf16"))
    block_table = f.arg("block_table", ir.memref([2, 32], "i32"))
    seq_lens = f.arg("seq_lens", ir.memref([2], "i32"))
    query_start = f.arg("query_start", ir.memref([3], "i32"))
    out = f.arg("out", ir.memref([8, 16, 512], "bf16"))
    cache = f.bind_cache(pages, records, name="cache")
    f.write_record(latent, rope, cache, slots)
    f.mla_decode(query, cache, block_table, seq_lens, out,
                 query_start=query_start, max_query_len=4,
                 softmax_scale=0.0721)
    return m


EXAMPLES = {"decode_int4.mlir": _decode_int4,
            "decode_nvfp4_hnd.mlir": _decode_nvfp4_hnd,
            "mla_nvfp4.mlir": _mla_nvfp4}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_rebuilt_with_the_builder(opt, name):
    text = (REPO / "examples" / name).read_text()
    module = EXAMPLES[name]()
    assert run_opt(opt, str(module)) == run_opt(opt, text)
    round_trip(opt, module)
    # The argument names are the example's SSA names.
    [function] = module.functions
    signature = text[text.index(f"@{function.name}("):text.index(") {")]
    assert [v.name for v in function.args] == re.findall(r"%(\w+):",
                                                         signature)


# ---------------------------------------------------------------------------
# The verifier's word, and compiling
# ---------------------------------------------------------------------------


def _wrong_storage():
    m = ir.Module()
    f = m.function("f")
    kind = ir.cache(block_size=16, kv_heads=8, head_dim=128, encoding="i4",
                    scale="channel")
    f.bind_cache(f.arg("pages", ir.memref([None, 16, 8, 128], "i8")), kind)
    return m


def test_verify_surfaces_the_verifier_message(opt):
    with pytest.raises(pattn.VerifyError,
                       match=r"pattn-opt rejected the module: <stdin>:3:8: "
                             r"error: 'pattn.bind_cache' op storage must have "
                             r"shape \[\?, 16, 8, 64\], got "
                             r"'memref<\?x16x8x128xi8>'") as caught:
        _wrong_storage().verify(opt)
    assert isinstance(caught.value, pattn.CompileError)
    assert "%0 = pattn.bind_cache storage(%pages" in caught.value.stderr
    assert caught.value.returncode == 1
    _decode_int4().verify()


def test_find_opt(monkeypatch, tmp_path):
    monkeypatch.setenv("PATTN_OPT", str(tmp_path / "missing"))
    with pytest.raises(pattn.CompileError,
                       match=r"PATTN_OPT names .*missing, which does not "
                             r"exist: point it at a pattn-opt executable"):
        pattn.find_opt()
    with pytest.raises(pattn.ArgumentTypeError,
                       match=r"pattn.find_opt: argument 'opt' must be a str"):
        pattn.find_opt(3)
    monkeypatch.delenv("PATTN_OPT")
    repo_opt = REPO / "build" / "bin" / "pattn-opt"
    if repo_opt.is_file():
        assert pattn.find_opt() == str(repo_opt)


def test_compile_takes_a_module(compiler, tmp_path, monkeypatch):
    """pattn.compile(module) compiles str(module): the same cache entry as
    the text, an artifact whose functions take the builder's argument
    names (pattn.name included) and declare the cache pages written."""
    m = _mla_nvfp4()
    f = m.function("attend_only")
    records = m.aliases[0]
    pages = f.arg("pages", records.storage_type(), pattn_name=True)
    names = ["query", "block_table", "seq_lens", "out"]
    types = [ir.memref([2, 16, 576], "bf16"), ir.memref([2, 32], "i32"),
             ir.memref([2], "i32"), ir.memref([2, 16, 512], "bf16")]
    query, block_table, seq_lens, out = [f.arg(n, t)
                                         for n, t in zip(names, types)]
    f.mla_decode(query, f.bind_cache(pages, records), block_table, seq_lens,
                 out, softmax_scale=0.0721)
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(tmp_path / "cache"))
    path = pattn.compile(m, chips=["sm_90a"], compiler=compiler)
    assert pattn.compile(str(m), chips=["sm_90a"], compiler=compiler) == path
    library = pattn.load(path)
    assert library.mla_step.arg_names == (
        "pages", "latent", "rope", "slots", "query", "block_table",
        "seq_lens", "query_start", "out")
    assert library.attend_only.arg_names == ("pages", *names)
    assert [a.written for a in library.attend_only.args] == [
        False, False, False, False, True]
    assert [a.written for a in library.mla_step.args][0]


def test_the_readme_example_runs(opt, compiler, tmp_path, monkeypatch):
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Building IR from Python"):]
    start = section.index("```python\n") + len("```python\n")
    code = section[start:section.index("```\n", start)]
    monkeypatch.setenv("PATTN_OPT", opt)
    monkeypatch.setenv("PATTN_COMPILE", compiler)
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(tmp_path))
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["lib"].decode_step.arg_names == (
        "k_pages", "v_pages", "scale", "query", "block_table", "seq_lens",
        "out")


def test_compile_surfaces_the_verifier_message(compiler, tmp_path):
    with pytest.raises(pattn.CompileError,
                       match=r"storage must have shape \[\?, 16, 8, 64\]"):
        pattn.compile(_wrong_storage(), chips="sm_90a",
                      output=tmp_path / "bad.so", compiler=compiler)


# ---------------------------------------------------------------------------
# The GPU suite's emitter
# ---------------------------------------------------------------------------


def _gpu_ir():
    spec = importlib.util.spec_from_file_location(
        "gpu_ir", REPO / "python" / "tests" / "gpu" / "ir.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_ir"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_gpu_suite_module_verifies(opt):
    """python/tests/gpu/ir.py builds its modules with pattn.ir: every grid
    configuration (static tables with values that cover the f32 range)
    and MLA preset verifies, and its argument lists are the functions'."""
    gpu = _gpu_ir()
    texts = []
    for config in gpu.paged_grid():
        tables = []
        for scale in (config.k_scale, config.v_scale):
            size = config.kv_heads * config.head_dim
            tables.append([3.4028234663852886e38, 1e-45] +
                          [2.0 ** (i % 60 - 30) for i in range(size - 2)]
                          if scale == "channel" and config.static_tables
                          else None)
        module = gpu.emit_paged(config, *tables)
        assert [a.name for a in module.functions["decode"]][0] == "query"
        texts.append(module.text)
    for preset, mode in (("fp8_ds_mla", "none"), ("nvfp4_ds_mla", "tensor"),
                         ("nvfp4_ds_mla_fp8_rope", "tensor"),
                         ("nvfp4_ds_mla_fp8_rope", "token")):
        for query_tokens in (1, 3):
            module = gpu.emit_mla(gpu.MlaConfig(preset=preset, mode=mode,
                                                query_tokens=query_tokens))
            texts.append(module.text)
    run_opt(opt, "\n// -----\n".join(texts), "--split-input-file", "-o",
            os.devnull)
    with pytest.raises(ValueError, match="static k table needs its values"):
        gpu.emit_paged(gpu.Config(k_encoding="i8", k_scale="channel",
                                  static_tables=True))
