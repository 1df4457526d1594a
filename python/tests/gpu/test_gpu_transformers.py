"""GPU tests of pattn.integrations.transformers: models built from configs.

Llama-3-, Qwen3- and Gemma-2-shaped models (their head shapes, a few layers,
random weights, fixed seeds) generate 64 greedy tokens from three left-padded
prompts of 100, 700 and 2000 tokens:

* with an f16 pattn cache, token for token what transformers' ``sdpa``
  path generates (a flipped token must be a tie: its sdpa top-2 gap within
  the logit tolerance, and the gap is reported), logits within tolerance;
* with i8, f8e4m3, i4 and nvfp4 caches, teacher-forced on the f16
  sequence: top-1 agreement and the KL divergence of the next-token
  distributions against f16 (reported to ``$PATTN_TRANSFORMERS_RESULTS``
  as JSON lines when set), within loose bounds;
* a decode step captured in a CUDA graph replays bit-identical to eager.

Kernels come from the artifact cache (``$PATTN_ARTIFACT_DIR``);
precompile_transformers.py fills it where pattn-compile runs.
"""

from __future__ import annotations

import json
import os

import pytest

from gpu_required import torch  # skips the module without a CUDA device

transformers = pytest.importorskip("transformers")

from pattn.integrations import transformers as ptx  # noqa: E402

ptx.register()

PROMPT_LENGTHS = (100, 700, 2000)
NEW_TOKENS = 64
QUANTIZED = ("i8", "f8e4m3", "i4", "nvfp4")
#: Teacher-forced bounds against the f16 cache (mean KL in nats, top-1).
#: Models with random weights have nearly flat next-token distributions,
#: whose top two are often within a quantization step: top-1 agreement is
#: reported, and bounded loosely; the KL bounds are the check.
BOUNDS = {"i8": (0.01, 0.9), "f8e4m3": (0.03, 0.8), "i4": (0.1, 0.5),
          "nvfp4": (0.1, 0.5)}


def configs() -> dict:
    """The model shapes (shared with precompile_transformers.py)."""
    common = dict(vocab_size=4096, intermediate_size=2048,
                  num_hidden_layers=2, max_position_embeddings=4096)
    return {
        "llama3": transformers.LlamaConfig(
            hidden_size=2048, num_attention_heads=32, num_key_value_heads=8,
            head_dim=128, rope_theta=500000.0, **common),
        "qwen3": transformers.Qwen3Config(
            hidden_size=1024, num_attention_heads=16, num_key_value_heads=8,
            head_dim=128, **common),
        "gemma2": transformers.Gemma2Config(
            hidden_size=1024, num_attention_heads=8, num_key_value_heads=4,
            head_dim=256, sliding_window=512, attn_logit_softcapping=50.0,
            final_logit_softcapping=30.0, query_pre_attn_scalar=256,
            **common),
    }


def model_of(kind: str):
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(
        configs()[kind], dtype=torch.float16).cuda().eval()


def prompts():
    generator = torch.Generator().manual_seed(1)
    width = max(PROMPT_LENGTHS)
    ids = torch.randint(1, 4096, (len(PROMPT_LENGTHS), width),
                        generator=generator)
    mask = torch.zeros_like(ids)
    for b, n in enumerate(PROMPT_LENGTHS):
        mask[b, width - n:] = 1
    return ids.cuda(), mask.cuda()


def generate(model, implementation, cache=None):
    ids, mask = prompts()
    model.set_attn_implementation(implementation)
    return model.generate(ids, attention_mask=mask, past_key_values=cache,
                          max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                          do_sample=False, output_logits=True,
                          return_dict_in_generate=True, pad_token_id=0)


def report(record: dict) -> None:
    path = os.environ.get("PATTN_TRANSFORMERS_RESULTS")
    print(json.dumps(record))
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(record) + "\n")


def cache_for(model, fmt: str):
    return ptx.PattnCache(model.config, max_batch_size=len(PROMPT_LENGTHS),
                          max_cache_len=max(PROMPT_LENGTHS) + NEW_TOKENS,
                          cache_format=fmt)


@pytest.mark.parametrize("kind", ["llama3", "qwen3", "gemma2"])
def test_f16_generation_matches_sdpa(kind):
    model = model_of(kind)
    expected = generate(model, "sdpa")
    got = generate(model, "pattn", cache_for(model, "f16"))
    logits_atol = 0.05
    worst, flipped = 0.0, None
    for step, (ours, theirs) in enumerate(zip(got.logits, expected.logits)):
        same_prefix = torch.equal(
            got.sequences[:, :expected.sequences.shape[1] - NEW_TOKENS + step],
            expected.sequences[:, :expected.sequences.shape[1] - NEW_TOKENS +
                               step])
        if not same_prefix:
            break
        worst = max(worst, (ours.float() - theirs.float()).abs().max().item())
        chosen = got.sequences[:, -NEW_TOKENS + step]
        wanted = expected.sequences[:, -NEW_TOKENS + step]
        for b in torch.nonzero(chosen != wanted).flatten().tolist():
            top2 = theirs[b].float().topk(2).values
            gap = (top2[0] - top2[1]).item()
            flipped = (step, b, gap)
            assert gap <= 2 * logits_atol, (
                f"step {step}, sequence {b}: pattn chose another token where "
                f"sdpa's top two are {gap} apart (not a tie)")
    report({"test": "f16-vs-sdpa", "model": kind, "max_logit_diff": worst,
            "flipped": flipped,
            "identical": torch.equal(got.sequences, expected.sequences)})
    assert worst <= logits_atol


def teacher_forced(model, fmt: str, sequences) -> torch.Tensor:
    """Next-token logits of the 64 generated positions, the cache fed the
    f16 run's tokens."""
    _, mask = prompts()
    prompt = sequences[:, :-NEW_TOKENS]
    cache = cache_for(model, fmt)
    model.set_attn_implementation("pattn")
    full_mask = torch.cat([mask, torch.ones_like(sequences[:,
                                                           -NEW_TOKENS:])], 1)
    with torch.no_grad():
        out = model(prompt, attention_mask=mask, past_key_values=cache,
                    logits_to_keep=1)
        logits = [out.logits[:, -1]]
        for step in range(NEW_TOKENS - 1):
            column = prompt.shape[1] + step
            out = model(sequences[:, column:column + 1],
                        attention_mask=full_mask[:, :column + 1],
                        past_key_values=cache)
            logits.append(out.logits[:, -1])
    return torch.stack(logits, 1).float()


@pytest.mark.parametrize("kind", ["llama3", "qwen3"])
def test_quantized_caches_against_f16(kind):
    model = model_of(kind)
    sequences = generate(model, "pattn", cache_for(model, "f16")).sequences
    reference = teacher_forced(model, "f16", sequences)
    p = torch.log_softmax(reference, -1)
    failures = []
    for fmt in QUANTIZED:  # every format reported before any assertion
        q = torch.log_softmax(teacher_forced(model, fmt, sequences), -1)
        assert torch.isfinite(q).all(), fmt
        kl = (p.exp() * (p - q)).sum(-1).mean().item()
        top1 = (p.argmax(-1) == q.argmax(-1)).float().mean().item()
        report({"test": "quantized-vs-f16", "model": kind, "format": fmt,
                "kl": kl, "top1": top1})
        bound_kl, bound_top1 = BOUNDS[fmt]
        if not (kl <= bound_kl and top1 >= bound_top1):
            failures.append((fmt, kl, top1))
    assert not failures, failures


def test_decode_step_replays_in_a_cuda_graph():
    """One decode step of the model (all layers' append + attention on an
    i4 cache) captured with torch.cuda.graph, replayed for four tokens:
    logits and cache bytes bit-identical to four eager steps."""
    model = model_of("llama3")
    ids, mask = prompts()
    caches = [cache_for(model, "i4") for _ in range(2)]
    model.set_attn_implementation("pattn")
    with torch.no_grad():
        for cache in caches:
            model(ids, attention_mask=mask, past_key_values=cache,
                  logits_to_keep=1)
        tokens = torch.randint(1, 4096, (4, len(PROMPT_LENGTHS), 1),
                               device="cuda")
        start = torch.tensor(PROMPT_LENGTHS, device="cuda")[:, None]
        eager = [model(tokens[t], position_ids=start + t,
                       past_key_values=caches[0]).logits.clone()
                 for t in range(4)]
        static_ids = tokens[0].clone()
        static_positions = start.clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_logits = model(static_ids, position_ids=static_positions,
                                  past_key_values=caches[1]).logits
        replayed = []
        for t in range(4):
            static_ids.copy_(tokens[t])
            static_positions.copy_(start + t)
            graph.replay()
            replayed.append(static_logits.clone())
    for a, b in zip(eager, replayed):
        assert torch.equal(a, b)
    for name, tensor in caches[0]._state._layers[1].buffers.tensors.items():
        assert torch.equal(tensor, caches[1]._state._layers[1].buffers.tensors[
            name]), name


def test_two_streams_generate_what_one_does():
    """Two PattnCaches generating at once, each on its own CUDA stream in
    its own thread (as two ranks' shards or two requests of a server would
    share a GPU): the tokens of each equal those of a run alone, for f16
    and i4. pattn launches on the caller's current stream and hands the
    cache to the attention per thread."""
    import threading
    model = model_of("llama3")
    alone = {fmt: generate(model, "pattn", cache_for(model, fmt)).sequences
             for fmt in ("f16", "i4")}
    results, errors = {}, []

    def run(fmt):
        try:
            with torch.cuda.stream(torch.cuda.Stream()):
                results[fmt] = generate(model, "pattn",
                                        cache_for(model, fmt)).sequences
                torch.cuda.current_stream().synchronize()
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(fmt,))
               for fmt in ("f16", "i4")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for fmt in ("f16", "i4"):
        assert torch.equal(results[fmt], alone[fmt]), fmt


#: generate_batch() on the GPU: the engine's default 256-token blocks.
BATCHING_BLOCK = 256
BATCHING_FORMATS = ("f16", "i4")


def batching_run(model, requests, implementation, fmt=None):
    """One generate_batch() of 24 greedy tokens per request, no CUDA
    graphs; returns {request id: generated tokens}."""
    from transformers.generation import ContinuousBatchingConfig
    from pattn.integrations import transformers_batching
    if fmt is not None:
        transformers_batching.use(fmt)
    model.set_attn_implementation(implementation)
    model.generation_config = transformers.GenerationConfig(
        do_sample=False, max_new_tokens=24, eos_token_id=-1, pad_token_id=0)
    config = ContinuousBatchingConfig(block_size=BATCHING_BLOCK,
                                      max_batch_tokens=1024,
                                      use_cuda_graph=False)
    try:
        out = model.generate_batch(requests, continuous_batching_config=config,
                                   max_new_tokens=24)
    finally:
        transformers_batching.use(None)
    return {key: list(value.generated_tokens) for key, value in out.items()}


@pytest.mark.parametrize("fmt", BATCHING_FORMATS)
def test_generate_batch_on_pattn_pages(fmt):
    """generate_batch() unchanged with 'paged|pattn' on the GPU: 12
    requests of 50-1500 tokens, chunked prefill (1024-token batches) over
    256-token pages, 24 greedy tokens each. f16: the tokens of paged|sdpa
    (a token flipped on a near-tie diverges the rest of its request, so at
    least 90% of the tokens and 10 of the 12 requests whole); i4: every
    request completes with in-vocabulary tokens, and the agreement with
    paged|sdpa is reported."""
    model = model_of("llama3")
    generator = torch.Generator().manual_seed(5)
    lengths = torch.randint(50, 1501, (12,), generator=generator)
    requests = [torch.randint(1, 4096, (int(n),), generator=generator)
                .tolist() for n in lengths]
    expected = batching_run(model, requests, "paged|sdpa")
    got = batching_run(model, requests, "paged|pattn", fmt)
    assert sorted(got) == sorted(expected)
    total = sum(len(v) for v in expected.values())
    same = sum(a == b for key in got for a, b in zip(got[key], expected[key]))
    whole = sum(got[key] == expected[key] for key in got)
    report({"test": "generate_batch", "format": fmt, "requests": len(got),
            "tokens": total, "same_tokens": same / total,
            "whole_requests": whole})
    assert all(len(v) == 24 and all(0 <= t < 4096 for t in v)
               for v in got.values())
    if fmt == "f16":
        assert same >= 0.9 * total and whole >= 10, (same, total, whole)
