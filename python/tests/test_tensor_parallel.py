"""Tensor parallelism on the CPU (issue 33's sharding logic): two gloo
ranks run transformers' tp_plan="auto" on a small Llama-shaped model (random
weights from a config, saved to a temporary folder), each with a PattnCache
of its share of the KV heads, and generate exactly the tokens of one
process, for f16 and i4 caches (tensor_parallel_run.py; pattn's float64
reference kernels stand in for the GPU's)."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate", reason="transformers' tp_plan needs "
                    "accelerate")

HERE = pathlib.Path(__file__).resolve().parent
RUN = HERE / "tensor_parallel_run.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(args, out):
    env = {k: v for k, v in os.environ.items()
           if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    result = subprocess.run(args, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env,
                            timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-4000:]
    return json.loads(out.read_text())


def test_two_ranks_generate_what_one_process_does(tmp_path):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=256, hidden_size=128, intermediate_size=256,
        num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
        head_dim=16, max_position_embeddings=256)
    model = transformers.AutoModelForCausalLM.from_config(
        config, dtype=torch.float16)
    model.save_pretrained(tmp_path / "model")
    one = _run([sys.executable, str(RUN), str(tmp_path / "model"),
                str(tmp_path / "one.json")], tmp_path / "one.json")
    two = _run([sys.executable, "-m", "torch.distributed.run",
                "--nproc_per_node", "2", "--master_port", str(_free_port()),
                str(RUN), str(tmp_path / "model"), str(tmp_path / "two.json")],
               tmp_path / "two.json")
    assert one["world"] == 1 and two["world"] == 2
    assert one["f16"] == one["sdpa"]
    for path in ("sdpa", "f16", "i4"):
        assert two[path] == one[path], path


def test_layer_specs_divide_the_heads_among_ranks():
    from pattn.integrations import transformers as ptx
    import pattn
    config = transformers.LlamaConfig(
        vocab_size=256, hidden_size=256, intermediate_size=256,
        num_hidden_layers=1, num_attention_heads=16, num_key_value_heads=4,
        head_dim=16)
    (spec,) = ptx.layer_specs(config, "i4", tp_size=2)
    assert (spec.num_heads, spec.kv_heads) == (8, 2)
    (whole,) = ptx.layer_specs(config, "i4")
    assert (whole.num_heads, whole.kv_heads) == (16, 4)
    with pytest.raises(pattn.ArgumentError, match="3 tensor-parallel ranks "
                       "do not divide 16 query heads and 4 KV heads"):
        ptx.layer_specs(config, "i4", tp_size=3)
