"""pattn.onnx.call_arguments: the pattn arguments of an imported node, built
from the tensors an ONNX Runtime caller holds (issue 32 §10).

Each computed argument is checked against the same quantity written out
here one token at a time (the manifest's formula read literally), on numpy
arrays and on torch tensors; the views are checked to share the caller's
memory; and the refusals (a missing tensor, a buffer that needs a copy, a
caller-held argument not given) name what is wrong.
test_onnx_ort_cpu.py checks the GroupQueryAttention slots against where
ONNX Runtime itself appends.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto as T  # noqa: E402

import pattn  # noqa: E402
from pattn import onnx as importer  # noqa: E402

from test_onnx_import import gqa_model, only, paged_model  # noqa: E402

RNG = np.random.default_rng(32)
HEADS, KV, D, BLOCK = 4, 2, 32, 16


def _f16(*shape):
    return RNG.standard_normal(shape).astype(np.float16)


def _paged_feeds(entry, new_tokens=(1, 3, 2), past=(5, 17, 30), pages=12):
    """The node's tensors: three sequences with 1, 3 and 2 new tokens after
    5, 17 and 30 cached ones, over shuffled pages."""
    tokens = sum(new_tokens)
    cu = np.concatenate([[0], np.cumsum(new_tokens)]).astype(np.int32)
    table = RNG.permutation(pages).astype(np.int32)[:3 * 4].reshape(3, 4)
    by_slot = {
        "query": _f16(tokens, HEADS * D), "key": _f16(tokens, KV * D),
        "value": _f16(tokens, KV * D),
        "key_cache": RNG.integers(-128, 127, (pages, BLOCK, KV, D), np.int8),
        "value_cache": RNG.integers(-128, 127, (pages, BLOCK, KV, D),
                                    np.int8),
        "cumulative_sequence_length": cu,
        "past_seqlens": np.array(past, np.int32), "block_table": table,
        "k_scale": np.array([0.02], np.float32),
        "v_scale": np.array([0.03], np.float32)}
    # paged_model names its tensors layer0.<input>, the query q_proj.
    tensors = {("q_proj" if slot == "query" else "layer0." + slot): array
               for slot, array in by_slot.items()}
    tensors["attn_out"] = np.full((tokens, HEADS * D), np.nan, np.float16)
    return tensors, by_slot


def _paged_slots_by_hand(by_slot):
    cu, past = by_slot["cumulative_sequence_length"], by_slot["past_seqlens"]
    table, slots = by_slot["block_table"], []
    for b in range(len(past)):
        for i in range(cu[b + 1] - cu[b]):
            p = past[b] + i
            slots.append(table[b][p // BLOCK] * BLOCK + p % BLOCK)
    return np.array(slots, np.int32)


def _torch_or_skip():
    return pytest.importorskip("torch", reason="torch is not installed")


def _as_torch(tensors):
    torch = _torch_or_skip()
    return {name: torch.from_numpy(array) for name, array in tensors.items()}


def _numpy(value):
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_paged_attention_without_slot_mapping(library):
    _, manifest = importer.import_model(paged_model(
        heads=HEADS, kv_heads=KV, head_dim=D, block=BLOCK,
        slot_mapping=False))
    entry = only(manifest)
    tensors, by_slot = _paged_feeds(entry)
    given = _as_torch(tensors) if library == "torch" else tensors
    args = importer.call_arguments(entry, given)
    assert sorted(args) == sorted(entry["args"])
    computed = {c["arg"]: c for c in entry["computed_args"]}
    (total,) = [n for n, c in computed.items()
                if c["rule"]["rule"] == "past_plus_new"]
    (slots,) = [n for n, c in computed.items()
                if c["rule"]["rule"] == "slots_after_past"]
    assert _numpy(args[total]).tolist() == [6, 20, 32]
    assert _numpy(args[total]).dtype == np.int32
    assert _numpy(args[slots]).tolist() == \
        _paged_slots_by_hand(by_slot).tolist()
    # Every ONNX tensor is viewed, not copied: the function writes the
    # caches and the output into the caller's buffers.
    for item in entry["inputs"] + entry["outputs"]:
        if item.get("arg") and "aliases" not in item:
            view = _numpy(args[item["arg"]])
            assert np.shares_memory(view, _numpy(given[item["onnx"]]))
    assert _numpy(args["q_proj"]).shape == (6, HEADS, D)


@pytest.mark.parametrize("seq", [1, 3])
def test_gqa_one_page_per_sequence(seq):
    batch, max_seq = 3, 64
    _, manifest = importer.import_model(gqa_model(
        heads=HEADS, kv_heads=KV, head_dim=D, seq=seq, max_seq=max_seq))
    entry = only(manifest)
    seqlens_k = np.array([4, 40, 63], np.int32)  # total length - 1
    tensors = {
        item["onnx"]: value for item, value in zip(entry["inputs"], [
            _f16(batch, seq, HEADS * D), _f16(batch, seq, KV * D),
            _f16(batch, seq, KV * D), _f16(batch, KV, max_seq, D),
            _f16(batch, KV, max_seq, D), seqlens_k,
            np.array(64, np.int32)])}
    tensors[entry["outputs"][0]["onnx"]] = _f16(batch, seq, HEADS * D)
    args = importer.call_arguments(entry, tensors)
    assert sorted(args) == sorted(entry["args"])
    assert args["block_table"].tolist() == [[0], [1], [2]]
    assert args["total_seqlens"].tolist() == (seqlens_k + 1).tolist()
    want = [b * max_seq + seqlens_k[b] + 1 - seq + i
            for b in range(batch) for i in range(seq)]
    assert args["slots"].tolist() == want
    if seq > 1:
        assert args["query_start"].tolist() == [0, seq, 2 * seq, 3 * seq]
    else:
        assert "query_start" not in args
    # The BNSH buffers are the hnd pages' bytes.
    cache = entry["inputs"][3]["arg"]
    assert args[cache].dtype == np.int8
    assert args[cache].shape == (batch, KV, max_seq, 2 * D)


def test_gqa_paged_copy_takes_the_callers_pages():
    batch, seq, block = 2, 1, 16
    _, manifest = importer.import_model(
        gqa_model(heads=HEADS, kv_heads=KV, head_dim=D, max_seq=32768),
        gqa_block_size=block)
    entry = only(manifest)
    seqlens_k = np.array([20, 33], np.int32)
    tensors = {entry["inputs"][i]["onnx"]: value for i, value in enumerate([
        _f16(batch, seq, HEADS * D), _f16(batch, seq, KV * D),
        _f16(batch, seq, KV * D)])}
    tensors["seqlens_k"] = seqlens_k
    tensors[entry["outputs"][0]["onnx"]] = _f16(batch, seq, HEADS * D)
    with pytest.raises(pattn.ArgumentError,
                       match="'past_key_pages' is the caller's.*pass "
                       "past_key_pages="):
        importer.call_arguments(entry, tensors)
    pages = RNG.integers(-1, 1, (8, block, KV, 2 * D), np.int8)
    table = np.array([[3, 5, 0], [6, 1, 2]], np.int32)
    args = importer.call_arguments(entry, tensors, past_key_pages=pages,
                                   past_value_pages=pages.copy(),
                                   block_table=table)
    assert args["past_key_pages"] is pages
    # p = seqlens_k[b]: page table[b][p // 16], token p % 16.
    assert args["slots"].tolist() == [5 * 16 + 4, 2 * 16 + 1]
    assert args["total_seqlens"].tolist() == [21, 34]


def test_torch_and_numpy_agree_and_stay_on_the_tensors_device():
    torch = _torch_or_skip()
    _, manifest = importer.import_model(paged_model(
        heads=HEADS, kv_heads=KV, head_dim=D, block=BLOCK,
        slot_mapping=False))
    entry = only(manifest)
    tensors, _ = _paged_feeds(entry)
    from_numpy = importer.call_arguments(entry, tensors)
    from_torch = importer.call_arguments(entry, _as_torch(tensors))
    for name in from_numpy:
        assert isinstance(from_torch[name], torch.Tensor), name
        assert from_torch[name].device.type == "cpu"
        assert _numpy(from_torch[name]).tobytes() == \
            from_numpy[name].tobytes(), name


def test_refusals_name_the_tensor():
    _, manifest = importer.import_model(paged_model(
        heads=HEADS, kv_heads=KV, head_dim=D, block=BLOCK,
        slot_mapping=False))
    entry = only(manifest)
    tensors, by_slot = _paged_feeds(entry)
    missing = dict(tensors)
    del missing["attn_out"]
    with pytest.raises(pattn.ArgumentError,
                       match="no tensor for ONNX output 'attn_out'"):
        importer.call_arguments(entry, missing)
    # A strided cache cannot be passed without a copy, which the function
    # would write instead of the caller's cache.
    strided = dict(tensors)
    strided["layer0.key_cache"] = np.repeat(
        by_slot["key_cache"], 2, axis=3)[..., ::2]
    with pytest.raises(pattn.ArgumentError,
                       match="'layer0.key_cache' is not contiguous"):
        importer.call_arguments(entry, strided)
    wrong = dict(tensors)
    wrong["q_proj"] = by_slot["query"].astype(np.float32)
    with pytest.raises(pattn.ArgumentError,
                       match="'q_proj' has dtype float32"):
        importer.call_arguments(entry, wrong)
    no_past = {k: v for k, v in tensors.items() if k != "layer0.past_seqlens"}
    with pytest.raises(pattn.ArgumentError,
                       match="computed from ONNX input past_seqlens"):
        importer.call_arguments(entry, no_past)


def test_every_manifest_rule_is_known():
    """Every importer path's computed arguments carry a rule that
    call_arguments knows (an unknown one would fail only at call time)."""
    from pattn import _onnx_arguments
    import inspect
    source = inspect.getsource(_onnx_arguments._compute)
    models = [paged_model(heads=HEADS, kv_heads=KV, head_dim=D),
              paged_model(heads=HEADS, kv_heads=KV, head_dim=D,
                          slot_mapping=False),
              gqa_model(heads=HEADS, kv_heads=KV, head_dim=D, seq=2,
                        max_seq=64)]
    rules = set()
    for model in models:
        rules |= {c["rule"]["rule"] for c in
                  only(importer.import_model(model)[1])["computed_args"]}
    _, paged = importer.import_model(
        gqa_model(heads=HEADS, kv_heads=KV, head_dim=D, max_seq=32768),
        gqa_block_size=16)
    rules |= {c["rule"]["rule"] for c in only(paged)["computed_args"]}
    assert rules == {"past_plus_new", "slots_after_past", "page_per_sequence",
                     "sequence_page_slots", "total_is_seqlens_k_plus_one",
                     "uniform_query_start", "caller_held",
                     "paged_copy_slots"}
    for rule in rules - {"caller_held"}:
        assert f'"{rule}"' in source, rule
