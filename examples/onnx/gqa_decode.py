"""One Llama-3-8B decode layer's GroupQueryAttention, from ONNX to pattn.

    PYTHONPATH=python python3 examples/onnx/gqa_decode.py

Builds the node as onnxruntime-genai's model builder writes it (32 query
heads over 8 KV heads, head size 128, a BNSH past/present buffer of 4096
tokens), imports it with pattn.onnx, compiles it for sm_90a, runs one
decode step on torch tensors and checks it against torch's attention over
the same cache. Without a CUDA device it prints the MLIR and the manifest
instead. docs/ONNX.md
explains the mapping.
"""

import json

import onnx
from onnx import TensorProto as T, helper

import pattn
import pattn.onnx

B, H, KV, D, S = 4, 32, 8, 128, 4096
info = helper.make_tensor_value_info
node = helper.make_node(
    "GroupQueryAttention", ["query", "key", "value", "past_key_values.0.key",
                            "past_key_values.0.value", "seqlens_k", "total_seq_len"],
    ["attn_out", "present.0.key", "present.0.value"], name="attn",
    domain="com.microsoft", num_heads=H, kv_num_heads=KV)
graph = helper.make_graph([node], "layer0", [
    info("query", T.FLOAT16, ["batch", 1, H * D]),
    info("key", T.FLOAT16, ["batch", 1, KV * D]), info("value", T.FLOAT16, ["batch", 1, KV * D]),
    info("past_key_values.0.key", T.FLOAT16, ["batch", KV, S, D]),
    info("past_key_values.0.value", T.FLOAT16, ["batch", KV, S, D]),
    info("seqlens_k", T.INT32, ["batch"]), info("total_seq_len", T.INT32, [])],
    [info("attn_out", T.FLOAT16, ["batch", 1, H * D]),
     info("present.0.key", T.FLOAT16, ["batch", KV, S, D]),
     info("present.0.value", T.FLOAT16, ["batch", KV, S, D])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("com.microsoft", 1)])

module, manifest = pattn.onnx.import_model(model)   # or: python -m pattn.onnx model.onnx -o model.mlir

try:
    import torch
    gpu = torch.cuda.is_available()
except ImportError:
    gpu = False
if not gpu:
    print(module)
    print(json.dumps(manifest["functions"][0]["names"], indent=2))
    raise SystemExit(0)

lib = pattn.load(pattn.compile(module, chips=["sm_90a"]))
f16 = dict(dtype=torch.float16, device="cuda")
past_k, past_v = torch.randn(B, KV, S, D, **f16), torch.randn(B, KV, S, D, **f16)
seqlens_k = torch.tensor([10, 200, 3000, 4095], dtype=torch.int32, device="cuda")  # total - 1
query, key, value = (torch.randn(B, 1, n * D, **f16) for n in (H, KV, KV))
out = torch.empty(B, 1, H * D, **f16)
# The ONNX tensors, by name, become the function's arguments: views of the
# same buffers, plus block_table, slots and total_seqlens computed from
# seqlens_k (docs/ONNX.md, "Calling an imported function").
args = pattn.onnx.call_arguments(manifest["functions"][0], {
    "query": query, "key": key, "value": value, "past_key_values.0.key": past_k,
    "past_key_values.0.value": past_v, "seqlens_k": seqlens_k, "attn_out": out})
lib.attn(**args)
# The same step in torch, over the cache the call just wrote the new token into.
q = query.view(B, H, 1, D).float()
k, v = (c.repeat_interleave(H // KV, 1).float() for c in (past_k, past_v))
visible = torch.arange(S, device="cuda") <= seqlens_k.view(B, 1, 1, 1)
want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=visible)
err = (out.view(B, H, 1, D).float() - want).abs().max().item()
print(f"attn_out {tuple(out.shape)}: max |pattn - torch| = {err:.2e}")
assert err < 8e-4 + 5e-3 * want.abs().max().item(), "outside SPEC §8"
