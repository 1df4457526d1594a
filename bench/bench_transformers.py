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
import time

#: generate_batch(): the engine's default 256-token blocks, these formats.
BATCHING_BLOCK = 256
BATCHING_FORMATS = ("f16", "i4")


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


def _batching_run(model, requests, implementation, new_tokens, fmt=None):
    """One generate_batch() over ``requests`` (the engine's defaults: its
    scheduler, 256-token blocks, no CUDA graphs for mask-taking paths);
    returns (seconds, generated tokens, the outputs)."""
    import torch
    import transformers
    from transformers.generation import ContinuousBatchingConfig
    from pattn.integrations import transformers_batching
    if fmt is not None:
        transformers_batching.use(fmt)
    model.set_attn_implementation(implementation)
    model.generation_config = transformers.GenerationConfig(
        do_sample=False, max_new_tokens=new_tokens, eos_token_id=-1,
        pad_token_id=0)
    config = ContinuousBatchingConfig(block_size=BATCHING_BLOCK,
                                      use_cuda_graph=False)
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate_batch(requests, continuous_batching_config=config,
                               max_new_tokens=new_tokens)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    tokens = {key: list(value.generated_tokens) for key, value in out.items()}
    return seconds, sum(len(t) for t in tokens.values()), tokens


def run_batching(args) -> list:
    """generate_batch() throughput: ``args.requests`` prompts of 64-2048
    tokens (seeded), ``args.new_tokens`` greedy tokens each, paged|sdpa
    against paged|pattn in each of BATCHING_FORMATS; a short warm-up run
    per path first. Rows: (path, seconds, tokens/s, tokens equal to
    paged|sdpa's, note)."""
    import torch
    import transformers
    from pattn.integrations import transformers as ptx
    ptx.register()
    torch.manual_seed(0)
    config = model_config()
    model = transformers.AutoModelForCausalLM.from_config(
        config, dtype=torch.float16).cuda().eval()
    generator = torch.Generator().manual_seed(11)
    lengths = torch.randint(64, 2049, (args.requests,), generator=generator)
    requests = [torch.randint(1, config.vocab_size, (int(n),),
                              generator=generator).tolist() for n in lengths]
    paths = [("paged|sdpa", None)] + [("paged|pattn", fmt)
                                      for fmt in BATCHING_FORMATS]
    rows, reference = [], None
    for implementation, fmt in paths:
        name = implementation + (f" {fmt}" if fmt else "")
        print(f"generate_batch(): {name} ...", file=sys.stderr, flush=True)
        try:
            _batching_run(model, requests[:8], implementation, 4, fmt)
            seconds, count, tokens = _batching_run(
                model, requests, implementation, args.new_tokens, fmt)
        except Exception as error:  # noqa: BLE001 - a path that fails says so
            rows.append((name, None, None, None,
                         f"{type(error).__name__}: {error}"[:160]))
            print(f"  failed: {rows[-1][-1]}", file=sys.stderr, flush=True)
            continue
        print(f"  {count} tokens in {seconds:.1f} s", file=sys.stderr,
              flush=True)
        if reference is None:
            reference = tokens
        same = sum(a == b for key in tokens
                   for a, b in zip(tokens[key], reference.get(key, [])))
        rows.append((name, seconds, count / seconds,
                     same / max(1, count), ""))
        torch.cuda.empty_cache()
    return rows


def decode_lines(args) -> list:
    """The decode-step table and the cache bytes per token (markdown
    lines)."""
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
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--formats", nargs="+",
                        default=["f16", "i8", "f8e4m3", "i4", "nvfp4"])
    parser.add_argument("--write-results", metavar="FILE")
    parser.add_argument("--batching", action="store_true",
                        help="also time generate_batch()")
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--no-decode", action="store_true",
                        help="skip the decode-step table (with --batching: "
                        "generate_batch() alone)")
    args = parser.parse_args()
    lines = decode_lines(args) if not args.no_decode else []
    if args.batching:
        lines += ["", f"generate_batch(): {args.requests} requests of "
                  f"64-2048 prompt tokens, {args.new_tokens} greedy tokens "
                  f"each, {BATCHING_BLOCK}-token blocks, no CUDA graphs", "",
                  "| path | seconds | generated tokens / s | tokens equal "
                  "to paged\\|sdpa | note |", "|---|---:|---:|---:|---|"]
        for name, seconds, rate, same, note in run_batching(args):
            name = name.replace("|", "\\|")
            if seconds is None:
                lines.append(f"| {name} | - | - | - | {note} |")
            else:
                lines.append(f"| {name} | {seconds:.1f} | {rate:.0f} | "
                             f"{same:.1%} | {note} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_results:
        with open(args.write_results, "w") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
