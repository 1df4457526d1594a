"""Prompts computed by pattn against ONNX Runtime (issue 30, item 5).

bench/onnx_vs_ort.py's cases with ``pattn_prompt = P`` start with a prompt
of P tokens per sequence run through the same GroupQueryAttention node with
S = P: ONNX Runtime (CPUExecutionProvider) computes it from the past buffer
it is given, and pattn computes it too, from the same bytes, through the
node imported with S = P (pattn.onnx: a prompt of P query tokens per
sequence, causal, written into the BNSH past buffer in place). It checks

- the prompt's output against ORT's within SPEC §8's f16 tolerance, and
  both against a float64 causal reference over the cache pattn holds (on
  up to 65 sampled query rows, the last included);
- pattn's cache against ORT's present_key/present_value over the prompt's
  positions (V and unrotated K bit for bit, rotated K within one f16 ulp),
  the prompt's K against the float64 rotation rounded to f16, its V
  against the inputs, and the rest of the buffer untouched.

Then the decode steps of onnx_vs_ort.run_case follow, pattn from its own
cache and ORT from its own present.
"""

from __future__ import annotations

import numpy as np

import onnx_vs_ort as ovo


def sampled_rows(count: int) -> list:
    """Up to 65 query rows of a prompt of ``count`` tokens: evenly spread,
    the first and the last included."""
    step = max(1, count // 64)
    return sorted(set(range(0, count, step)) | {count - 1})


def run_prompt(case, randn, statics, pk, pv, rotate, q_w, k_w, sinks,
               backend):
    """Runs the prompt on ORT and on pattn's ``backend`` (module
    docstring); pk/pv (the BNSH past buffers on the device) hold pattn's
    cache after it. Returns the row of the prompt step and ORT's present
    (None, None without ORT)."""
    import onnxruntime as ort
    import pattn
    import pattn.onnx
    import torch

    B, H, KV, D, S = (case.batch, case.heads, case.kv_heads, case.head_dim,
                      case.max_seq)
    P = case.pattn_prompt
    model = ovo.build_model(case, seq=P)
    module, manifest = pattn.onnx.import_model(model)
    function = manifest["functions"][0]
    lib = pattn.load(pattn.compile(module, chips=["sm_90a"],
                                   backend=backend))
    call = getattr(lib, function["function"])
    q, k, v = randn(B, P, H * D), randn(B, P, KV * D), randn(B, P, KV * D)
    packed = np.concatenate([q, k, v], axis=-1)

    o_out = o_pk = o_pv = None
    ort_error = None
    feeds = ovo.ort_feeds(case, pk.cpu().numpy(), pv.cpu().numpy(),
                          np.full(B, P - 1, np.int32), P, q, k, v, statics)
    try:
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        o_out, o_pk, o_pv = session.run(None, feeds)
    except Exception as error:  # Qwen3's QK-norm: the CPU EP rejects it
        ort_error = f"{type(error).__name__}: {str(error).splitlines()[0]}"

    dev = "cuda"
    initial_k, initial_v = pk.clone(), pv.clone()
    out = torch.full((B * P, H, D), float("nan"), dtype=torch.float16,
                     device=dev)
    b = torch.arange(B, dtype=torch.int32, device=dev)
    i = torch.arange(P, dtype=torch.int32, device=dev)
    tensors = dict(statics)
    tensors.update(
        past_key=pk.view(torch.int8), past_value=pv.view(torch.int8),
        block_table=b.view(B, 1), output=out,
        slots=(b[:, None] * S + i[None, :]).reshape(-1),
        total_seqlens=torch.full((B,), P, dtype=torch.int32, device=dev),
        query_start=torch.arange(B + 1, dtype=torch.int32, device=dev) * P)
    if case.packed:
        tensors["query"] = torch.from_numpy(packed).to(dev).view(
            B * P, H + 2 * KV, D)
    else:
        tensors.update(
            query=torch.from_numpy(q).to(dev).view(B * P, H, D),
            key=torch.from_numpy(k).to(dev).view(B * P, KV, D),
            value=torch.from_numpy(v).to(dev).view(B * P, KV, D))
    call(**{name: tensors[name] for name in function["args"]})
    torch.cuda.synchronize()
    lib.check_device_errors()
    p_out = out.cpu().numpy().reshape(B, P, H, D)
    p_k, p_v = pk.cpu().numpy(), pv.cpu().numpy()

    # The prompt's K as it must be cached (rotated at its positions, rounded
    # once to f16), its V as given, nothing past it touched.
    k_rows = k.reshape(B, P, KV, D)
    new_k_ulps, new_v_ok = 0, True
    for t in range(P):
        k_t = rotate(k_rows[:, t], np.full(B, t, np.int64), k_w)
        new_k_ulps = max(new_k_ulps, ovo.ulps(p_k[:, :, t],
                                              k_t.astype(np.float16)))
    new_v_ok = bool(np.array_equal(
        p_v[:, :, :P], v.reshape(B, P, KV, D).transpose(0, 2, 1, 3)))
    untouched = bool(torch.equal(pk[:, :, P:], initial_k[:, :, P:]) and
                     torch.equal(pv[:, :, P:], initial_v[:, :, P:]))

    vmax = np.array([max(1.0, float(np.abs(p_v[s, :, :P].astype(
        np.float64)).max())) for s in range(B)])
    rows = sampled_rows(P)
    q_rows = q.reshape(B, P, H, D)
    sink64 = None if sinks is None else sinks.astype(np.float64)
    total = np.full(B, 0)

    def causal(kc, vc):
        """float64 outputs of the sampled rows [B, rows, H, D]."""
        outs = []
        for t in rows:
            total[:] = t + 1
            q_rot = rotate(q_rows[:, t], np.full(B, t, np.int64), q_w)
            outs.append(ovo.reference64(q_rot, kc, vc, total, H, KV, case,
                                        sink64))
        return np.stack(outs, 1)

    def flat(x):  # [B, rows, H, D] -> [B, rows * H, D] for ovo.ratio
        return x.reshape(B, -1, D)

    p64 = p_out[:, rows].astype(np.float64)
    row = dict(step="prompt", finite=bool(np.isfinite(p_out).all()),
               pattn_vs_f64=ovo.ratio(flat(p64), flat(causal(p_k, p_v)),
                                      vmax),
               new_k_ulps=new_k_ulps, new_v_ok=new_v_ok, untouched=untouched,
               k_ulps=None, v_exact=None, ort_error=ort_error)
    if o_out is not None:
        o_all = o_out.reshape(B, P, H, D).astype(np.float64)
        row.update(
            max_abs=float(np.abs(p_out.astype(np.float64) - o_all).max()),
            ratio=ovo.ratio(flat(p_out.astype(np.float64)), flat(o_all),
                            vmax),
            ort_vs_f64=ovo.ratio(flat(o_all[:, rows]),
                                 flat(causal(o_pk, o_pv)), vmax),
            k_ulps=ovo.ulps(p_k[:, :, :P], o_pk[:, :, :P]),
            v_exact=bool(np.array_equal(p_v[:, :, :P].view(np.uint16),
                                        o_pv[:, :, :P].view(np.uint16))))
    return row, o_pk, o_pv
