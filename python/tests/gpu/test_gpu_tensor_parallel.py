"""Tensor-parallel generate() on two GPUs (issue 33): a Llama-3-shaped
model from a config (random weights, fixed seed, saved to a temporary
folder) under transformers' tp_plan="auto" with NCCL, one rank per GPU,
each with a PattnCache of its share of the KV heads; its tokens equal the
same model's on one GPU, for f16 and i4 caches. With --time, the decode
step at batch 32 x 8K tokens on 1 and 2 GPUs goes to
$PATTN_TP_RESULTS (JSON). Needs two GPUs; skips otherwise."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from gpu_required import torch  # skips the module without a CUDA device

transformers = pytest.importorskip("transformers")

RUN = pathlib.Path(__file__).resolve().parents[1] / "tensor_parallel_run.py"


def _run(args, out):
    env = {k: v for k, v in os.environ.items()
           if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast off (device README)
    result = subprocess.run(args, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env,
                            timeout=900, check=False)
    assert result.returncode == 0, result.stdout[-4000:]
    return json.loads(pathlib.Path(out).read_text())


def tp_config():
    """Llama-3.2-1B's attention shape, 4 layers (shared with
    precompile_transformers.py, which compiles it for 1 and 2 ranks)."""
    return transformers.LlamaConfig(
        vocab_size=4096, hidden_size=2048, intermediate_size=8192,
        num_hidden_layers=4, num_attention_heads=32, num_key_value_heads=8,
        head_dim=64, rope_theta=500000.0, max_position_embeddings=16384)


@pytest.mark.skipif(torch.cuda.device_count() < 2,
                    reason="tensor parallelism needs two GPUs")
def test_two_gpus_generate_what_one_does(tmp_path):
    torch.manual_seed(0)
    config = tp_config()
    transformers.AutoModelForCausalLM.from_config(
        config, dtype=torch.float16).save_pretrained(tmp_path / "model")
    timing = ["--time", "32", "8192"] if os.environ.get(
        "PATTN_TP_RESULTS") else []
    one = _run([sys.executable, str(RUN), str(tmp_path / "model"),
                str(tmp_path / "one.json"), "--device", "cuda", *timing],
               tmp_path / "one.json")
    two = _run([sys.executable, "-m", "torch.distributed.run",
                "--nproc_per_node", "2", str(RUN), str(tmp_path / "model"),
                str(tmp_path / "two.json"), "--device", "cuda", *timing],
               tmp_path / "two.json")
    if timing:
        pathlib.Path(os.environ["PATTN_TP_RESULTS"]).write_text(json.dumps(
            {"one_gpu_ms": one["decode_ms"], "two_gpus_ms": two["decode_ms"]}))
    assert one["f16"] == one["sdpa"]
    for path in ("f16", "i4"):
        assert two[path] == one[path], path
