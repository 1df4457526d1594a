"""Decode speed of a 1B Llama-3-shaped model in transformers on pattn caches.

Batch 32 x 8K-token context (random weights from the config, fixed seed):
the prompt is prefilled once per path, then decode steps are timed (CUDA
events, median of --steps after two warm-up steps) for transformers' own
paths (``sdpa`` on a DynamicCache and on a StaticCache) and pattn's
(``attn_implementation="pattn"`` on a PattnCache of each format, eager and
with the step captured in a CUDA graph). Also the cache bytes per token of
each format, and with --batching, ``generate_batch()`` throughput for 256
requests of mixed prompt lengths, ``paged|sdpa`` against ``paged|pattn``.

    python3 bench/bench_transformers.py --write-results out.md

Kernels come from the artifact cache ($PATTN_ARTIFACT_DIR;
python/tests/gpu/precompile_transformers.py fills it).
"""

from __future__ import annotations

import argparse
import statistics
import sys


def model_config():
    """Llama-3.2-1B's shape: 16 layers, 32/8 heads of 64, hidden 2048."""
    import transformers
    return transformers.LlamaConfig(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192,
        num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
        head_dim=64, rope_theta=500000.0, max_position_embeddings=16384,
        tie_word_embeddings=True)


def _time_steps(step, steps: int) -> float:
    """Median milliseconds of ``step()`` over ``steps`` calls."""
    import torch
    times = []
    for index in range(steps + 2):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        step(index)
        end.record()
        end.synchronize()
        if index >= 2:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def _decode_path(model, name, cache, ids, steps, graph=False):
    """Prefills ``ids`` into ``cache``, then times decode steps."""
    import torch
    batch, context = ids.shape
    model.set_attn_implementation("sdpa" if name.startswith("sdpa")
                                  else "pattn")
    with torch.no_grad():
        model(ids, past_key_values=cache, logits_to_keep=1)
        token = torch.ones(batch, 1, dtype=torch.long, device="cuda")
        position = torch.full((batch, 1), context, device="cuda")
        if not graph:
            def step(index):
                model(token, position_ids=position + index,
                      past_key_values=cache)
            return _time_steps(step, steps)
        model(token, position_ids=position, past_key_values=cache)
        static_position = position.clone()
        cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cuda_graph):
            model(token, position_ids=static_position, past_key_values=cache)

        def replay(index):
            static_position.add_(1)
            cuda_graph.replay()
        return _time_steps(replay, steps)


def run(args) -> list:
    import torch
    import transformers
    from pattn.integrations import transformers as ptx
    from pattn.serving import FORMATS
    ptx.register()
    torch.manual_seed(0)
    config = model_config()
    model = transformers.AutoModelForCausalLM.from_config(
        config, dtype=torch.float16).cuda().eval()
    ids = torch.randint(1, config.vocab_size, (args.batch, args.context),
                        device="cuda")
    length = args.context + args.steps + 8
    rows = []
    paths = [("sdpa, DynamicCache", lambda: transformers.DynamicCache(
        config=config), False),
        ("sdpa, StaticCache", lambda: transformers.StaticCache(
            config=config, max_cache_len=length), False)]
    for fmt in args.formats:
        make = (lambda fmt=fmt: ptx.PattnCache(config, args.batch, length,
                                               cache_format=fmt))
        paths.append((f"pattn {fmt}", make, False))
        paths.append((f"pattn {fmt}, CUDA graph", make, True))
    for name, make, graph in paths:
        cache = make()
        try:
            ms = _decode_path(model, name, cache, ids, args.steps, graph)
        except Exception as error:  # noqa: BLE001 - a path that fails says so
            rows.append((name, None, f"{type(error).__name__}: {error}"[:160]))
        else:
            rows.append((name, ms, ""))
        del cache
        torch.cuda.empty_cache()
    per_token = {fmt: FORMATS[fmt].bytes_per_token(8, 64) * 16
                 for fmt in ("f16",) + tuple(args.formats)}
    return rows, per_token


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--formats", nargs="+",
                        default=["f16", "i8", "f8e4m3", "i4", "nvfp4"])
    parser.add_argument("--write-results", metavar="FILE")
    args = parser.parse_args()
    rows, per_token = run(args)
    fastest_sdpa = min(ms for name, ms, _ in rows
                       if name.startswith("sdpa") and ms is not None)
    lines = [f"# transformers decode, 1B Llama-3 shape, batch {args.batch} x "
             f"{args.context} context", "",
             "| path | ms / step | steps / s | vs fastest sdpa | note |",
             "|---|---:|---:|---:|---|"]
    for name, ms, note in rows:
        if ms is None:
            lines.append(f"| {name} | - | - | - | {note} |")
        else:
            lines.append(f"| {name} | {ms:.3f} | {1000 / ms:.1f} | "
                         f"{fastest_sdpa / ms:.2f}x | {note} |")
    lines += ["", "| format | cache bytes / token (16 layers) | tokens vs "
              "f16 in the same bytes |", "|---|---:|---:|"]
    for fmt, size in per_token.items():
        lines.append(f"| {fmt} | {size} | {per_token['f16'] / size:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_results:
        with open(args.write_results, "w") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
