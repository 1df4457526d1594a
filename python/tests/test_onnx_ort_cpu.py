"""The ONNX mapping's semantics against ONNX Runtime itself (CPU, no GPU).

pattn.onnx maps GroupQueryAttention's attributes onto pattn's; these tests
run small GroupQueryAttention nodes on onnxruntime's CPUExecutionProvider
and check that what the importer emits means what ONNX Runtime computes:

- ``local_window_size`` W keeps W keys, the current one included (the
  importer's ``window``);
- ``do_rotary`` rotates K (neox and interleaved) as pattn.rotary's float64
  reference does (``pattn.reference.rotary_ref``, at the appended slot's
  position), within one f16 ulp in ORT's present_key;
- ``head_sink`` adds exp(sink - max) to each head's denominator;
- ``softcap`` is softcap * tanh(logits / softcap).

They skip, saying so, where onnxruntime is not installed
(scripts/install-deps.sh installs it).
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime",
                          reason="onnxruntime is not installed "
                          "(scripts/install-deps.sh installs it)")

from onnx import TensorProto as T, helper  # noqa: E402

from pattn import onnx as importer  # noqa: E402
from pattn import reference as ref  # noqa: E402

B, H, KV, D, S = 2, 4, 2, 32, 64


def _node_model(attrs, extra=()):
    info = helper.make_tensor_value_info
    inputs = ["query", "key", "value", "past_key", "past_value", "seqlens_k",
              "total_sequence_length"]
    tail = [name if name in extra else "" for name in
            ("cos_cache", "sin_cache", "position_ids", "attention_bias",
             "head_sink")]
    while tail and not tail[-1]:
        tail.pop()
    values = [info("query", T.FLOAT16, [B, 1, H * D]),
              info("key", T.FLOAT16, [B, 1, KV * D]),
              info("value", T.FLOAT16, [B, 1, KV * D]),
              info("past_key", T.FLOAT16, [B, KV, S, D]),
              info("past_value", T.FLOAT16, [B, KV, S, D]),
              info("seqlens_k", T.INT32, [B]),
              info("total_sequence_length", T.INT32, [])]
    if "cos_cache" in extra:
        values += [info("cos_cache", T.FLOAT16, [S, D // 2]),
                   info("sin_cache", T.FLOAT16, [S, D // 2])]
    if "head_sink" in extra:
        values.append(info("head_sink", T.FLOAT16, [H]))
    node = helper.make_node(
        "GroupQueryAttention", inputs + tail,
        ["output", "present_key", "present_value"], name="attn",
        domain="com.microsoft", num_heads=H, kv_num_heads=KV, **attrs)
    graph = helper.make_graph([node], "g", values, [
        info("output", T.FLOAT16, [B, 1, H * D]),
        info("present_key", T.FLOAT16, [B, KV, S, D]),
        info("present_value", T.FLOAT16, [B, KV, S, D])])
    return helper.make_model(graph, opset_imports=[
        helper.make_opsetid("com.microsoft", 1), helper.make_opsetid("", 17)])


def _run(model, feeds_extra=None, seed=0):
    rng = np.random.default_rng(seed)
    r = lambda *shape: rng.standard_normal(shape).astype(np.float16)  # noqa
    past = np.array([40, 17], np.int32)
    feeds = dict(query=r(B, 1, H * D), key=r(B, 1, KV * D),
                 value=r(B, 1, KV * D), past_key=r(B, KV, S, D),
                 past_value=r(B, KV, S, D), seqlens_k=past,
                 total_sequence_length=np.array(past.max() + 1, np.int32))
    feeds.update(feeds_extra or {})
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    out, present_k, present_v = session.run(None, feeds)
    return feeds, out.reshape(B, H, D), present_k, present_v


def _attention64(q, present_k, present_v, total, keys=None, softcap=0.0,
                 sinks=None):
    """float64 decode of q [B, H, D] over each sequence's last ``keys``
    keys (all when None), with softcap and sinks."""
    out = np.zeros((B, H, D))
    g = H // KV
    for b in range(B):
        n = int(total[b])
        first = 0 if keys is None else max(0, n - keys)
        k = present_k[b, :, first:n].astype(np.float64)
        v = present_v[b, :, first:n].astype(np.float64)
        for h in range(H):
            logits = k[h // g] @ q[b, h].astype(np.float64) / np.sqrt(D)
            if softcap:
                logits = softcap * np.tanh(logits / softcap)
            top = logits.max()
            if sinks is not None:
                top = max(top, float(sinks[h]))
            p = np.exp(logits - top)
            denominator = p.sum()
            if sinks is not None:
                denominator += np.exp(float(sinks[h]) - top)
            out[b, h] = p @ v[h // g] / denominator
    return out


def _pattn_window(model):
    module, _ = importer.import_model(model)
    (attention,) = [op for op in module.functions[0].ops
                    if op.name == "pattn.paged_attention"]
    return attention.attributes.get("window", -1)


@pytest.mark.parametrize("window", [4, 8, 25])
def test_local_window_size_keeps_that_many_keys(window):
    model = _node_model(dict(local_window_size=window))
    feeds, out, pk, pv = _run(model)
    total = feeds["seqlens_k"] + 1
    q = feeds["query"].reshape(B, H, D)
    errors = {n: np.abs(_attention64(q, pk, pv, total, keys=n) - out).max()
              for n in (window - 1, window, window + 1)}
    assert errors[window] < 2e-3, errors
    assert errors[window - 1] > 2e-2 and errors[window + 1] > 2e-2, errors
    # pattn's window W keeps keys at positions > p - W: W keys.
    assert _pattn_window(model) == window


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_is_the_reference_rotation(interleaved):
    half = D // 2
    angles = np.arange(S)[:, None] * 10000.0 ** (-np.arange(half) / half)
    cos = np.cos(angles).astype(np.float16)
    sin = np.sin(angles).astype(np.float16)
    model = _node_model(dict(do_rotary=1, rotary_interleaved=interleaved),
                        extra=("cos_cache", "sin_cache"))
    feeds, out, pk, pv = _run(model, dict(cos_cache=cos, sin_cache=sin))
    positions = feeds["seqlens_k"].astype(np.int64)  # the appended slots
    assert list(positions) == list(ref.rotary_positions(
        B, seq_lens=feeds["seqlens_k"] + 1))
    want = ref.rotary_ref(feeds["key"].reshape(B, KV, D), cos, sin, positions,
                          interleaved=bool(interleaved)).astype(np.float16)
    got = np.stack([pk[b, :, positions[b]] for b in range(B)])
    ulps = np.abs(got.view(np.int16).astype(np.int32) -
                  want.view(np.int16).astype(np.int32))
    assert ulps.max() <= 1, ulps.max()
    # And the output is attention of the rotated query over that cache.
    q = ref.rotary_ref(feeds["query"].reshape(B, H, D), cos, sin, positions,
                       interleaved=bool(interleaved))
    total = feeds["seqlens_k"] + 1
    assert np.abs(_attention64(q, pk, pv, total) - out).max() < 2e-3


def test_head_sink_and_softcap():
    sinks = np.array([-1.0, 0.5, 2.0, 3.5], np.float16)
    model = _node_model(dict(softcap=5.0), extra=("head_sink",))
    feeds, out, pk, pv = _run(model, dict(head_sink=sinks), seed=3)
    total = feeds["seqlens_k"] + 1
    q = feeds["query"].reshape(B, H, D)
    want = _attention64(q, pk, pv, total, softcap=5.0, sinks=sinks)
    assert np.abs(want - out).max() < 2e-3
    without = _attention64(q, pk, pv, total, softcap=5.0)
    assert np.abs(without - out).max() > 1e-2  # the sinks matter here


def test_call_arguments_slots_are_where_onnx_runtime_appends():
    """pattn.onnx.call_arguments' slots and total_seqlens (issue 32 §10),
    against ONNX Runtime's present_key: slot s is page s // S, token s % S,
    and that is the row ORT wrote the new key into."""
    model = _node_model({})
    feeds, out, pk, pv = _run(model)
    _, manifest = importer.import_model(model)
    (entry,) = manifest["functions"]
    tensors = dict(feeds, output=out.reshape(B, 1, H * D).copy())
    args = importer.call_arguments(entry, tensors)
    slots, total = args["slots"], args["total_seqlens"]
    assert total.tolist() == (feeds["seqlens_k"] + 1).tolist()
    new_keys = feeds["key"].reshape(B, KV, D)
    for b in range(B):
        page, token = divmod(int(slots[b]), S)
        assert page == b
        assert np.array_equal(pk[b, :, token], new_keys[b])
        # The rows before it are the past ones (ORT's CPU present holds
        # nothing after the total length).
        assert np.array_equal(pk[b, :, :token], feeds["past_key"][b, :, :token])
    # The caches are the feeds' buffers, as the pattn call writes them.
    (k_item,) = [i for i in entry["inputs"] if i["input"] == "past_key"]
    assert np.shares_memory(args[k_item["arg"]], feeds["past_key"])
