"""pattn against ONNX Runtime: GroupQueryAttention decode with f16 caches.

    # where pattn-compile runs: fill an artifact cache
    PATTN_ARTIFACT_DIR=$PWD/.ort-artifacts \
      PATTN_COMPILE=$PWD/.ort-artifacts/compiler/bin/pattn-compile \
      PYTHONPATH=python python3 bench/onnx_vs_ort.py --precompile
    # on the GPU machine (onnxruntime + onnx importable, the same two vars)
    PYTHONPATH=python:$SITE python3 bench/onnx_vs_ort.py --out results.md

Issue 11, item 4 (first slice). Each case is one com.microsoft
GroupQueryAttention node built with onnx.helper in a real export's shape
(a BNSH past/present buffer shared in place, do_rotary=0, one new token per
sequence), seeded with random past KV (no prefill), then run for several
decode steps by ONNX Runtime (CPUExecutionProvider) and by pattn (the graph
imported with pattn.onnx, compiled for sm_90a, called on torch CUDA tensors
with the manifest's views and computed arguments; the cache written in
place, present == past). Per step it checks:

- the output against ORT's within SPEC §8's f16 tolerance (atol 8e-4 scaled
  by max(1, max |V|) over the sequence's cached values, rtol 5e-3), and
  both against a float64 reference of the same cache (for information);
- pattn's cache against ORT's present_key/present_value, bit for bit, over
  every sequence's valid positions (past and the slot just written), and
  that pattn left the rest of its buffer untouched.

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


CASES = [
    Case("Llama-3-8B 32/8 D128", 4, 32, 8, 128, 512, (1, 37, 200, 503), 6),
    Case("Qwen2.5-7B 28/4 D128", 3, 28, 4, 128, 256, (5, 129, 249), 6),
    Case("Phi-3 32/32 D96", 2, 32, 32, 96, 256, (64, 250), 6),
]

# Not in the default run: neighbours of Phi-3's shape, to narrow a failure
# down (--cases diag).
DIAG = [
    Case("diag 32/8 D96 S256", 2, 32, 8, 96, 256, (64, 250), 2),
    Case("diag 32/32 D128 S256", 2, 32, 32, 128, 256, (64, 250), 2),
    Case("diag 32/32 D96 S512", 2, 32, 32, 96, 512, (64, 250), 2),
    Case("diag 32/32 D96 S256 B1", 1, 32, 32, 96, 256, (64,), 2),
]


def build_model(case: Case):
    import onnx  # noqa: F401
    from onnx import TensorProto as T, helper
    B, H, KV, D, S = (case.batch, case.heads, case.kv_heads, case.head_dim,
                      case.max_seq)
    info = helper.make_tensor_value_info
    node = helper.make_node(
        "GroupQueryAttention",
        ["query", "key", "value", "past_key", "past_value", "seqlens_k",
         "total_sequence_length"],
        ["output", "present_key", "present_value"], name="attn",
        domain="com.microsoft", num_heads=H, kv_num_heads=KV, do_rotary=0)
    graph = helper.make_graph([node], "gqa_decode", [
        info("query", T.FLOAT16, [B, 1, H * D]),
        info("key", T.FLOAT16, [B, 1, KV * D]),
        info("value", T.FLOAT16, [B, 1, KV * D]),
        info("past_key", T.FLOAT16, [B, KV, S, D]),
        info("past_value", T.FLOAT16, [B, KV, S, D]),
        info("seqlens_k", T.INT32, [B]),
        info("total_sequence_length", T.INT32, [])], [
        info("output", T.FLOAT16, [B, 1, H * D]),
        info("present_key", T.FLOAT16, [B, KV, S, D]),
        info("present_value", T.FLOAT16, [B, KV, S, D])])
    return helper.make_model(graph, opset_imports=[
        helper.make_opsetid("com.microsoft", 1), helper.make_opsetid("", 17)])


BACKEND = "auto"


def compile_case(case: Case):
    import pattn
    import pattn.onnx
    model = build_model(case)
    module, manifest = pattn.onnx.import_model(model)
    artifact = pattn.compile(module, chips=["sm_90a"], backend=BACKEND)
    return model, manifest["functions"][0], artifact


def reference64(q, kc, vc, total, H, KV):
    """float64 decode attention of one new token per sequence over the
    cache's first total[b] positions. q [B, H, D], caches [B, KV, S, D]."""
    B, _, D = q.shape
    out = np.zeros((B, H, D))
    g = H // KV
    for b in range(B):
        n = int(total[b])
        k = kc[b, :, :n].astype(np.float64)  # [KV, n, D]
        v = vc[b, :, :n].astype(np.float64)
        qq = q[b].astype(np.float64).reshape(KV, g, D)
        logits = np.einsum("kgd,knd->kgn", qq, k) / np.sqrt(D)
        logits -= logits.max(-1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(-1, keepdims=True)
        out[b] = np.einsum("kgn,knd->kgd", p, v).reshape(H, D)
    return out


def ratio(got, want, value_scale):
    """max |got - want| / (atol * value_scale + rtol * |want|), per row
    scale [B] broadcast over [B, H, D]."""
    atol = ATOL * value_scale[:, None, None]
    return float((np.abs(got - want) / (atol + RTOL * np.abs(want))).max())


def run_case(case: Case, seed: int):
    import onnxruntime as ort
    import torch
    import pattn

    model, function, artifact = compile_case(case)
    lib = pattn.load(artifact)
    call = getattr(lib, function["function"])
    assert function["args"] == ["query", "key", "value", "past_key",
                                "past_value", "block_table", "slots",
                                "total_seqlens", "output"], function["args"]
    sess = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"])

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

    rows = []
    for step in range(case.steps):
        q, k, v = randn(B, 1, H * D), randn(B, 1, KV * D), randn(B, 1, KV * D)
        seqlens_k = lengths.astype(np.int32)  # total - 1 = past tokens
        total = seqlens_k + 1
        feeds = dict(query=q, key=k, value=v, past_key=ort_k, past_value=ort_v,
                     seqlens_k=seqlens_k,
                     total_sequence_length=np.array(total.max(), np.int32))
        o_out, o_pk, o_pv = sess.run(None, feeds)

        # pattn: the manifest's computed arguments and views.
        sk = torch.from_numpy(seqlens_k).to(dev)
        b = torch.arange(B, dtype=torch.int32, device=dev)
        slots = (b * S + sk + 1 - 1).to(torch.int32)  # + i, i < 1
        total_seqlens = (sk + 1).to(torch.int32)
        out.fill_(float("nan"))
        qt, kt, vt = (torch.from_numpy(x).to(dev) for x in (q, k, v))
        call(query=qt.view(B, H, D), key=kt.view(B, KV, D),
             value=vt.view(B, KV, D), past_key=pk.view(torch.int8),
             past_value=pv.view(torch.int8), block_table=block_table,
             slots=slots, total_seqlens=total_seqlens,
             output=out.view(B, H, D))
        torch.cuda.synchronize()
        p_out = out.cpu().numpy().reshape(B, H, D)
        o_out = o_out.reshape(B, H, D)
        p_k, p_v = pk.cpu().numpy(), pv.cpu().numpy()

        # Caches: every valid position bit-exact to ORT's present; the rest
        # of pattn's buffer as it was.
        exact = True
        untouched = True
        for s in range(B):
            n = int(total[s])
            exact &= np.array_equal(p_k[s, :, :n].view(np.uint16),
                                    o_pk[s, :, :n].view(np.uint16))
            exact &= np.array_equal(p_v[s, :, :n].view(np.uint16),
                                    o_pv[s, :, :n].view(np.uint16))
            untouched &= bool(torch.equal(pk[s, :, n:], initial_k[s, :, n:]))
            untouched &= bool(torch.equal(pv[s, :, n:], initial_v[s, :, n:]))
        # The slot just written holds the new token's K/V.
        new_ok = all(
            np.array_equal(p_k[s, :, int(seqlens_k[s])],
                           k[s, 0].reshape(KV, D)) and
            np.array_equal(p_v[s, :, int(seqlens_k[s])],
                           v[s, 0].reshape(KV, D)) for s in range(B))

        vmax = np.array([max(1.0, float(np.abs(
            o_pv[s, :, :int(total[s])].astype(np.float64)).max()))
            for s in range(B)])
        ref = reference64(q.reshape(B, H, D), o_pk, o_pv, total, H, KV)
        p64, o64 = p_out.astype(np.float64), o_out.astype(np.float64)
        rows.append(dict(
            step=step, finite=bool(np.isfinite(p_out).all()),
            max_abs=float(np.abs(p64 - o64).max()),
            ratio=ratio(p64, o64, vmax),
            pattn_vs_f64=ratio(p64, ref, vmax), ort_vs_f64=ratio(o64, ref, vmax),
            exact=bool(exact), untouched=bool(untouched), new_ok=bool(new_ok)))
        # ORT's chain continues from its own present; pattn's from its buffer.
        ort_k, ort_v = o_pk, o_pv
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

    if args.precompile:
        for case in cases:
            _, _, artifact = compile_case(case)
            print(f"{case.name}: {artifact}")
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
        "worst err/tol | pattn vs f64 | ORT vs f64 | finite | "
        "cache bit-exact | rest untouched |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|"]
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
                         f"| | | | | | |")
            print(f"{case.name}: {type(error).__name__}: {error}")
            traceback.print_exc()
            continue
        for r in rows:
            print(f"{case.name} step {r['step']}: {r}")
        worst = max(r["ratio"] for r in rows)
        ok = (worst <= 1 and all(r["finite"] and r["exact"] and r["untouched"]
                                 and r["new_ok"] for r in rows))
        failed |= not ok
        yes = lambda key: "yes" if all(r[key] for r in rows) else "**no**"
        lines.append(
            f"| {case.name} | {case.batch} | {case.max_seq} | "
            f"{list(case.past)} | {case.steps} | "
            f"{max(r['max_abs'] for r in rows):.3g} | {worst:.3f} | "
            f"{max(r['pattn_vs_f64'] for r in rows):.3f} | "
            f"{max(r['ort_vs_f64'] for r in rows):.3f} | {yes('finite')} | "
            f"{'yes' if all(r['exact'] and r['new_ok'] for r in rows) else '**no**'}"
            f" | {yes('untouched')} |")
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
