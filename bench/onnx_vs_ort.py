"""pattn against ONNX Runtime: GroupQueryAttention decode with f16 caches.

    # where pattn-compile runs: fill an artifact cache
    PATTN_ARTIFACT_DIR=$PWD/.ort-artifacts \
      PATTN_COMPILE=$PWD/.ort-artifacts/compiler/bin/pattn-compile \
      PYTHONPATH=python python3 bench/onnx_vs_ort.py --precompile
    # on the GPU machine (onnxruntime + onnx importable, the same two vars)
    PYTHONPATH=python:$SITE python3 bench/onnx_vs_ort.py --out results.md

Issue 11, item 4. Each case is one com.microsoft GroupQueryAttention node
built with onnx.helper in a real export's shape (a BNSH past/present buffer
shared in place, one new token per sequence), seeded with random past KV
(no prefill), then run for several decode steps by ONNX Runtime
(CPUExecutionProvider) and by pattn (the graph imported with pattn.onnx,
compiled for sm_90a, called on torch CUDA tensors with the manifest's views
and computed arguments; the cache written in place, present == past). Cases
cover rotary embedding (do_rotary=1 with f16 cos/sin caches, neox and
interleaved), packed QKV (Phi-3's export), head sinks, Gemma-2's softcap 50
with its 4096-token window over longer sequences, and Qwen3's QK-norm
(which ORT's CPU provider rejects, so that case is checked against the
float64 reference only); two cases start from ORT's prefill of a prompt
(the same node with S = the prompt length) and decode from its present,
and four have pattn compute a 300-2000-token prompt itself
(bench/onnx_prompts.py checks it the same way). Per step it checks:

- the output against ORT's within SPEC §8's f16 tolerance (atol 8e-4 scaled
  by max(1, max |V|) over the sequence's cached values, rtol 5e-3), and
  both against a float64 reference of the same cache (rotary, norm, sinks,
  softcap and window included);
- pattn's cache against ORT's present_key/present_value over every
  sequence's valid positions: V and unrotated K bit for bit, rotated K
  within one f16 ulp (both round the fp32 rotation once; the order of the
  fp32 operations may differ), the slot just written against the float64
  rotation of the new K rounded to f16 (within one ulp), and that pattn
  left the rest of its buffer untouched.

pattn's output is poisoned with NaN before each call. Without CUDA, torch
or onnxruntime it says so and exits 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import sys
import traceback

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

import numpy as np  # noqa: E402

ATOL, RTOL = 8e-4, 5e-3  # SPEC §8, f16 activations


@dataclasses.dataclass
class Case:
    name: str
    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    max_seq: int
    past: tuple  # past tokens per sequence before the first step
    steps: int
    rotary: bool = False
    interleaved: bool = False
    packed: bool = False
    sinks: bool = False
    qk_norm: bool = False
    softcap: float = 0.0
    window: int = -1
    # > 0: ORT first runs the prompt (this many tokens per sequence, every
    # sequence) through the same node with S = prefill, and both continue
    # from ORT's present (``past`` is then ignored).
    prefill: int = 0
    # > 0: pattn computes a prompt of this many tokens per sequence itself
    # (the node imported with S = pattn_prompt; ORT runs it too), and the
    # decode steps follow from each one's own cache (bench/onnx_prompts.py).
    pattn_prompt: int = 0


CASES = [
    Case("Llama-3-8B 32/8 D128", 4, 32, 8, 128, 512, (1, 37, 200, 503), 6),
    Case("Qwen2.5-7B 28/4 D128", 3, 28, 4, 128, 256, (5, 129, 249), 6),
    Case("Phi-3 32/32 D96", 2, 32, 32, 96, 256, (64, 250), 6),
    Case("Llama-3-8B RoPE", 4, 32, 8, 128, 512, (1, 37, 200, 503), 4,
         rotary=True),
    Case("Qwen2.5-7B RoPE interleaved", 3, 28, 4, 128, 256, (5, 129, 249), 4,
         rotary=True, interleaved=True),
    Case("Phi-3 packed QKV RoPE", 2, 32, 32, 96, 256, (64, 250), 4,
         rotary=True, packed=True),
    Case("gpt-oss-like sinks RoPE 64/8 D64", 2, 64, 8, 64, 512, (17, 400), 4,
         rotary=True, sinks=True),
    Case("Gemma-2 16/8 D256 softcap 50 window 4096", 2, 16, 8, 256, 4096,
         (3000, 4090), 3, softcap=50.0, window=4096),
    # The same with a window that cuts into the sequences.
    Case("Gemma-2 16/8 D256 softcap 50 window 256", 2, 16, 8, 256, 1024,
         (700, 1000), 4, softcap=50.0, window=256),
    Case("Qwen3-8B QK-norm RoPE 32/8 D128", 2, 32, 8, 128, 512, (30, 300), 4,
         rotary=True, qk_norm=True),
    Case("Llama-3-8B RoPE, ORT prefill 96 then decode", 3, 32, 8, 128, 256,
         (96, 96, 96), 5, rotary=True, prefill=96),
    Case("Qwen2.5-7B, ORT prefill 37 then decode", 2, 28, 4, 128, 128,
         (37, 37), 5, prefill=37),
    # Prompts computed by pattn (issue 30): Llama-3, Qwen2.5, Phi-3 and
    # Gemma-2 shapes, 300-2000 tokens, then decode.
    Case("Llama-3-8B RoPE, pattn prompt 1000 then decode", 2, 32, 8, 128,
         1024, (1000, 1000), 3, rotary=True, pattn_prompt=1000),
    Case("Qwen2.5-7B, pattn prompt 300 then decode", 3, 28, 4, 128, 512,
         (300, 300, 300), 3, pattn_prompt=300),
    Case("Phi-3 packed QKV RoPE, pattn prompt 500 then decode", 2, 32, 32,
         96, 512, (500, 500), 3, rotary=True, packed=True, pattn_prompt=500),
    Case("Gemma-2 softcap 50 window 256, pattn prompt 2000 then decode", 1,
         16, 8, 256, 2048, (2000,), 3, softcap=50.0, window=256,
         pattn_prompt=2000),
]

# Not in the default run: neighbours of Phi-3's shape, to narrow a failure
# down (--cases diag).
DIAG = [
    Case("diag 32/8 D96 S256", 2, 32, 8, 96, 256, (64, 250), 2),
    Case("diag 32/32 D128 S256", 2, 32, 32, 128, 256, (64, 250), 2),
    Case("diag 32/32 D96 S512", 2, 32, 32, 96, 512, (64, 250), 2),
    Case("diag 32/32 D96 S256 B1", 1, 32, 32, 96, 256, (64,), 2),
]


#: The models' IR version: opset 17 needs 8 and float8 tensors 9; onnx 1.23
#: writes 14 by default, which ONNX Runtime before 1.32 (1.30 on the GPU
#: machine) refuses ("max supported IR version: 13").
IR_VERSION = 10


def make_model(graph):
    """The graph as a model of opsets com.microsoft 1 and ai.onnx 17."""
    from onnx import helper
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[
        helper.make_opsetid("com.microsoft", 1), helper.make_opsetid("", 17)])


def build_model(case: Case, seq: int = 1):
    """The case's node with ``seq`` query tokens per sequence (1: decode;
    the prompt length for ORT's prefill)."""
    import onnx  # noqa: F401
    from onnx import TensorProto as T, helper
    B, H, KV, D, S = (case.batch, case.heads, case.kv_heads, case.head_dim,
                      case.max_seq)
    info = helper.make_tensor_value_info
    hidden = (H + 2 * KV) * D if case.packed else H * D
    inputs = [info("query", T.FLOAT16, [B, seq, hidden])]
    names = ["query", "" if case.packed else "key",
             "" if case.packed else "value", "past_key", "past_value",
             "seqlens_k", "total_sequence_length"]
    if not case.packed:
        inputs += [info("key", T.FLOAT16, [B, seq, KV * D]),
                   info("value", T.FLOAT16, [B, seq, KV * D])]
    inputs += [info("past_key", T.FLOAT16, [B, KV, S, D]),
               info("past_value", T.FLOAT16, [B, KV, S, D]),
               info("seqlens_k", T.INT32, [B]),
               info("total_sequence_length", T.INT32, [])]
    extra = {}
    if case.rotary:
        extra["cos_cache"] = info("cos_cache", T.FLOAT16, [S, D // 2])
        extra["sin_cache"] = info("sin_cache", T.FLOAT16, [S, D // 2])
    if case.sinks:
        extra["head_sink"] = info("head_sink", T.FLOAT16, [H])
    if case.qk_norm:
        extra["q_norm_weight"] = info("q_norm_weight", T.FLOAT16, [D])
        extra["k_norm_weight"] = info("k_norm_weight", T.FLOAT16, [D])
    order = ["cos_cache", "sin_cache", "position_ids", "attention_bias",
             "head_sink", "k_scale", "v_scale", "q_norm_weight",
             "k_norm_weight"]
    tail = [n if n in extra else "" for n in order]
    while tail and not tail[-1]:
        tail.pop()
    inputs += [extra[n] for n in order if n in extra]
    attrs = dict(num_heads=H, kv_num_heads=KV, do_rotary=int(case.rotary))
    if case.interleaved:
        attrs["rotary_interleaved"] = 1
    if case.softcap:
        attrs["softcap"] = case.softcap
    if case.window > 0:
        attrs["local_window_size"] = case.window
    node = helper.make_node(
        "GroupQueryAttention", names + tail,
        ["output", "present_key", "present_value"], name="attn",
        domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "gqa_decode", inputs, [
        info("output", T.FLOAT16, [B, seq, H * D]),
        info("present_key", T.FLOAT16, [B, KV, S, D]),
        info("present_value", T.FLOAT16, [B, KV, S, D])])
    return make_model(graph)


BACKEND = "auto"


def compile_case(case: Case, seq: int = 1):
    import pattn
    import pattn.onnx
    model = build_model(case, seq)
    module, manifest = pattn.onnx.import_model(model)
    artifact = pattn.compile(module, chips=["sm_90a"], backend=BACKEND)
    return model, manifest["functions"][0], artifact


def reference64(q, kc, vc, total, H, KV, case: Case, sinks=None):
    """float64 decode attention of one new token per sequence over the
    cache's first total[b] positions, with the case's softcap, window (the
    last `window` keys, the current one included: ORT's local_window_size)
    and sinks. q [B, H, D] (already rotated), caches [B, KV, S, D]."""
    B, _, D = q.shape
    out = np.zeros((B, H, D))
    g = H // KV
    for b in range(B):
        n = int(total[b])
        first = max(0, n - case.window) if case.window > 0 else 0
        k = kc[b, :, first:n].astype(np.float64)  # [KV, n, D]
        v = vc[b, :, first:n].astype(np.float64)
        qq = q[b].astype(np.float64).reshape(KV, g, D)
        logits = np.einsum("kgd,knd->kgn", qq, k) / np.sqrt(D)
        if case.softcap:
            logits = case.softcap * np.tanh(logits / case.softcap)
        top = logits.max(-1, keepdims=True)
        if sinks is not None:
            top = np.maximum(top, sinks.reshape(KV, g, 1))
        p = np.exp(logits - top)
        denominator = p.sum(-1, keepdims=True)
        if sinks is not None:
            denominator += np.exp(sinks.reshape(KV, g, 1) - top)
        out[b] = np.einsum("kgn,knd->kgd", p / denominator, v).reshape(H, D)
    return out


def ratio(got, want, value_scale):
    """max |got - want| / (atol * value_scale + rtol * |want|), per row
    scale [B] broadcast over [B, H, D]."""
    atol = ATOL * value_scale[:, None, None]
    return float((np.abs(got - want) / (atol + RTOL * np.abs(want))).max())


def ulps(a, b):
    """The largest distance in f16 units in the last place between two f16
    arrays (as ordered integers)."""
    def ordered(x):
        bits = x.view(np.uint16).astype(np.int32)
        return np.where(bits & 0x8000, 0x8000 - bits, bits)
    return int(np.abs(ordered(a) - ordered(b)).max()) if a.size else 0


def rope_tables(S, D):
    half = D // 2
    angles = np.arange(S)[:, None] * 10000.0 ** (-np.arange(half) / half)
    return np.cos(angles).astype(np.float16), np.sin(angles).astype(
        np.float16)


def ort_feeds(case: Case, past_k, past_v, seqlens_k, total: int, q, k, v,
              statics: dict) -> dict:
    """The ORT inputs of one run of the node: q/k/v [B, S, ...] (packed into
    the query for a packed case), the past buffers, seqlens_k (total - 1
    per sequence), the batch's total length and the case's constant
    inputs (device tensors)."""
    feeds = dict(past_key=past_k, past_value=past_v, seqlens_k=seqlens_k,
                 total_sequence_length=np.array(total, np.int32))
    if case.packed:
        feeds["query"] = np.concatenate([q, k, v], axis=-1)
    else:
        feeds.update(query=q, key=k, value=v)
    for name, value in statics.items():
        feeds[name] = value.cpu().numpy()
    return feeds


def run_case(case: Case, seed: int):
    import onnxruntime as ort
    import torch
    import pattn
    from pattn import reference as ref

    model, function, artifact = compile_case(case)
    lib = pattn.load(artifact)
    call = getattr(lib, function["function"])
    sess, ort_error = None, None
    try:
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
    except Exception as error:  # Qwen3's QK-norm: the CPU EP rejects it
        ort_error = f"{type(error).__name__}: {str(error).splitlines()[0]}"

    B, H, KV, D, S = (case.batch, case.heads, case.kv_heads, case.head_dim,
                      case.max_seq)
    rng = np.random.default_rng(seed)

    def randn(*shape):
        return rng.standard_normal(shape).astype(np.float16)

    past_k, past_v = randn(B, KV, S, D), randn(B, KV, S, D)  # never zeros
    ort_k, ort_v = past_k.copy(), past_v.copy()
    dev = "cuda"
    pk = torch.from_numpy(past_k.copy()).to(dev)
    pv = torch.from_numpy(past_v.copy()).to(dev)
    initial_k, initial_v = pk.clone(), pv.clone()
    block_table = torch.arange(B, dtype=torch.int32, device=dev).view(B, 1)
    out = torch.empty(B, 1, H * D, dtype=torch.float16, device=dev)
    lengths = np.array(case.past, dtype=np.int32)  # past tokens per sequence
    assert (lengths + case.steps <= S).all() and (lengths >= 1).all()
    cos, sin = rope_tables(S, D)
    sinks = (rng.uniform(-1, 3, size=H).astype(np.float16)
             if case.sinks else None)
    q_w = rng.uniform(0.5, 1.5, size=D).astype(np.float16)
    k_w = rng.uniform(0.5, 1.5, size=D).astype(np.float16)
    statics = {}
    if case.rotary:
        statics.update(cos_cache=cos, sin_cache=sin)
    if case.sinks:
        statics["head_sink"] = sinks
    if case.qk_norm:
        statics.update(q_norm_weight=q_w, k_norm_weight=k_w)
    statics = {name: torch.from_numpy(value).to(dev)
               for name, value in statics.items()}

    def rotate(x, positions, weight):
        """x [B, heads, D] f16 rotated at ``positions`` (float64)."""
        if not case.rotary:
            return x.astype(np.float64)
        norm = weight.astype(np.float64) if case.qk_norm else None
        return ref.rotary_ref(x, cos, sin, positions, norm_weight=norm,
                              interleaved=case.interleaved)

    if case.prefill:
        # ORT runs the prompt; both start from its present (the past buffer
        # holds random bytes beyond the prompt, never zeros).
        P = case.prefill
        prompt = ort.InferenceSession(
            build_model(case, seq=P).SerializeToString(),
            providers=["CPUExecutionProvider"])
        q, k, v = randn(B, P, H * D), randn(B, P, KV * D), randn(B, P, KV * D)
        _, ort_k, ort_v = prompt.run(None, ort_feeds(
            case, ort_k, ort_v, np.full(B, P - 1, np.int32), P, q, k, v,
            statics))
        pk.copy_(torch.from_numpy(ort_k))
        pv.copy_(torch.from_numpy(ort_v))
        initial_k, initial_v = pk.clone(), pv.clone()
        lengths = np.full(B, P, np.int32)

    rows = []
    if case.pattn_prompt:
        import onnx_prompts
        row, o_pk, o_pv = onnx_prompts.run_prompt(
            case, randn, statics, pk, pv, rotate, q_w, k_w, sinks, BACKEND)
        rows.append(row)
        if o_pk is not None:  # each continues from its own cache
            ort_k, ort_v = o_pk, o_pv
        initial_k, initial_v = pk.clone(), pv.clone()
        lengths = np.full(B, case.pattn_prompt, np.int32)
    for step in range(case.steps):
        q, k, v = randn(B, 1, H * D), randn(B, 1, KV * D), randn(B, 1, KV * D)
        seqlens_k = lengths.astype(np.int32)  # total - 1 = past tokens
        total = seqlens_k + 1
        packed = np.concatenate([q, k, v], axis=-1)
        o_out = None
        if sess is not None:
            feeds = ort_feeds(case, ort_k, ort_v, seqlens_k, total.max(), q,
                              k, v, statics)
            try:
                o_out, o_pk, o_pv = sess.run(None, feeds)
            except Exception as error:  # an EP that rejects at run time
                ort_error = (f"{type(error).__name__}: "
                             f"{str(error).splitlines()[0]}")
                sess = None

        # pattn: the manifest's computed arguments and views.
        sk = torch.from_numpy(seqlens_k).to(dev)
        b = torch.arange(B, dtype=torch.int32, device=dev)
        tensors = dict(statics)
        tensors.update(
            past_key=pk.view(torch.int8), past_value=pv.view(torch.int8),
            block_table=block_table, output=out.view(B, H, D),
            slots=(b * S + sk + 1 - 1).to(torch.int32),  # + i, i < 1
            total_seqlens=(sk + 1).to(torch.int32))
        if case.packed:
            tensors["query"] = torch.from_numpy(packed).to(dev).view(
                B, H + 2 * KV, D)
        else:
            tensors.update(
                query=torch.from_numpy(q).to(dev).view(B, H, D),
                key=torch.from_numpy(k).to(dev).view(B, KV, D),
                value=torch.from_numpy(v).to(dev).view(B, KV, D))
        out.fill_(float("nan"))
        call(**{name: tensors[name] for name in function["args"]})
        torch.cuda.synchronize()
        lib.check_device_errors()
        p_out = out.cpu().numpy().reshape(B, H, D)
        p_k, p_v = pk.cpu().numpy(), pv.cpu().numpy()

        # The new token's K as it must be cached: rotated (and normalized)
        # at its position, rounded once to f16.
        positions = seqlens_k.astype(np.int64)
        k_new = rotate(k.reshape(B, KV, D), positions, k_w)
        k_new16 = k_new.astype(np.float16)
        new_ulps = max(ulps(p_k[s, :, int(seqlens_k[s])], k_new16[s])
                       for s in range(B))
        new_v_ok = all(np.array_equal(p_v[s, :, int(seqlens_k[s])],
                                      v[s, 0].reshape(KV, D))
                       for s in range(B))
        untouched = True
        for s in range(B):
            n = int(total[s])
            untouched &= bool(torch.equal(pk[s, :, n:], initial_k[s, :, n:]))
            untouched &= bool(torch.equal(pv[s, :, n:], initial_v[s, :, n:]))
        k_ulps = v_exact = None
        if o_out is not None:
            k_ulps = max(ulps(p_k[s, :, :int(total[s])],
                              o_pk[s, :, :int(total[s])]) for s in range(B))
            v_exact = all(np.array_equal(
                p_v[s, :, :int(total[s])].view(np.uint16),
                o_pv[s, :, :int(total[s])].view(np.uint16)) for s in range(B))

        vmax = np.array([max(1.0, float(np.abs(
            p_v[s, :, :int(total[s])].astype(np.float64)).max()))
            for s in range(B)])
        q_rot = rotate(q.reshape(B, H, D), positions, q_w)
        sink64 = None if sinks is None else sinks.astype(np.float64)
        p64 = p_out.astype(np.float64)
        row = dict(step=step, finite=bool(np.isfinite(p_out).all()),
                   pattn_vs_f64=ratio(p64, reference64(
                       q_rot, p_k, p_v, total, H, KV, case, sink64), vmax),
                   new_k_ulps=new_ulps, new_v_ok=bool(new_v_ok),
                   untouched=bool(untouched), k_ulps=k_ulps,
                   v_exact=v_exact, ort_error=ort_error)
        if o_out is not None:
            o64 = o_out.reshape(B, H, D).astype(np.float64)
            row.update(max_abs=float(np.abs(p64 - o64).max()),
                       ratio=ratio(p64, o64, vmax),
                       ort_vs_f64=ratio(o64, reference64(
                           q_rot, o_pk, o_pv, total, H, KV, case, sink64),
                           vmax))
            # ORT's chain continues from its own present.
            ort_k, ort_v = o_pk, o_pv
        rows.append(row)
        lengths = lengths + 1
    return rows


# ---------------------------------------------------------------------------
# PagedAttention with quantized caches: pattn against float64 only (ONNX
# Runtime's PagedAttention is CUDA-only, which the CPU wheel here lacks)
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class PagedCase:
    name: str
    heads: int
    kv_heads: int
    head_dim: int
    cache: str        # "int8", "float8e4m3fn", "int4"
    quant: str        # "PER_TENSOR", "PER_CHANNEL"
    past: tuple       # past tokens per sequence
    steps: int = 3
    block: int = 16
    rotary: bool = True
    sinks: bool = False
    qk_norm: bool = False


PAGED = [
    PagedCase("PagedAttention Llama-3 INT8 tensor RoPE", 32, 8, 128, "int8",
              "PER_TENSOR", (5, 70, 300)),
    PagedCase("PagedAttention Qwen2.5 FP8 channel RoPE sinks", 28, 4, 128,
              "float8e4m3fn", "PER_CHANNEL", (33, 250), sinks=True),
    PagedCase("PagedAttention Llama-3 INT4 channel RoPE", 32, 8, 128, "int4",
              "PER_CHANNEL", (1, 129, 400), block=64),
    PagedCase("PagedAttention Qwen3 INT8 channel QK-norm RoPE", 32, 8, 128,
              "int8", "PER_CHANNEL", (17, 200), qk_norm=True),
]
_PAGED_ENCODING = {"int8": "i8", "float8e4m3fn": "f8e4m3", "int4": "i4"}


def build_paged_model(case: PagedCase, tokens: int, batch: int,
                      blocks: int, max_blocks: int):
    from onnx import TensorProto as T, helper
    H, KV, D, bs = case.heads, case.kv_heads, case.head_dim, case.block
    element = {"int8": T.INT8, "float8e4m3fn": T.FLOAT8E4M3FN,
               "int4": T.UINT8}[case.cache]
    row = D // 2 if case.cache == "int4" else D
    info = helper.make_tensor_value_info
    specs = {
        "query": (T.FLOAT16, [tokens, H * D]),
        "key": (T.FLOAT16, [tokens, KV * D]),
        "value": (T.FLOAT16, [tokens, KV * D]),
        "key_cache": (element, [blocks, bs, KV, row]),
        "value_cache": (element, [blocks, bs, KV, row]),
        "cumulative_sequence_length": (T.INT32, [batch + 1]),
        "past_seqlens": (T.INT32, [batch]),
        "block_table": (T.INT32, [batch, max_blocks]),
        "slot_mapping": (T.INT32, [tokens]),
    }
    if case.rotary:
        specs["cos_cache"] = (T.FLOAT16, [max_blocks * bs, D // 2])
        specs["sin_cache"] = (T.FLOAT16, [max_blocks * bs, D // 2])
    if case.sinks:
        specs["head_sink"] = (T.FLOAT16, [H])
    if case.qk_norm:
        specs["q_norm_weight"] = (T.FLOAT16, [D])
        specs["k_norm_weight"] = (T.FLOAT16, [D])
    shape = [1] if case.quant == "PER_TENSOR" else [KV, D]
    specs["k_scale"] = (T.FLOAT, shape)
    specs["v_scale"] = (T.FLOAT, shape)
    import pattn.onnx as importer
    names = [n if n in specs else "" for n in importer.PAGED_INPUTS]
    while names and not names[-1]:
        names.pop()
    attrs = dict(num_heads=H, kv_num_heads=KV, k_quant_type=case.quant,
                 v_quant_type=case.quant, do_rotary=int(case.rotary))
    if case.cache == "int4":
        attrs.update(k_cache_dtype="int4", v_cache_dtype="int4")
    node = helper.make_node(
        "PagedAttention", names, ["output", "key_cache_out",
                                  "value_cache_out"], name="attn",
        domain="com.microsoft", **attrs)
    graph = helper.make_graph(
        [node], "paged", [info(n, *specs[n]) for n in specs],
        [info("output", T.FLOAT16, [tokens, H * D]),
         info("key_cache_out", element, specs["key_cache"][1]),
         info("value_cache_out", element, specs["value_cache"][1])])
    return make_model(graph)


def _paged_geometry(case: PagedCase):
    batch = len(case.past)
    max_blocks = (max(case.past) + case.steps + case.block - 1) // case.block
    return batch, max_blocks, batch * max_blocks + 3  # spare pages


def compile_paged(case: PagedCase):
    import pattn
    import pattn.onnx
    batch, max_blocks, blocks = _paged_geometry(case)
    model = build_paged_model(case, batch, batch, blocks, max_blocks)
    module, manifest = pattn.onnx.import_model(model)
    return manifest["functions"][0], pattn.compile(
        module, chips=["sm_90a"], backend=BACKEND)


def run_paged_case(case: PagedCase, seed: int):
    import torch
    import pattn
    from pattn import reference as ref

    function, artifact = compile_paged(case)
    lib = pattn.load(artifact)
    call = getattr(lib, function["function"])
    H, KV, D, bs = case.heads, case.kv_heads, case.head_dim, case.block
    encoding = _PAGED_ENCODING[case.cache]
    batch, max_blocks, blocks = _paged_geometry(case)
    rng = np.random.default_rng(seed)
    dev = "cuda"
    f16 = lambda *shape: rng.standard_normal(shape).astype(np.float16)  # noqa
    if case.quant == "PER_TENSOR":
        k_scale = np.array([0.02], np.float32)
        v_scale = np.array([0.03], np.float32)
    else:
        k_scale = rng.uniform(0.005, 0.05, (KV, D)).astype(np.float32)
        v_scale = rng.uniform(0.005, 0.05, (KV, D)).astype(np.float32)
    if encoding == "i4":  # 7 codes: the rows' range
        k_scale, v_scale = k_scale * 25, v_scale * 25

    def scale_of(table, kv):
        return table[0] if table.size == 1 else table[kv]

    # Every page holds valid codes of random rows (stale pages too).
    row = D // 2 if encoding == "i4" else D
    pages = {}
    for side, table in (("k", k_scale), ("v", v_scale)):
        rows = rng.standard_normal((blocks, bs, KV, D)).astype(np.float32)
        data = np.empty((blocks, bs, KV, row), np.uint8)
        for kv in range(KV):
            data[:, :, kv] = ref.encode_row(encoding, rows[:, :, kv],
                                            scale_of(table, kv))
        pages[side] = data
    table = rng.permutation(blocks)[:batch * max_blocks].reshape(
        batch, max_blocks).astype(np.int32)
    S = max_blocks * bs
    cos, sin = rope_tables(S, D)
    q_w = rng.uniform(0.5, 1.5, D).astype(np.float16)
    k_w = rng.uniform(0.5, 1.5, D).astype(np.float16)
    sinks = rng.uniform(-1, 3, H).astype(np.float16)
    element = torch.uint8 if encoding != "f8e4m3" else torch.float8_e4m3fn
    caches = {side: torch.from_numpy(pages[side]).to(dev).view(element)
              for side in pages}
    tensors = dict(
        key_cache=caches["k"].view(torch.int8),
        value_cache=caches["v"].view(torch.int8),
        block_table=torch.from_numpy(table).to(dev),
        cumulative_sequence_length=torch.arange(
            batch + 1, dtype=torch.int32, device=dev),
        k_scale=torch.from_numpy(k_scale).to(dev),
        v_scale=torch.from_numpy(v_scale).to(dev),
        cos_cache=torch.from_numpy(cos).to(dev),
        sin_cache=torch.from_numpy(sin).to(dev),
        head_sink=torch.from_numpy(sinks).to(dev),
        q_norm_weight=torch.from_numpy(q_w).to(dev),
        k_norm_weight=torch.from_numpy(k_w).to(dev))
    out = torch.empty(batch, H, D, dtype=torch.float16, device=dev)
    lengths = np.array(case.past, np.int64)
    rows = []
    for step in range(case.steps):
        q, k, v = f16(batch, H, D), f16(batch, KV, D), f16(batch, KV, D)
        slots = np.array([table[b, lengths[b] // bs] * bs + lengths[b] % bs
                          for b in range(batch)], np.int32)
        tensors.update(query=torch.from_numpy(q).to(dev),
                       key=torch.from_numpy(k).to(dev),
                       value=torch.from_numpy(v).to(dev),
                       slot_mapping=torch.from_numpy(slots).to(dev),
                       total_seqlens=torch.from_numpy(
                           (lengths + 1).astype(np.int32)).to(dev),
                       output=out)
        out.fill_(float("nan"))
        call(**{name: tensors[name] for name in function["args"]})
        torch.cuda.synchronize()
        lib.check_device_errors()
        got_k = caches["k"].view(torch.uint8).cpu().numpy()
        got_v = caches["v"].view(torch.uint8).cpu().numpy()
        positions = lengths.copy()
        norm = (lambda w: w.astype(np.float64)) if case.qk_norm else \
            (lambda w: None)
        k_rot = (ref.rotary_ref(k, cos, sin, positions, norm_weight=norm(k_w))
                 if case.rotary else k.astype(np.float64))
        q_rot = (ref.rotary_ref(q, cos, sin, positions, norm_weight=norm(q_w))
                 if case.rotary else q.astype(np.float64))
        # The new slots: V bit-exact; rotated K against the reference
        # quantizer of the f16-rounded float64 rotation (the rotation itself
        # may differ by an f16 ulp, so a code may move by one).
        v_exact, k_codes = True, 0
        for b in range(batch):
            page, off = divmod(int(slots[b]), bs)
            for kv in range(KV):
                want_v = ref.encode_row(encoding, v[b, kv].astype(np.float32),
                                        scale_of(v_scale, kv))
                v_exact &= np.array_equal(got_v[page, off, kv], want_v)
                want_k = ref.encode_row(
                    encoding, k_rot[b, kv].astype(np.float16).astype(
                        np.float32), scale_of(k_scale, kv))
                if encoding == "i4":
                    a = ref.unpack_i4(got_k[page, off, kv], D)
                    c = ref.unpack_i4(want_k, D)
                elif encoding == "i8":
                    a = got_k[page, off, kv].view(np.int8).astype(int)
                    c = want_k.view(np.int8).astype(int)
                else:  # e4m3: adjacent codes are adjacent sign-magnitude ints
                    def ordered(x):
                        x = x.astype(int)
                        return np.where(x & 0x80, -(x & 0x7F), x)
                    a, c = ordered(got_k[page, off, kv]), ordered(want_k)
                k_codes = max(k_codes, int(np.abs(a - c).max()))
        # The output against float64 over the cache pattn holds.
        total = lengths + 1
        want = np.zeros((batch, H, D))
        vmax = np.ones(batch)
        g = H // KV
        for b in range(batch):
            n = int(total[b])
            keys = np.zeros((KV, n, D))
            vals = np.zeros((KV, n, D))
            for p in range(n):
                page, off = table[b, p // bs], p % bs
                for kv in range(KV):
                    keys[kv, p] = ref.decode_row(encoding, got_k[page, off, kv],
                                                 D, scale_of(k_scale, kv))
                    vals[kv, p] = ref.decode_row(encoding, got_v[page, off, kv],
                                                 D, scale_of(v_scale, kv))
            vmax[b] = max(1.0, float(np.abs(vals).max()))
            for h in range(H):
                logits = keys[h // g] @ q_rot[b, h] / np.sqrt(D)
                top = logits.max()
                if case.sinks:
                    top = max(top, float(sinks[h]))
                p_ = np.exp(logits - top)
                denominator = p_.sum() + (np.exp(float(sinks[h]) - top)
                                          if case.sinks else 0.0)
                want[b, h] = p_ @ vals[h // g] / denominator
        got = out.cpu().numpy().astype(np.float64)
        rows.append(dict(step=step, finite=bool(np.isfinite(got).all()),
                         ratio=ratio(got, want, vmax), v_exact=bool(v_exact),
                         k_codes=k_codes))
        lengths = lengths + 1
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precompile", action="store_true",
                        help="only import and compile every case (fills "
                             "$PATTN_ARTIFACT_DIR); no GPU or ORT needed")
    parser.add_argument("--out", help="write the Markdown table here")
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--backend", default="auto",
                        help="pattn.compile's backend: auto (XQA where "
                             "eligible) or portable")
    parser.add_argument("--cases", default="main",
                        help="main, diag, all, or a substring of a case's "
                             "name")
    args = parser.parse_args()
    global BACKEND
    BACKEND = args.backend
    pool = dict(main=CASES, diag=DIAG, all=CASES + DIAG).get(args.cases)
    cases = pool if pool is not None else [
        c for c in CASES + DIAG if args.cases in c.name]

    paged = [c for c in PAGED if args.cases in ("main", "all") or
             args.cases in c.name]
    if args.precompile:
        for case in cases:
            _, _, artifact = compile_case(case)
            print(f"{case.name}: {artifact}")
            if case.pattn_prompt:
                print(f"{case.name} (prompt): "
                      f"{compile_case(case, case.pattn_prompt)[2]}")
        for case in paged:
            print(f"{case.name}: {compile_paged(case)[1]}")
        return 0
    try:
        import torch
        import onnxruntime as ort
        import onnx
    except ImportError as error:
        print(f"skipped: {error}")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 0
    import pattn

    lines = [
        "| shape | B | max_seq | past lengths | steps | max abs err | "
        "worst err/tol vs ORT | pattn vs f64 | ORT vs f64 | finite | "
        "cache vs ORT (V / K) | new slot (K ulps, V) | rest untouched |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    failed = False
    for case in cases:
        i = (CASES + DIAG).index(case)
        try:
            rows = run_case(case, args.seed + i)
        except Exception as error:  # report and go on
            failed = True
            lines.append(f"| {case.name} | {case.batch} | {case.max_seq} | "
                         f"{list(case.past)} | {case.steps} | error: "
                         f"{type(error).__name__}: {str(error).splitlines()[0]} "
                         f"| | | | | | | |")
            print(f"{case.name}: {type(error).__name__}: {error}")
            traceback.print_exc()
            continue
        for r in rows:
            print(f"{case.name} step {r['step']}: {r}")
        with_ort = all(r["ort_error"] is None for r in rows)
        p64 = max(r["pattn_vs_f64"] for r in rows)
        new_k = max(r["new_k_ulps"] for r in rows)
        ok = (p64 <= 1 and new_k <= 1 and all(
            r["finite"] and r["untouched"] and r["new_v_ok"] for r in rows))
        if with_ort:
            worst = max(r["ratio"] for r in rows)
            k_ulps = max(r["k_ulps"] for r in rows)
            v_exact = all(r["v_exact"] for r in rows)
            ok &= worst <= 1 and v_exact and k_ulps <= (1 if case.rotary
                                                        else 0)
            ort_cells = (f"{max(r['max_abs'] for r in rows):.3g} | "
                         f"{worst:.3f} | {p64:.3f} | "
                         f"{max(r['ort_vs_f64'] for r in rows):.3f}")
            cache = (f"{'bit-exact' if v_exact else '**differs**'} / "
                     + ("bit-exact" if k_ulps == 0 else
                        f"≤ {k_ulps} ulp"))
        else:
            # Only QK-norm is expected to be refused by the CPU provider.
            ok &= case.qk_norm
            ort_cells = (f"— | ORT CPU rejects the node: "
                         f"{rows[0]['ort_error'][:120]} | {p64:.3f} | —")
            cache = "—"
        failed |= not ok
        yes = lambda key: "yes" if all(r[key] for r in rows) else "**no**"
        lines.append(
            f"| {case.name} | {case.batch} | {case.max_seq} | "
            f"{list(case.past)} | {case.steps} | {ort_cells} | "
            f"{yes('finite')} | {cache} | "
            f"{new_k} ulp, {'exact' if all(r['new_v_ok'] for r in rows) else '**no**'}"
            f" | {yes('untouched')} |")
    lines += [
        "", "PagedAttention nodes with quantized caches (ONNX Runtime's "
        "PagedAttention is CUDA-only): pattn against float64 over the cache "
        "it holds; the new V slots bit-exact to the reference quantizer; the "
        "rotated K slots against the reference quantizer of the f16 float64 "
        "rotation (largest code difference).", "",
        "| node | cache | B | past lengths | steps | pattn vs f64 | finite | "
        "V slots bit-exact | K slot codes (max diff) |",
        "|---|---|---|---|---|---|---|---|---|"]
    for case in paged:
        i = PAGED.index(case)
        try:
            rows = run_paged_case(case, args.seed + 100 + i)
        except Exception as error:  # report and go on
            failed = True
            lines.append(f"| {case.name} | {case.cache} {case.quant} | "
                         f"{len(case.past)} | {list(case.past)} | "
                         f"{case.steps} | error: {type(error).__name__}: "
                         f"{str(error).splitlines()[0]} | | | |")
            traceback.print_exc()
            continue
        for r in rows:
            print(f"{case.name} step {r['step']}: {r}")
        worst = max(r["ratio"] for r in rows)
        codes = max(r["k_codes"] for r in rows)
        ok = worst <= 1 and codes <= 1 and all(
            r["finite"] and r["v_exact"] for r in rows)
        failed |= not ok
        lines.append(
            f"| {case.name} | {case.cache} {case.quant} | {len(case.past)} | "
            f"{list(case.past)} | {case.steps} | {worst:.3f} | "
            f"{'yes' if all(r['finite'] for r in rows) else '**no**'} | "
            f"{'yes' if all(r['v_exact'] for r in rows) else '**no**'} | "
            f"{codes} |")
    header = [
        f"onnxruntime {ort.__version__} (CPUExecutionProvider), onnx "
        f"{onnx.__version__}, pattn {pattn.__version__}, torch "
        f"{torch.__version__}, GPU {torch.cuda.get_device_name()}, "
        f"backend {BACKEND}",
        "", f"Result: {'FAIL' if failed else 'PASS'}", ""]
    text = "\n".join(header + lines) + "\n"
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
