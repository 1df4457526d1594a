"""One rank of a tensor-parallel generate() on pattn caches (run under
torchrun; alone, it is the 1-process run to compare with).

    python3 -m torch.distributed.run --nproc_per_node 2 \\
        python/tests/tensor_parallel_run.py MODEL_DIR OUT.json [--device cuda]

Loads the saved model (random weights from a config, saved by the caller)
with ``tp_plan="auto"`` when WORLD_SIZE > 1 (gloo on the CPU, NCCL on
GPUs), then greedy-generates from fixed left-padded prompts with the sdpa
attention and with a PattnCache of each format. Each rank checks that its
cache holds its share of the KV heads (and that layer_specs says the
same); rank 0 writes the tokens, per path, to OUT.json. On the CPU pattn
runs its float64 reference kernels, on a GPU the compiled ones (from the
artifact cache). ``--time B L`` adds the median decode-step time of a
batch of B sequences of L tokens (CUDA events) per format.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import transformers  # noqa: E402

from pattn.integrations import transformers as ptx  # noqa: E402

FORMATS = ("f16", "i4")
NEW_TOKENS = 12


def load(model_dir: str, device: str):
    world = int(os.environ.get("WORLD_SIZE", "1"))
    kwargs = {}
    if world > 1:
        from transformers.distributed import DistributedConfig
        kwargs["distributed_config"] = DistributedConfig(tp_plan="auto")
    elif device == "cuda":
        kwargs["device_map"] = "cuda"
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float16, **kwargs)
    return model.eval(), world


def prompts(device):
    generator = torch.Generator().manual_seed(1)
    lengths = (40, 17, 29)
    ids = torch.randint(1, 256, (len(lengths), max(lengths)),
                        generator=generator)
    mask = torch.zeros_like(ids)
    for b, n in enumerate(lengths):
        mask[b, max(lengths) - n:] = 1
    return ids.to(device), mask.to(device)


def generate(model, attention, cache=None):
    ids, mask = prompts(model.device)
    model.set_attn_implementation(attention)
    out = model.generate(ids, attention_mask=mask, past_key_values=cache,
                         max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                         do_sample=False, pad_token_id=0)
    return out[:, ids.shape[1]:].tolist()


def decode_step_ms(model, fmt: str, batch: int, length: int) -> float:
    """Median decode step (ms) over a PattnCache holding ``length`` tokens
    per sequence."""
    cache = ptx.PattnCache(model.config, batch, length + 16, cache_format=fmt)
    model.set_attn_implementation("pattn")
    ids = torch.randint(1, model.config.vocab_size, (batch, length),
                        device=model.device)
    token = ids[:, -1:]
    times = []
    with torch.no_grad():
        model(ids, past_key_values=cache, logits_to_keep=1)
        for step in range(10):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            model(token, past_key_values=cache, logits_to_keep=1)
            end.record()
            end.synchronize()
            if step >= 2:
                times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("out")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--time", nargs=2, type=int, metavar=("B", "L"))
    args = parser.parse_args()
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    ptx.register()
    model, world = load(args.model_dir, args.device)
    config = model.config
    result = {"world": world, "sdpa": generate(model, "sdpa")}
    for fmt in FORMATS:
        cache = ptx.PattnCache(config, 3, 64, cache_format=fmt)
        result[fmt] = generate(model, "pattn", cache)
        held = {layer.buffers.spec.kv_heads
                for layer in cache._state._layers if layer is not None}
        assert held == {config.num_key_value_heads // world}, held
        specs = ptx.layer_specs(model, fmt, tp_size=world)
        assert {s.kv_heads for s in specs} == held, specs
    if args.time:
        result["decode_ms"] = {fmt: decode_step_ms(model, fmt, *args.time)
                               for fmt in FORMATS}
    if int(os.environ.get("RANK", "0")) == 0:
        pathlib.Path(args.out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
