"""pattn.onnx, the ONNX importer (issue 11, item 3).

Small graphs built with ``onnx.helper`` in the shapes real exports use
(Llama-3-8B 32/8 heads D128, Qwen2.5-7B 28/4 D128, Phi-3 32/32 D96, a
Gemma-2 node with softcap 50 and window 4096) for both com.microsoft
PagedAttention and GroupQueryAttention: the emitted MLIR verifies with
pattn-opt and compiles for sm_90a with pattn-compile (each skips, saying
so, without the tool), the manifest maps ONNX names to the arguments the
artifact's own manifest has, and every rejection names the node, the
attribute or input and the value. Needs the ``onnx`` package (skips
without it); no GPU.
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip(
    "onnx", reason="the importer's tests need the onnx package "
    "(scripts/install-deps.sh installs it)")
from onnx import TensorProto as T, helper, numpy_helper  # noqa: E402

import pattn  # noqa: E402
from pattn import ir  # noqa: E402
from pattn import onnx as importer  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
PYTHON = REPO / "python"


# ---------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------


def _model(node, inputs, outputs, initializers=()):
    graph = helper.make_graph([node], "decoder_layer", inputs, outputs,
                              initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])


def paged_model(heads=32, kv_heads=8, head_dim=128, block=16,
                cache=T.INT8, v_cache=None, quant="PER_TENSOR",
                v_quant=None, act=T.FLOAT16, attrs=None, extra=None,
                drop=(), scale_initializer=False, name="layers.0/attn",
                slot_mapping=True):
    """A PagedAttention node as a serving export has it; ``extra`` adds
    inputs by schema name ({"head_sink": (dtype, shape)}), ``drop`` leaves
    inputs out."""
    v_cache = cache if v_cache is None else v_cache
    v_quant = quant if v_quant is None else v_quant
    rows = {side: (head_dim + 1) // 2 if dt == T.UINT8 else head_dim
            for side, dt in (("k", cache), ("v", v_cache))}
    specs = {
        "query": (act, ["tokens", heads * head_dim]),
        "key": (act, ["tokens", kv_heads * head_dim]),
        "value": (act, ["tokens", kv_heads * head_dim]),
        "key_cache": (cache, ["num_blocks", block, kv_heads, rows["k"]]),
        "value_cache": (v_cache, ["num_blocks", block, kv_heads, rows["v"]]),
        "cumulative_sequence_length": (T.INT32, ["batch_plus_1"]),
        "past_seqlens": (T.INT32, ["batch"]),
        "block_table": (T.INT32, ["batch", "max_blocks"]),
    }
    if slot_mapping:
        specs["slot_mapping"] = (T.INT32, ["tokens"])
    scale_shape = {"PER_TENSOR": [1], "PER_CHANNEL": [kv_heads, 1, head_dim]}
    initializers = []
    for side, q in (("k", quant), ("v", v_quant)):
        if q != "NONE":
            shape = scale_shape[q]
            if scale_initializer:
                count = 1
                for d in shape:
                    count *= d
                initializers.append(helper.make_tensor(
                    f"{side}_scale", T.FLOAT, shape,
                    [0.01 * (1 + i % 7) for i in range(count)]))
            else:
                specs[f"{side}_scale"] = (T.FLOAT, shape)
    specs.update(extra or {})
    for slot in drop:
        specs.pop(slot, None)
    names = {slot: ("layer0." + slot if slot != "query" else "q_proj")
             for slot in specs}
    inputs = [helper.make_tensor_value_info(names[s], dt, shape)
              for s, (dt, shape) in specs.items()
              if not (scale_initializer and s.endswith("_scale"))]
    node_inputs = []
    for slot in importer.PAGED_INPUTS:
        if slot in specs:
            node_inputs.append(names[slot])
        elif scale_initializer and slot in ("k_scale", "v_scale") and \
                any(i.name == slot for i in initializers):
            node_inputs.append(slot)
        else:
            node_inputs.append("")
    while node_inputs and not node_inputs[-1]:
        node_inputs.pop()
    attributes = dict(num_heads=heads, kv_num_heads=kv_heads,
                      k_quant_type=quant, v_quant_type=v_quant)
    if cache == T.UINT8:
        attributes["k_cache_dtype"] = "int4"
    if v_cache == T.UINT8:
        attributes["v_cache_dtype"] = "int4"
    attributes.update(attrs or {})
    attributes = {k: v for k, v in attributes.items() if v is not None}
    node = helper.make_node("PagedAttention", node_inputs,
                            ["attn_out", "key_cache_out", "value_cache_out"],
                            name=name, domain="com.microsoft", **attributes)
    outputs = [
        helper.make_tensor_value_info("attn_out", act,
                                      ["tokens", heads * head_dim]),
        helper.make_tensor_value_info("key_cache_out", cache, specs.get(
            "key_cache", (0, None))[1]),
        helper.make_tensor_value_info("value_cache_out", v_cache, specs.get(
            "value_cache", (0, None))[1])]
    return _model(node, inputs, outputs, initializers)


def gqa_model(heads=32, kv_heads=8, head_dim=128, seq=1, max_seq=4096,
              act=T.FLOAT16, cache=None, attrs=None, extra=None, drop=(),
              present_seq=None, name="/model/layers.0/attn/GroupQueryAttention"):
    """A GroupQueryAttention node as onnxruntime-genai's model builder
    writes it (BNSH past/present sharing one buffer)."""
    cache = act if cache is None else cache
    present_seq = max_seq if present_seq is None else present_seq
    specs = {
        "query": (act, ["batch_size", seq, heads * head_dim]),
        "key": (act, ["batch_size", seq, kv_heads * head_dim]),
        "value": (act, ["batch_size", seq, kv_heads * head_dim]),
        "past_key": (cache, ["batch_size", kv_heads, max_seq, head_dim]),
        "past_value": (cache, ["batch_size", kv_heads, max_seq, head_dim]),
        "seqlens_k": (T.INT32, ["batch_size"]),
        "total_sequence_length": (T.INT32, []),
    }
    specs.update(extra or {})
    for slot in drop:
        specs.pop(slot, None)
    names = {"query": "/model/layers.0/attn/q_proj/MatMul/output_0",
             "key": "/model/layers.0/attn/k_proj/MatMul/output_0",
             "value": "/model/layers.0/attn/v_proj/MatMul/output_0",
             "past_key": "past_key_values.0.key",
             "past_value": "past_key_values.0.value",
             "seqlens_k": "seqlens_k",
             "total_sequence_length": "total_seq_len"}
    names.update({s: s for s in specs if s not in names})
    inputs = [helper.make_tensor_value_info(names[s], dt, shape)
              for s, (dt, shape) in specs.items()]
    node_inputs = [names[s] if s in specs else "" for s in
                   importer.GQA_INPUTS]
    while node_inputs and not node_inputs[-1]:
        node_inputs.pop()
    attributes = dict(num_heads=heads, kv_num_heads=kv_heads)
    attributes.update(attrs or {})
    node = helper.make_node(
        "GroupQueryAttention", node_inputs,
        ["/model/layers.0/attn/GroupQueryAttention/output_0",
         "present.0.key", "present.0.value"],
        name=name, domain="com.microsoft", **attributes)
    outputs = [
        helper.make_tensor_value_info(
            "/model/layers.0/attn/GroupQueryAttention/output_0", act,
            ["batch_size", seq, heads * head_dim]),
        helper.make_tensor_value_info(
            "present.0.key", cache,
            ["batch_size", kv_heads, present_seq, head_dim]),
        helper.make_tensor_value_info(
            "present.0.value", cache,
            ["batch_size", kv_heads, present_seq, head_dim])]
    return _model(node, inputs, outputs)


# ---------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------


def only(manifest):
    (entry,) = manifest["functions"]
    return entry


def by_input(entry, slot):
    (item,) = [i for i in entry["inputs"] if i["input"] == slot]
    return item


def by_output(entry, slot):
    (item,) = [i for i in entry["outputs"] if i["output"] == slot]
    return item


def computed(entry, name):
    (item,) = [i for i in entry["computed_args"] if i["arg"] == name]
    return item


# The shapes real exports use, for both ops.
MODELS = {
    "llama3_8b": dict(heads=32, kv_heads=8, head_dim=128),
    "qwen2_5_7b": dict(heads=28, kv_heads=4, head_dim=128),
    "phi3": dict(heads=32, kv_heads=32, head_dim=96),
    "gemma2": dict(heads=16, kv_heads=8, head_dim=256),
}
GEMMA2 = dict(softcap=50.0, local_window_size=4096, scale=0.0625)

PAGED_CASES = {
    "llama3_8b-int8-tensor": dict(MODELS["llama3_8b"], cache=T.INT8,
                                  quant="PER_TENSOR"),
    "llama3_8b-int4-channel": dict(MODELS["llama3_8b"], cache=T.UINT8,
                                   quant="PER_CHANNEL", block=128),
    "qwen2_5_7b-fp8-channel": dict(MODELS["qwen2_5_7b"],
                                   cache=T.FLOAT8E4M3FN,
                                   quant="PER_CHANNEL"),
    "qwen2_5_7b-int4k-int8v": dict(MODELS["qwen2_5_7b"], cache=T.UINT8,
                                   v_cache=T.INT8, quant="PER_CHANNEL",
                                   v_quant="PER_TENSOR"),
    "phi3-int4-channel": dict(MODELS["phi3"], cache=T.UINT8,
                              quant="PER_CHANNEL"),
    "phi3-f16": dict(MODELS["phi3"], cache=T.FLOAT16, quant="NONE"),
    "gemma2-bf16-softcap-window": dict(MODELS["gemma2"], cache=T.BFLOAT16,
                                       act=T.BFLOAT16, quant="NONE",
                                       attrs=GEMMA2),
    "llama3_8b-static-scales": dict(MODELS["llama3_8b"], cache=T.UINT8,
                                    quant="PER_CHANNEL",
                                    scale_initializer=True),
    "llama3_8b-derived-slots": dict(MODELS["llama3_8b"], cache=T.INT8,
                                    quant="PER_TENSOR", slot_mapping=False),
}
GQA_CASES = {
    "llama3_8b-f16": dict(MODELS["llama3_8b"], max_seq=4096),
    "qwen2_5_7b-bf16": dict(MODELS["qwen2_5_7b"], act=T.BFLOAT16,
                            max_seq=2048),
    "phi3-f16": dict(MODELS["phi3"], max_seq=4096),
    "gemma2-f16-softcap-window": dict(MODELS["gemma2"], max_seq=4096,
                                      attrs=GEMMA2),
    "llama3_8b-spec-decode": dict(MODELS["llama3_8b"], seq=4, max_seq=1024),
    # A prompt (or a chunk of one) over the past: S query tokens each.
    "qwen2_5_7b-prompt": dict(MODELS["qwen2_5_7b"], act=T.BFLOAT16, seq=512,
                              max_seq=2048),
}


# ---------------------------------------------------------------------------
# What imports
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(PAGED_CASES))
def test_paged_attention_imports_and_verifies(case, opt):
    module, manifest = importer.import_model(paged_model(**PAGED_CASES[case]))
    module.verify(opt)
    entry = only(manifest)
    assert entry["function"] == "layers_0_attn"
    assert entry["node"] == "layers.0/attn"
    assert entry["op_type"] == "PagedAttention"
    assert [f.name for f in module.functions] == ["layers_0_attn"]
    function = module["layers_0_attn"]
    assert entry["args"] == [a.name for a in function.args]
    # Every ONNX tensor the node reads or writes is accounted for.
    spec = PAGED_CASES[case]
    names = entry["names"]
    assert names["q_proj"] == "q_proj"
    assert names["layer0.key_cache"] == "layer0_key_cache"
    assert names["key_cache_out"] == "layer0_key_cache"
    assert names["value_cache_out"] == "layer0_value_cache"
    assert names["attn_out"] == "attn_out"
    assert names["layer0.cumulative_sequence_length"] == \
        "layer0_cumulative_sequence_length"
    assert by_input(entry, "key_cache")["written"]
    assert computed(entry, "total_seqlens")["from"] == [
        "past_seqlens", "cumulative_sequence_length"]
    if spec.get("slot_mapping", True):
        assert names["layer0.slot_mapping"] == "layer0_slot_mapping"
    else:
        assert "slot_mapping" in [c["arg"] for c in entry["computed_args"]]
    op = function.ops[-1]
    assert op.name == "pattn.paged_attention"
    assert op.attributes["num_heads"] == spec["heads"]
    assert op.operands["query_start"].name == \
        "layer0_cumulative_sequence_length"
    if spec.get("scale_initializer"):
        assert by_input(entry, "k_scale")["arg"] is None
        assert by_input(entry, "k_scale")["constant"].startswith("@")
        assert "k_scale" not in [a.name for a in function.args]


@pytest.mark.parametrize("case", sorted(PAGED_CASES))
def test_paged_attention_cache_types(case):
    spec = PAGED_CASES[case]
    module, _ = importer.import_model(paged_model(**spec))
    binds = [op for op in module["layers_0_attn"].ops
             if op.name == "pattn.bind_cache"]
    k_type, v_type = (op.results[0].type.resolved() for op in binds)
    encodings = {T.INT8: "i8", T.UINT8: "i4", T.FLOAT8E4M3FN: "f8e4m3",
                 T.FLOAT16: "f16", T.BFLOAT16: "bf16"}
    scales = {"NONE": "none", "PER_TENSOR": "tensor",
              "PER_CHANNEL": "channel"}
    v_cache = spec.get("v_cache", spec["cache"])
    v_quant = spec.get("v_quant", spec["quant"])
    assert (k_type.encoding, k_type.scale) == (encodings[spec["cache"]],
                                               scales[spec["quant"]])
    assert (v_type.encoding, v_type.scale) == (encodings[v_cache],
                                               scales[v_quant])
    assert k_type.block_size == spec.get("block", 16)
    assert k_type.kv_heads == spec["kv_heads"]
    assert k_type.head_dim == spec["head_dim"]
    assert k_type.layout == "nhd"


def test_paged_attention_attributes_map_one_by_one():
    module, manifest = importer.import_model(paged_model(
        **MODELS["gemma2"], cache=T.FLOAT16, quant="NONE", attrs=GEMMA2))
    op = module["layers_0_attn"].ops[-1]
    assert op.attributes == {"num_heads": 16, "softmax_scale": 0.0625,
                             "softcap": 50.0, "window": 4096}
    assert only(manifest)["pattn_attributes"] == {
        "num_heads": 16, "softmax_scale": 0.0625, "softcap": 50.0,
        "window": 4096, "max_query_len": 1}
    # The defaults are left at pattn's: 1/sqrt(D), no softcap, no window.
    module, _ = importer.import_model(paged_model(
        **MODELS["llama3_8b"], attrs=dict(scale=0.0, softcap=0.0,
                                          local_window_size=-1)))
    assert module["layers_0_attn"].ops[-1].attributes == {"num_heads": 32}


def test_paged_attention_max_query_len(opt):
    module, manifest = importer.import_model(
        paged_model(**MODELS["llama3_8b"]), max_query_len=4)
    module.verify(opt)
    assert module["layers_0_attn"].ops[-1].attributes["max_query_len"] == 4
    # Prompts: up to 32768 query tokens per sequence.
    module, manifest = importer.import_model(
        paged_model(**MODELS["llama3_8b"]), max_query_len=2048)
    module.verify(opt)
    assert module["layers_0_attn"].ops[-1].attributes["max_query_len"] == \
        2048
    with pytest.raises(importer.UnsupportedNodeError, match="1 to 32768"):
        importer.import_model(paged_model(**MODELS["llama3_8b"]),
                              max_query_len=32769)
    # A constant attention_metadata's bound is taken.
    model = paged_model(**MODELS["llama3_8b"])
    model.graph.initializer.append(numpy_helper.from_array(
        __import__("numpy").array([3, 4096], dtype="int32"),
        "attention_metadata"))
    node = model.graph.node[0]
    while len(node.input) < 16:
        node.input.append("")
    node.input.append("attention_metadata")
    module, manifest = importer.import_model(model)
    assert module["layers_0_attn"].ops[-1].attributes["max_query_len"] == 3
    assert by_input(only(manifest), "attention_metadata")["arg"] is None


def test_paged_static_scales_fold_at_compile_time(opt):
    module, manifest = importer.import_model(paged_model(
        **MODELS["llama3_8b"], cache=T.UINT8, quant="PER_CHANNEL",
        scale_initializer=True))
    text = str(module)
    assert 'memref.global "private" constant @layers_0_attn_k_scale : ' \
        'memref<8x128xf32>' in text
    module.verify(opt)


@pytest.mark.parametrize("case", sorted(GQA_CASES))
def test_gqa_imports_and_verifies(case, opt):
    spec = GQA_CASES[case]
    module, manifest = importer.import_model(gqa_model(**spec))
    module.verify(opt)
    entry = only(manifest)
    function = module[entry["function"]]
    assert entry["function"] == "model_layers_0_attn_GroupQueryAttention"
    assert entry["args"] == [a.name for a in function.args]
    names = entry["names"]
    assert names["past_key_values.0.key"] == "past_key_values_0_key"
    assert names["present.0.key"] == "past_key_values_0_key"
    assert names["present.0.value"] == "past_key_values_0_value"
    assert names["/model/layers.0/attn/q_proj/MatMul/output_0"] == \
        "model_layers_0_attn_q_proj_MatMul_output_0"
    assert by_output(entry, "present_key")["aliases"].startswith(
        "the past_key buffer")
    cache = function.ops[0].results[0].type.resolved()
    assert (cache.block_size, cache.layout) == (spec["max_seq"], "hnd")
    assert cache.encoding == ("bf16" if spec.get("act") == T.BFLOAT16
                              else "f16")
    assert cache.scale == "none"
    assert computed(entry, "total_seqlens")["formula"].startswith(
        "seqlens_k + 1")
    assert "arange(batch_size" in computed(entry, "block_table")["formula"]
    assert by_input(entry, "total_sequence_length")["arg"] is None
    op = function.ops[-1]
    assert op.attributes["num_heads"] == spec["heads"]
    seq = spec.get("seq", 1)
    if seq > 1:
        assert op.attributes["max_query_len"] == seq
        assert "query_start" in op.operands
    else:
        assert "query_start" not in op.operands


def test_gqa_window_counts_the_current_token():
    # GroupQueryAttention's local_window_size W keeps W keys, the current
    # one included: measured against onnxruntime 1.32's CPU kernel (the
    # window-256 case of bench/results/2026-12-02-h200-onnx-rotary.md),
    # the same count as PagedAttention's, so pattn's window is W.
    module, manifest = importer.import_model(gqa_model(
        **MODELS["gemma2"], attrs=GEMMA2))
    op = [o for o in module.functions[0].ops
          if o.name == "pattn.paged_attention"][0]
    assert op.attributes == {"num_heads": 16, "softmax_scale": 0.0625,
                             "softcap": 50.0, "window": 4096}


def test_gqa_symbolic_length_and_paged_copy(opt):
    model = gqa_model(**MODELS["qwen2_5_7b"], max_seq="max_sequence_length")
    with pytest.raises(importer.UnsupportedNodeError,
                       match="bind it with --dim max_sequence_length=N"):
        importer.import_model(model)
    module, _ = importer.import_model(
        model, dims={"max_sequence_length": 1024})
    module.verify(opt)
    assert module.functions[0].ops[0].results[0].type.block_size == 1024
    # 32K contexts cannot be one page per sequence: a paged copy.
    model = gqa_model(**MODELS["qwen2_5_7b"], max_seq=32768)
    with pytest.raises(importer.UnsupportedNodeError,
                       match="cache_sequence_length 32768 cannot be one "
                       "pattn page per sequence.*--gqa-block-size"):
        importer.import_model(model)
    module, manifest = importer.import_model(model, gqa_block_size=16)
    module.verify(opt)
    entry = only(manifest)
    cache = module.functions[0].ops[0].results[0].type.resolved()
    assert (cache.block_size, cache.layout) == (16, "nhd")
    assert computed(entry, "past_key_pages")["from"] == ["past_key"]
    assert entry["names"]["present.0.key"] == "past_key_pages"
    assert "past_key_values.0.key" not in entry["names"]


def test_schema_argument_names(opt):
    module, manifest = importer.import_model(
        gqa_model(**MODELS["llama3_8b"]), arg_names="schema")
    module.verify(opt)
    assert only(manifest)["args"] == [
        "query", "key", "value", "past_key", "past_value", "block_table",
        "slots", "total_seqlens", "output"]
    with pytest.raises(pattn.ArgumentError, match="arg_names"):
        importer.import_model(gqa_model(), arg_names="positional")


def test_two_nodes_two_functions(opt):
    first = gqa_model(**MODELS["llama3_8b"], name="attn")
    second = gqa_model(**MODELS["llama3_8b"], name="attn")
    node = second.graph.node[0]
    first.graph.node.append(node)  # the same node twice: names dedupe
    module, manifest = importer.import_model(first)
    assert [f["function"] for f in manifest["functions"]] == ["attn",
                                                             "attn_2"]
    module.verify(opt)


# ---------------------------------------------------------------------------
# Compiling and the artifact's manifest
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("make, spec", [
    (paged_model, PAGED_CASES["llama3_8b-int4-channel"]),
    (paged_model, PAGED_CASES["gemma2-bf16-softcap-window"]),
    (paged_model, PAGED_CASES["llama3_8b-static-scales"]),
    (gqa_model, GQA_CASES["llama3_8b-f16"]),
    (gqa_model, GQA_CASES["phi3-f16"]),
    (gqa_model, GQA_CASES["llama3_8b-spec-decode"]),
], ids=["paged-int4", "paged-gemma2", "paged-static-scales", "gqa-llama3",
        "gqa-phi3", "gqa-spec-decode"])
def test_compiles_for_sm_90a(make, spec, compiler, tmp_path):
    module, manifest = importer.import_model(make(**spec))
    path = pattn.compile(module, chips=["sm_90a"],
                         output=tmp_path / "model.so", compiler=compiler)
    assert os.path.getsize(path) > 0
    entry = only(manifest)
    try:
        library = pattn.load(path)
    except pattn.LoadError as error:  # pragma: no cover - host dependent
        pytest.skip(f"cannot load the artifact here: {error}")
    function = library.functions[entry["function"]]
    assert list(function.arg_names) == entry["args"]
    written = {arg for item in entry["inputs"] + entry["outputs"]
               + entry["computed_args"] if item.get("written")
               for arg in [item["arg"]]}
    assert {spec.name for spec in function.args if spec.written} >= \
        {name for name in written if name}


# ---------------------------------------------------------------------------
# Rotary embedding, QK-norm, packed QKV and head sinks (issue 11, item 2)
# ---------------------------------------------------------------------------


def _tables(half, dtype=T.FLOAT16, rows=4096):
    return {"cos_cache": (dtype, [rows, half]),
            "sin_cache": (dtype, [rows, half])}


def _as_initializers(model, slots):
    """The graph inputs named ``slots`` as initializers (random values),
    as model builders export cos/sin caches and norm weights."""
    from onnx import numpy_helper
    rng = np.random.default_rng(0)
    graph = model.graph
    for item in list(graph.input):
        if item.name not in slots:
            continue
        dims = [d.dim_value for d in item.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(
            item.type.tensor_type.elem_type)
        values = rng.uniform(0.5, 1.5, size=dims).astype(dtype)
        graph.initializer.append(numpy_helper.from_array(values, item.name))
        graph.input.remove(item)
    return model


ROTARY_CASES = {
    # name: (model, rotary ops' first heads, V's first head in the write)
    "gqa-llama3-rotary": (lambda: gqa_model(
        **MODELS["llama3_8b"], attrs=dict(do_rotary=1), extra=_tables(64)),
        [0, 0], 0),
    "gqa-qwen3-qknorm-initializers": (lambda: _as_initializers(gqa_model(
        **MODELS["llama3_8b"], attrs=dict(do_rotary=1, qk_norm_epsilon=1e-6),
        extra=dict(_tables(64), q_norm_weight=(T.FLOAT16, [128]),
                   k_norm_weight=(T.FLOAT16, [128]))),
        {"cos_cache", "sin_cache", "q_norm_weight", "k_norm_weight"}),
        [0, 0], 0),
    "gqa-phi3-packed-position_ids-interleaved": (lambda: gqa_model(
        heads=32, kv_heads=32, head_dim=96, drop=("key", "value"),
        attrs=dict(do_rotary=1, rotary_interleaved=1),
        extra=dict(_tables(48, T.FLOAT),
                   position_ids=(T.INT64, ["batch_size", 1]),
                   query=(T.FLOAT16, ["batch_size", 1, 96 * 96]))),
        [0, 32], 64),
    "gqa-sinks-spec-decode": (lambda: gqa_model(
        **MODELS["llama3_8b"], seq=3, max_seq=1024,
        attrs=dict(do_rotary=1),
        extra=dict(_tables(32, T.BFLOAT16), head_sink=(T.FLOAT16, [32]))),
        [0, 0], 0),
    "paged-int8-rotary-qknorm-sinks": (lambda: paged_model(
        attrs=dict(do_rotary=1), extra=dict(
            _tables(64), q_norm_weight=(T.FLOAT16, [128]),
            k_norm_weight=(T.FLOAT16, [128]),
            head_sink=(T.FLOAT16, [32]))), [0, 0], 0),
    "paged-int4-packed": (lambda: paged_model(
        cache=T.UINT8, quant="PER_CHANNEL", drop=("key", "value"),
        attrs=dict(do_rotary=1), extra=dict(
            _tables(64), query=(T.FLOAT16, ["tokens", 48 * 128]))),
        [0, 32], 40),
}


@pytest.mark.parametrize("case", sorted(ROTARY_CASES))
def test_rotary_norm_packed_and_sinks_import(case, opt):
    """Q and K go through pattn.rotary into temporaries (from the packed
    rows where key and value are absent), K's rotated rows are what the
    cache gets, attention reads the rotated query, and the temporaries are
    freed; every input is accounted for in the manifest."""
    make, firsts, value_first = ROTARY_CASES[case]
    model = make()
    module, manifest = importer.import_model(model)
    module.verify(opt)
    entry = only(manifest)
    function = module[entry["function"]]
    ops = [op.name for op in function.ops]
    rotaries = [op for op in function.ops if op.name == "pattn.rotary"]
    assert [op.attributes.get("first_head", 0) for op in rotaries] == firsts
    writes = [op for op in function.ops if op.name == "pattn.write_cache"]
    assert [w.attributes.get("first_head", 0) for w in writes] == [
        0, value_first]
    assert writes[0].operands["values"] is rotaries[1].operands["out"]
    (attention,) = [op for op in function.ops
                    if op.name == "pattn.paged_attention"]
    assert attention.operands["query"] is rotaries[0].operands["out"]
    assert ops[-2:] == ["memref.dealloc", "memref.dealloc"]
    norms = "qknorm" in case
    assert all(("norm_weight" in op.operands) == norms for op in rotaries)
    assert ("sinks" in attention.operands) == ("sinks" in case)
    rotary = entry["pattn_attributes"]["rotary"]
    assert rotary["interleaved"] == ("interleaved" in case)
    assert rotary["qk_norm"] == (["k", "q"] if norms else [])
    listed = {i["input"] for i in entry["inputs"]}
    given = {"cos_cache", "sin_cache"}
    given |= {"position_ids"} if "position_ids" in case else set()
    given |= {"head_sink"} if "sinks" in case else set()
    given |= {"q_norm_weight", "k_norm_weight"} if norms else set()
    assert given <= listed, given - listed
    if "initializers" in case:
        assert by_input(entry, "cos_cache")["constant"].startswith("@")
    if "position_ids" in case:
        assert "positions" in rotaries[0].operands
    else:
        assert "seq_lens" in rotaries[0].operands


def test_gqa_norm_epsilons_override_per_side(opt):
    model = gqa_model(**MODELS["llama3_8b"], attrs=dict(
        do_rotary=1, qk_norm_epsilon=1e-5, k_norm_epsilon=1e-3),
        extra=dict(_tables(64), q_norm_weight=(T.FLOAT16, [128]),
                   k_norm_weight=(T.FLOAT16, [128])))
    module, manifest = importer.import_model(model)
    module.verify(opt)
    function = module[only(manifest)["function"]]
    q, k = [op for op in function.ops if op.name == "pattn.rotary"]
    assert q.attributes["norm_epsilon"] == pytest.approx(1e-5)
    assert k.attributes["norm_epsilon"] == pytest.approx(1e-3)


@pytest.mark.parametrize("case", ["gqa-qwen3-qknorm-initializers",
                                  "gqa-phi3-packed-position_ids-interleaved",
                                  "paged-int4-packed"])
def test_rotary_imports_compile_for_sm_90a(case, compiler, tmp_path):
    module, manifest = importer.import_model(ROTARY_CASES[case][0]())
    path = pattn.compile(module, chips=["sm_90a"],
                         output=tmp_path / "model.so", compiler=compiler)
    assert os.path.getsize(path) > 0


# ---------------------------------------------------------------------------
# What is rejected
# ---------------------------------------------------------------------------

TABLES = {"cos_cache": (T.FLOAT16, [4096, 64]),
          "sin_cache": (T.FLOAT16, [4096, 64])}
REJECTIONS = {
    # name: (model, expected text in the error)
    "paged-do_rotary-without-tables": (
        lambda: paged_model(attrs=dict(do_rotary=1)),
        "input 'cos_cache' (#8) = absent: do_rotary=1 needs the cos_cache "
        "and sin_cache tables"),
    "paged-rotary_interleaved": (
        lambda: paged_model(attrs=dict(rotary_interleaved=1)),
        "attribute 'rotary_interleaved' = 1: set without do_rotary=1"),
    "paged-rotary_offset": (lambda: paged_model(attrs=dict(
        do_rotary=1, rotary_offset=3), extra=TABLES),
        "attribute 'rotary_offset' = 3: a nonzero rotary_offset is not "
        "imported"),
    "paged-cos_cache": (
        lambda: paged_model(extra=TABLES),
        "input 'cos_cache' (#8) = 'layer0.cos_cache': given without "
        "do_rotary=1"),
    "paged-qk_norm": (
        lambda: paged_model(extra={"q_norm_weight": (T.FLOAT16, [128]),
                                   "k_norm_weight": (T.FLOAT16, [128])}),
        "input 'q_norm_weight' (#12) = 'layer0.q_norm_weight': QK-norm is "
        "imported with rotary embedding"),
    "paged-packed_qkv": (lambda: paged_model(drop=("key", "value")),
                         "input 'key' (#1) = absent: packed QKV (key and "
                         "value absent) is imported with do_rotary=1"),
    "paged-key-without-value": (lambda: paged_model(drop=("value",)),
                                "input 'value' (#2) = absent: key and value "
                                "are given together"),
    "paged-head_sink-shape": (
        lambda: paged_model(extra={"head_sink": (T.FLOAT16, [16])}),
        "input 'head_sink' (#11) = '(16)': must have num_heads (32) sinks"),
    "paged-rotary-too-wide": (lambda: paged_model(
        attrs=dict(do_rotary=1), extra={
            "cos_cache": (T.FLOAT16, [4096, 80]),
            "sin_cache": (T.FLOAT16, [4096, 80])}),
        "input 'cos_cache' (#8) = '(4096, 80)': rotary_dim 160 must be in "
        "[2, head_size = 128]"),
    "paged-table-types-differ": (lambda: paged_model(
        attrs=dict(do_rotary=1), extra={
            "cos_cache": (T.FLOAT16, [4096, 64]),
            "sin_cache": (T.FLOAT, [4096, 64])}),
        "input 'sin_cache' (#9) = 'layer0.sin_cache: f32': must have "
        "cos_cache's type (f16)"),
    "paged-int-table": (lambda: paged_model(
        attrs=dict(do_rotary=1), extra={
            "cos_cache": (T.INT32, [4096, 64]),
            "sin_cache": (T.INT32, [4096, 64])}),
        "input 'cos_cache' (#8) = 'layer0.cos_cache: int32': the table must "
        "be float16, bfloat16, float"),
    "paged-norm-epsilon": (lambda: paged_model(
        attrs=dict(do_rotary=1, qk_norm_epsilon=0.0), extra=dict(
            TABLES, q_norm_weight=(T.FLOAT16, [128]))),
        "attribute 'qk_norm_epsilon' = 0.0: must be a finite positive"),
    "paged-norm-shape": (lambda: paged_model(
        attrs=dict(do_rotary=1), extra=dict(
            TABLES, k_norm_weight=(T.FLOAT16, [64]))),
        "input 'k_norm_weight' (#13) = '(64)': must have head_size (128) "
        "weights"),
    "paged-latent": (lambda: paged_model(attrs=dict(
        kv_cache_layout="LATENT")), "attribute 'kv_cache_layout' = "
        "'LATENT'"),
    "paged-f32-query": (lambda: paged_model(act=T.FLOAT),
                        "input 'query' (#0) = 'q_proj: float': the query "
                        "(pattn activations) must be float16, bfloat16"),
    "paged-int16-cache": (lambda: paged_model(cache=T.INT16),
                          "input 'key_cache' (#3) = 'layer0.key_cache: "
                          "int16': cache element type must be"),
    "paged-uint8-not-int4": (lambda: paged_model(
        cache=T.UINT8, quant="PER_CHANNEL", attrs=dict(k_cache_dtype="")),
        "attribute 'k_cache_dtype' = '': a uint8 cache must say explicit "
        "int4"),
    "paged-float4e2m1": (lambda: paged_model(
        cache=T.UINT8, quant="PER_CHANNEL",
        attrs=dict(k_cache_dtype="float4e2m1")),
        "attribute 'k_cache_dtype' = 'float4e2m1'"),
    "paged-dtype-mismatch": (lambda: paged_model(
        attrs=dict(k_cache_dtype="float8e4m3fn")),
        "attribute 'k_cache_dtype' = 'float8e4m3fn': does not match"),
    "paged-quantized-none": (lambda: paged_model(quant="NONE"),
                             "attribute 'k_quant_type' = 'NONE': a int8 "
                             "cache needs PER_TENSOR or PER_CHANNEL"),
    "paged-bad-quant": (lambda: paged_model(attrs=dict(
        k_quant_type="PER_TOKEN")), "attribute 'k_quant_type' = "
        "'PER_TOKEN': must be NONE, PER_TENSOR or PER_CHANNEL"),
    "paged-missing-scale": (lambda: paged_model(drop=("k_scale",)),
                            "input 'k_scale' (#14) = absent"),
    "paged-dynamic-block": (lambda: paged_model(block="block_size"),
                            "block_size (axis 1) static, but it is "
                            "'block_size'; bind it with --dim block_size=N"),
    "paged-block-8": (lambda: paged_model(block=8),
                      "block_size 8 must be a power of two in [16, 4096]"),
    "paged-v_head_size": (lambda: paged_model(attrs=dict(v_head_size=64)),
                          "attribute 'v_head_size' = 64"),
    "paged-window-0": (lambda: paged_model(attrs=dict(local_window_size=0)),
                       "attribute 'local_window_size' = 0: must be -1"),
    "paged-unknown-attr": (lambda: paged_model(attrs=dict(alibi=1)),
                           "attribute 'alibi' = 1: not an attribute of "
                           "com.microsoft PagedAttention"),
    "paged-heads": (lambda: paged_model(heads=30, kv_heads=8),
                    "attribute 'num_heads' = 30: must be a multiple of "
                    "kv_num_heads (8)"),
    "gqa-do_rotary-without-tables": (
        lambda: gqa_model(attrs=dict(do_rotary=1)),
        "input 'cos_cache' (#7) = absent: do_rotary=1 needs"),
    "gqa-rotary_interleaved": (lambda: gqa_model(attrs=dict(
        rotary_interleaved=1)),
        "attribute 'rotary_interleaved' = 1: set without do_rotary=1"),
    "gqa-cos_sin": (lambda: gqa_model(extra=TABLES),
                    "input 'sin_cache' (#8) = 'sin_cache': given without "
                    "do_rotary=1"),
    "gqa-position_ids": (lambda: gqa_model(extra={
        "position_ids": (T.INT64, ["batch_size", 1])}),
        "input 'position_ids' (#9) = 'position_ids': position ids only feed "
        "rotary embedding, and do_rotary is 0"),
    "gqa-qk_norm": (lambda: gqa_model(extra={
        "q_norm_weight": (T.FLOAT16, [128]),
        "k_norm_weight": (T.FLOAT16, [128])}),
        "input 'k_norm_weight' (#15) = 'k_norm_weight': QK-norm is imported "
        "with rotary embedding"),
    "gqa-packed_qkv": (lambda: gqa_model(drop=("key", "value")),
                       "input 'key' (#1) = absent: packed QKV"),
    "gqa-query_seqlens": (lambda: gqa_model(extra={
        "query_seqlens": (T.INT32, ["batch_size"])}),
        "input 'query_seqlens' (#16) = 'query_seqlens': right-padded query "
        "chunks"),
    "gqa-q_norm_epsilon": (lambda: gqa_model(
        attrs=dict(do_rotary=1, q_norm_epsilon=-1.0), extra=dict(
            TABLES, q_norm_weight=(T.FLOAT16, [128]),
            k_norm_weight=(T.FLOAT16, [128]))),
        "attribute 'q_norm_epsilon' = -1.0: must be a finite positive"),
    "gqa-head_sink-type": (lambda: gqa_model(extra={
        "head_sink": (T.INT32, [32])}),
        "input 'head_sink' (#11) = 'head_sink: int32': the sinks must be "
        "float16, bfloat16, float"),
    "gqa-smooth_softmax": (lambda: gqa_model(attrs=dict(smooth_softmax=1)),
                           "attribute 'smooth_softmax' = 1: smooth softmax"),
    "gqa-attention_bias": (lambda: gqa_model(extra={
        "attention_bias": (T.FLOAT16, [1, 1, 1, 4096])}),
        "input 'attention_bias' (#10)"),
    "gqa-f32": (lambda: gqa_model(act=T.FLOAT),
                "input 'query' (#0) = '/model/layers.0/attn/q_proj/MatMul/"
                "output_0: float': the query (pattn activations) must be "
                "float16, bfloat16"),
    "gqa-int8-cache": (lambda: gqa_model(cache=T.INT8, attrs=dict(
        k_quant_type="PER_TENSOR", v_quant_type="PER_TENSOR")),
        "attribute 'k_quant_type' = 'PER_TENSOR': GroupQueryAttention's "
        "quantized caches are not imported yet"),
    "gqa-long-prompt": (lambda: gqa_model(seq=32769),
                        "sequence_length 32769: pattn attends 1 to 32768 "
                        "query tokens per sequence (longer prompts go in "
                        "chunks)"),
    "gqa-dynamic-seq": (lambda: gqa_model(seq="sequence_length"),
                        "sequence_length (query tokens per sequence, 1 to "
                        "32768)"
                        " (axis 1) static, but it is 'sequence_length'"),
    "gqa-not-shared": (lambda: gqa_model(max_seq=1024, present_seq=1025),
                       "output 'present_key' (#1) = '(batch_size, 8, 1025, "
                       "128)': present_key is longer than past_key"),
    "gqa-no-past": (lambda: gqa_model(drop=("past_key", "past_value")),
                    "input 'past_key' (#3) = absent"),
    "gqa-sliding_window_cache": (lambda: gqa_model(attrs=dict(
        sliding_window_cache=1, local_window_size=1024)),
        "attribute 'sliding_window_cache' = 1"),
    "gqa-qk_output": (lambda: gqa_model(attrs=dict(qk_output=1)),
                      "attribute 'qk_output' = 1"),
    "gqa-causal-spec-decode": (lambda: gqa_model(seq=4, attrs=dict(
        causal=0)), "attribute 'causal' = 0"),
}


@pytest.mark.parametrize("case", sorted(REJECTIONS))
def test_rejections_name_node_input_and_value(case):
    make, expected = REJECTIONS[case]
    model = make()
    node = model.graph.node[0]
    with pytest.raises(importer.UnsupportedNodeError) as caught:
        importer.import_model(model)
    message = str(caught.value)
    prefix = f"{node.op_type} node '{node.name}': "
    assert any(line.startswith("  " + prefix) and expected in line
               for line in message.splitlines()), message
    assert caught.value.reasons
    assert all(r.node == node.name for r in caught.value.reasons)
    # --list gives the same reason and says the node does not compile.
    (listed,) = importer.analyze(model)
    assert not listed.compiles
    assert [str(r) for r in listed.reasons] == [
        str(r) for r in caught.value.reasons]


def test_every_reason_at_once():
    model = gqa_model(attrs=dict(rotary_interleaved=1, smooth_softmax=1),
                      extra={"head_sink": (T.INT32, [32]),
                             "cos_cache": (T.FLOAT16, [4096, 64]),
                             "sin_cache": (T.FLOAT16, [4096, 64])})
    (node,) = importer.analyze(model)
    named = [(r.what, r.name) for r in node.reasons]
    assert named == [("attribute", "rotary_interleaved"),
                     ("input", "cos_cache"), ("input", "sin_cache"),
                     ("attribute", "smooth_softmax"),
                     ("input", "head_sink")]


def test_no_attention_nodes():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [1])],
        [helper.make_tensor_value_info("y", T.FLOAT, [1])])
    with pytest.raises(importer.UnsupportedNodeError,
                       match="no com.microsoft PagedAttention"):
        importer.import_model(helper.make_model(graph))


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------


def run_cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(PYTHON))
    return subprocess.run([sys.executable, "-m", "pattn.onnx", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd,
                          check=False)


def test_cli_writes_mlir_and_manifest(tmp_path, opt):
    model = tmp_path / "model.onnx"
    onnx.save(paged_model(**PAGED_CASES["qwen2_5_7b-fp8-channel"]), model)
    result = run_cli(model, "-o", tmp_path / "model.mlir")
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "model.mlir").read_text()
    assert "func.func @layers_0_attn(" in text
    manifest = json.loads((tmp_path / "model.manifest.json").read_text())
    assert manifest["functions"][0]["names"]["key_cache_out"] == \
        "layer0_key_cache"
    subprocess.run([opt, str(tmp_path / "model.mlir"), "-o", os.devnull],
                   check=True)
    result = run_cli(model, "-o", tmp_path / "other.mlir", "--manifest",
                     tmp_path / "m.json")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "m.json").read_text()) == manifest


def test_cli_list(tmp_path):
    graph_a = gqa_model(**MODELS["llama3_8b"], name="good")
    graph_b = gqa_model(**MODELS["llama3_8b"], name="stray_tables",
                        extra={"cos_cache": (T.FLOAT16, [4096, 64]),
                               "sin_cache": (T.FLOAT16, [4096, 64])})
    graph_a.graph.node.append(graph_b.graph.node[0])
    for item in graph_b.graph.input:
        if item.name not in [i.name for i in graph_a.graph.input]:
            graph_a.graph.input.append(item)
    model = tmp_path / "model.onnx"
    onnx.save(graph_a, model)
    result = run_cli(model, "--list")
    assert result.returncode == 0, result.stderr
    unused = "given without do_rotary=1: pattn would not use it"
    assert result.stdout == (
        "good\tGroupQueryAttention\tcompiles (@good)\n"
        "stray_tables\tGroupQueryAttention\tcannot compile: 2 reasons\n"
        f"    - input 'cos_cache' (#7) = 'cos_cache': {unused}\n"
        f"    - input 'sin_cache' (#8) = 'sin_cache': {unused}\n")
    result = run_cli(model, "-o", tmp_path / "model.mlir")
    assert result.returncode == 1
    assert "1 of 2 attention nodes cannot be compiled" in result.stderr
    assert "GroupQueryAttention node 'stray_tables': input 'cos_cache'" \
        in result.stderr
    assert not (tmp_path / "model.mlir").exists()


def test_cli_dims_and_block_size(tmp_path):
    model = tmp_path / "model.onnx"
    onnx.save(gqa_model(max_seq="max_seq"), model)
    assert run_cli(model, "-o", "-").returncode == 1
    result = run_cli(model, "--dim", "max_seq=2048", "-o", "-")
    assert result.returncode == 0, result.stderr
    assert "block_size = 2048" in result.stdout
    result = run_cli(model, "--gqa-block-size", "32", "-o", "-")
    assert result.returncode == 0, result.stderr
    assert "block_size = 32," in result.stdout
    assert run_cli(model, "--dim", "max_seq").returncode == 2


def test_importing_pattn_does_not_import_onnx():
    code = ("import sys, pattn, pattn.ir; "
            "assert 'onnx' not in sys.modules, 'onnx imported'; "
            "import pattn.onnx; "
            "assert 'onnx' not in sys.modules, 'pattn.onnx imported onnx'")
    env = dict(os.environ, PYTHONPATH=str(PYTHON))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_example_runs_without_a_gpu(tmp_path):
    example = REPO / "examples" / "onnx" / "gqa_decode.py"
    env = dict(os.environ, PYTHONPATH=str(PYTHON), CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, str(example)],
                            capture_output=True, text=True, env=env,
                            cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr
    assert "func.func @attn" in result.stdout
    assert '"past_key_values.0.key": "past_key_values_0_key"' in \
        result.stdout
