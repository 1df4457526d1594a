"""pattn in transformers' generate(), on the CPU.

Small Llama-, Qwen3- and Gemma-2-shaped models built from configs (random
weights, fixed seeds) generate through :class:`PattnCache` and the
``"pattn"`` attention, with the reference kernels (pattn's float64
reference, bit-exact writes) standing in for the GPU: the cache logic,
ragged left-padded batches, calibration, chunked prompts, beam search and
the errors are all exercised here; python/tests/gpu/test_gpu_transformers.py
runs the compiled kernels on a GPU. The module skips, saying why, without
torch or transformers.
"""

import math
import sys

import pytest

torch = pytest.importorskip("torch", reason="the integration needs torch")
transformers = pytest.importorskip(
    "transformers", reason="pattn.integrations.transformers needs "
    "transformers (pip install transformers)")

import pattn  # noqa: E402
from pattn import serving  # noqa: E402
from pattn.integrations import transformers as ptx  # noqa: E402
from pattn.integrations import _state  # noqa: E402

ptx.register()

FORMATS = ("f16", "i8", "f8e4m3", "i4", "nvfp4")


def config(kind, layers=2, **extra):
    common = dict(vocab_size=96, hidden_size=64, intermediate_size=128,
                  num_hidden_layers=layers, num_attention_heads=8,
                  num_key_value_heads=2, head_dim=16,
                  max_position_embeddings=512)
    common.update(extra)
    if kind == "llama":
        return transformers.LlamaConfig(**common)
    if kind == "qwen3":
        return transformers.Qwen3Config(**common)
    # Gemma-2: softcap, a 8-token window on alternate layers, its own scale.
    return transformers.Gemma2Config(**common, sliding_window=8,
                                     attn_logit_softcapping=50.0,
                                     query_pre_attn_scalar=24)


def model_of(kind, seed=0, **extra):
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(
        config(kind, **extra), dtype=torch.float16).eval()


def prompts(batch=3, width=21, seed=1):
    """Left-padded prompts of different lengths (row b loses 4b tokens)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 96, (batch, width), generator=generator)
    mask = torch.ones_like(ids)
    for b in range(batch):
        mask[b, :4 * b] = 0
    return ids, mask


def generate(model, ids, mask, implementation, cache=None, tokens=8,
             **kwargs):
    model.set_attn_implementation(implementation)
    return model.generate(ids, attention_mask=mask, past_key_values=cache,
                          max_new_tokens=tokens, do_sample=False,
                          output_logits=True, return_dict_in_generate=True,
                          pad_token_id=0, **kwargs)


@pytest.mark.parametrize("kind", ["llama", "qwen3", "gemma2"])
def test_f16_generation_matches_sdpa(kind):
    """Greedy tokens equal sdpa's, step logits within SPEC §8's f16 bound
    (fp32-accumulated attention, one rounding: here ~1e-3 of the logits'
    scale), on a left-padded batch of three prompt lengths."""
    model = model_of(kind)
    ids, mask = prompts()
    expected = generate(model, ids, mask, "sdpa")
    cache = ptx.PattnCache(model.config, max_batch_size=3, max_cache_len=64,
                           cache_format="f16")
    got = generate(model, ids, mask, "pattn", cache)
    assert torch.equal(got.sequences, expected.sequences)
    for ours, theirs in zip(got.logits, expected.logits):
        scale = theirs.float().abs().max().item()
        assert (ours.float() - theirs.float()).abs().max().item() <= \
            4e-3 * max(1.0, scale)
    # Each sequence holds its own real tokens only: 21 - 4b + 8 (the last
    # generated token is never fed back).
    assert cache.seq_lens == [21 + 7, 21 - 4 + 7, 21 - 8 + 7]


def test_f16_pages_hold_the_models_keys_bit_exactly():
    """The f16 pages of sequence b hold the keys transformers' own cache
    holds for its real tokens, byte for byte (pads never written). Layer
    0's keys depend on the embeddings alone; later layers' on attention
    outputs, which differ from sdpa's within rounding."""
    model = model_of("llama")
    ids, mask = prompts()
    model.set_attn_implementation("sdpa")
    dynamic = transformers.DynamicCache(config=model.config)
    model(ids, attention_mask=mask, past_key_values=dynamic)
    model.set_attn_implementation("pattn")
    cache = ptx.PattnCache(model.config, max_batch_size=3, max_cache_len=64,
                           cache_format="f16")
    model(ids, attention_mask=mask, past_key_values=cache)
    state = cache._state
    for side in ("k", "v"):
        pages = state._layers[0].buffers.tensors[f"{side}_pages"]
        rows = pages.view(3, 64, 2, 32).view(torch.float16)    # [B, pos, h, D]
        keys = getattr(dynamic.layers[0], "keys" if side == "k" else
                       "values")                              # [B, h, S, D]
        for b in range(3):
            real = keys[b][:, mask[b].bool()].transpose(0, 1)  # [n, h, D]
            n = real.shape[0]
            assert torch.equal(rows[b, :n].view(torch.int16),
                               real.contiguous().view(torch.int16))
            assert n == 21 - 4 * b


def teacher_forced_logits(model, ids, mask, implementation, cache=None):
    model.set_attn_implementation(implementation)
    with torch.no_grad():
        first = model(ids[:, :16], attention_mask=mask[:, :16],
                      past_key_values=cache, use_cache=cache is not None)
        logits = [first.logits[:, -1]]
        cache = first.past_key_values
        for t in range(16, ids.shape[1]):
            step = model(ids[:, t:t + 1], attention_mask=mask[:, :t + 1],
                         past_key_values=cache)
            logits.append(step.logits[:, -1])
    return torch.stack(logits, 1).float()


@pytest.mark.parametrize("fmt", FORMATS)
def test_quantized_formats_stay_close_to_f16(fmt):
    """Teacher-forced next-token distributions of each format against the
    f16 cache: KL small and top-1 agreement high (a sanity bound on a
    random model; the GPU run reports the real numbers)."""
    model = model_of("llama")
    ids, mask = prompts(width=24)
    make = lambda name: ptx.PattnCache(  # noqa: E731
        model.config, max_batch_size=3, max_cache_len=64, cache_format=name)
    reference = teacher_forced_logits(model, ids, mask, "pattn", make("f16"))
    logits = teacher_forced_logits(model, ids, mask, "pattn", make(fmt))
    assert torch.isfinite(logits).all()
    p = torch.log_softmax(reference, -1)
    q = torch.log_softmax(logits, -1)
    kl = (p.exp() * (p - q)).sum(-1).mean().item()
    top1 = (reference.argmax(-1) == logits.argmax(-1)).float().mean().item()
    bound = {"f16": 1e-6, "i8": 1e-3, "f8e4m3": 5e-3, "i4": 0.05,
             "nvfp4": 0.05}[fmt]
    assert kl <= bound, (fmt, kl)
    assert top1 >= 0.75, (fmt, top1)


def test_int4_k_table_is_calibrated_from_the_prompt():
    """The rule of the module docstring: per (KV head, channel) amax of the
    prompt's real tokens over max code 7, floored at 2^-16 of the largest."""
    model = model_of("llama")
    ids, mask = prompts()
    model.set_attn_implementation("sdpa")
    dynamic = transformers.DynamicCache(config=model.config)
    model(ids, attention_mask=mask, past_key_values=dynamic)
    cache = ptx.PattnCache(model.config, 3, 64, cache_format="i4")
    model.set_attn_implementation("pattn")
    model(ids, attention_mask=mask, past_key_values=cache)
    keys = dynamic.layers[0].keys.transpose(1, 2)        # [B, S, h, D]
    real = keys[mask.bool()]                             # [tokens, h, D]
    amax = real.float().abs().amax(0)
    expected = torch.maximum(amax, amax.max() * 2.0 ** -16) / 7.0
    table = cache._state._layers[0].buffers.tensors["k_scale"]
    assert torch.equal(table, expected)
    # Decode steps keep it.
    model(ids[:, :1], attention_mask=torch.cat([mask, mask[:, :1]], 1),
          past_key_values=cache)
    assert torch.equal(table, expected)


def test_calibrated_scale_rules():
    values = torch.zeros(4, 2, 8)
    values[0, 0, 0] = 7.0
    values[1, 1, 3] = -14.0
    table = _state.calibrated_scale(values, "i4", "channel")
    assert table.shape == (2, 8)
    assert table[0, 0].item() == 1.0 and table[1, 3].item() == 2.0
    assert table[0, 1].item() == pytest.approx(14.0 * 2 ** -16 / 7.0)
    assert torch.equal(_state.calibrated_scale(values, "i8", "tensor"),
                       torch.tensor([14.0]) / 127.0)
    assert torch.equal(_state.calibrated_scale(torch.zeros(3, 2, 8), "i4",
                                               "channel"),
                       torch.ones(2, 8))
    doubled = _state.calibrated_scale(values, "i4", "channel", headroom=2.0)
    assert torch.equal(doubled, 2 * table)


def test_given_scales_are_used_and_checked():
    model = model_of("llama")
    ids, mask = prompts()
    tables = {layer: {"k": torch.full((2, 16), 0.5)} for layer in range(2)}
    cache = ptx.PattnCache(model.config, 3, 64, cache_format="i4",
                           scales=tables)
    model.set_attn_implementation("pattn")
    model(ids, attention_mask=mask, past_key_values=cache)
    assert torch.equal(cache._state._layers[1].buffers.tensors["k_scale"],
                       torch.full((2, 16), 0.5))
    bad = ptx.PattnCache(model.config, 3, 64, cache_format="i4",
                         scales={0: {"k": torch.ones(3)}})
    with pytest.raises(pattn.ArgumentError, match=r"scales\[0\]\['k'\]"):
        model(ids, attention_mask=mask, past_key_values=bad)


def test_prompts_longer_than_one_call_go_in_chunks(monkeypatch):
    """A prompt past the op's query bound is split into calls over the
    prefix so far; the result is the unchunked one."""
    model = model_of("qwen3")
    ids, mask = prompts()
    whole = generate(model, ids, mask, "pattn",
                     ptx.PattnCache(model.config, 3, 64, "f16"))
    monkeypatch.setattr(_state, "MAX_QUERY_TOKENS", 5)
    chunked = generate(model, ids, mask, "pattn",
                       ptx.PattnCache(model.config, 3, 64, "f16"))
    assert torch.equal(whole.sequences, chunked.sequences)
    for a, b in zip(whole.logits, chunked.logits):
        assert (a.float() - b.float()).abs().max().item() < 1e-2


def test_beam_search_matches_sdpa():
    """reorder_cache moves pages between beams."""
    model = model_of("llama")
    ids, mask = prompts(batch=2)
    kwargs = dict(num_beams=3, num_return_sequences=1, early_stopping=False)
    expected = generate(model, ids, mask, "sdpa", tokens=6, **kwargs)
    cache = ptx.PattnCache(model.config, max_batch_size=6, max_cache_len=64,
                           cache_format="f16")
    got = generate(model, ids, mask, "pattn", cache, tokens=6, **kwargs)
    assert torch.equal(got.sequences, expected.sequences)


def test_assisted_decoding_crops_the_cache():
    """Speculative (assisted) decoding appends draft tokens, then crops the
    rejected ones: the tokens are greedy's."""
    model = model_of("llama")
    draft = model_of("llama", seed=5, layers=1)
    ids, mask = prompts(batch=1)
    expected = generate(model, ids, mask, "sdpa", tokens=10)
    draft.set_attn_implementation("sdpa")
    cache = ptx.PattnCache(model.config, 1, 64, "f16")
    got = generate(model, ids, mask, "pattn", cache, tokens=10,
                   assistant_model=draft)
    assert torch.equal(got.sequences, expected.sequences)


def test_errors_are_clear():
    model = model_of("llama")
    ids, mask = prompts()
    model.set_attn_implementation("pattn")
    with pytest.raises(pattn.ArgumentError, match="past_key_values=pattn"):
        model(ids, attention_mask=mask,
              past_key_values=transformers.DynamicCache(config=model.config))
    with pytest.raises(pattn.ArgumentError, match="max_batch_size"):
        model(ids, attention_mask=mask,
              past_key_values=ptx.PattnCache(model.config, 2, 64))
    with pytest.raises(pattn.ArgumentError, match="max_cache_len"):
        model(ids, attention_mask=mask,
              past_key_values=ptx.PattnCache(model.config, 3, 16))
    with pytest.raises(pattn.ArgumentError, match="float16 or bfloat16"):
        model.float()(ids, past_key_values=ptx.PattnCache(model.config, 3,
                                                          64))
    for bad, match in (({"max_batch_size": 0}, "max_batch_size"),
                       ({"block_size": 24}, "power of two"),
                       ({"kernels": "gpu"}, "kernels"),
                       ({"cache_format": "i3"}, "unknown format"),
                       ({"headroom": 0.0}, "headroom")):
        arguments = dict(max_batch_size=1, max_cache_len=8)
        arguments.update(bad)
        with pytest.raises(pattn.ArgumentError, match=match):
            ptx.PattnCache(model.config, **arguments)


def test_cache_formats():
    assert serving.CacheFormat("i4").k == ("i4", "channel")
    assert serving.CacheFormat("i4").calibrated == ("k",)
    mine = serving.CacheFormat("mine", k=("i8", "tensor"),
                               v=("nvfp4", "token"))
    assert mine.calibrated == ("k",)
    # Bytes per token and layer, 8 KV heads x 128: the memory bar of the
    # integration (an int4 cache holds >= 3.5x the tokens of f16).
    f16 = serving.FORMATS["f16"].bytes_per_token(8, 128)
    i4 = serving.FORMATS["i4"].bytes_per_token(8, 128)
    assert f16 == 4096 and i4 == 8 * 64 * 2 + 8 * 4
    assert f16 / i4 >= 3.5
    for k, match in ((("f16", "token"), "no scale"),
                     (("i8", "none"), "need a scale"),
                     (("nvfp4", "channel"), "nvfp4"),
                     (("i5", "token"), "unknown encoding")):
        with pytest.raises(pattn.ArgumentError, match=match):
            serving.CacheFormat("x", k=k, v=("f16", "none"))


def test_chip_table():
    assert serving.chip_of((9, 0)) == "sm_90a"
    assert serving.chip_of((8, 7)) == "sm_86"
    assert serving.chip_of((8, 9)) == "sm_89"
    assert serving.chip_of((12, 0)) == "sm_120a"
    with pytest.raises(pattn.ArgumentError, match="compute capability 7.5"):
        serving.chip_of((7, 5))


@pytest.mark.parametrize("fmt", FORMATS)
def test_layer_modules_verify(fmt, opt):
    """Every format's decode/extend module passes the dialect verifier,
    with and without softcap, window and sinks (Gemma-2, gpt-oss)."""
    base = serving.LayerSpec(32, 8, 128, "bf16", serving.CacheFormat(fmt),
                             16, softmax_scale=0.0625)
    serving.build_module(base).verify(opt)
    import dataclasses
    extras = dataclasses.replace(base, softcap=50.0, window=4096, sinks=True,
                                 head_dim=256, num_heads=16)
    serving.build_module(extras).verify(opt)


def test_compiled_kernels_come_from_the_artifact_cache(compiler, tmp_path):
    """CompiledKernels compiles once into cache_dir, says so on the
    progress line, and loads the artifact with both entry points."""
    spec = serving.LayerSpec(8, 2, 64, "f16", serving.CacheFormat("i4"), 16,
                             softmax_scale=0.125)
    lines = []
    kernels = serving.CompiledKernels(spec, "sm_90a", str(tmp_path),
                                      progress=lines.append)
    assert sorted(kernels.module.functions) == ["decode", "extend"]
    names = kernels.module.functions["extend"].arg_names
    assert tuple(names) == tuple(n for n in serving.STEP_ARGUMENTS
                                 if n in names)
    assert "query_start" not in kernels.module.functions["decode"].arg_names
    assert len([p for p in tmp_path.glob("*.so")
                if p.name != "libpattn_runtime.so"]) == 1
    assert lines[0].startswith("pattn: kernels for 8/2 heads D64 f16, "
                               "K i4/channel, V i4/token")
    assert lines[-1].endswith("ready")
    again = serving.CompiledKernels(spec, "sm_90a", str(tmp_path),
                                    progress=lines.append)
    assert again.module.path == kernels.module.path


def test_kernels_for_routes_by_device():
    spec = serving.LayerSpec(8, 2, 64, "f16", serving.CacheFormat("f16"))
    assert isinstance(serving.kernels_for(spec, torch.device("cpu")),
                      serving.ReferenceKernels)
    assert serving.kernels_for(spec, torch.device("cpu")) is \
        serving.kernels_for(spec, torch.device("cpu"))
    with pytest.raises(pattn.ArgumentError, match="CUDA"):
        serving.kernels_for(spec, torch.device("meta"))


def test_memory_of_a_cache():
    model = model_of("llama")
    ids, mask = prompts()
    sizes = {}
    for fmt in ("f16", "i4"):
        cache = ptx.PattnCache(model.config, 3, 64, cache_format=fmt)
        model.set_attn_implementation("pattn")
        model(ids, attention_mask=mask, past_key_values=cache)
        sizes[fmt] = cache.memory_bytes()
    pages = 3 * 4 * 16  # 3 sequences x 4 pages x 16 tokens
    assert sizes["f16"] == 2 * pages * 2 * 2 * 16 * 2   # layers, K+V, h, D
    assert math.isclose(sizes["i4"], 2 * pages * serving.FORMATS[
        "i4"].bytes_per_token(2, 16))


@pytest.mark.parametrize("kind", ["llama", "qwen3", "gemma2"])
def test_layer_specs_are_the_ones_attention_asks_for(kind):
    """precompile() compiles what a run will look up: the specs read from
    a config (a meta-device model) equal the ones the attention calls
    build."""
    model = model_of(kind)
    ids, mask = prompts()
    cache = ptx.PattnCache(model.config, 3, 64, cache_format="i4")
    model.set_attn_implementation("pattn")
    model(ids, attention_mask=mask, past_key_values=cache)
    used = []
    for layer in cache._state._layers:
        for spec in layer.specs.values():
            if spec not in used:
                used.append(spec)
    assert ptx.layer_specs(config(kind), "i4") == used
    assert len(used) == (2 if kind == "gemma2" else 1)


def _batching_run(model, prompts_, implementation, block_sharing=True):
    from transformers.generation import ContinuousBatchingConfig
    model.set_attn_implementation(implementation)
    model.generation_config = transformers.GenerationConfig(
        do_sample=False, max_new_tokens=6, eos_token_id=-1, pad_token_id=0)
    # Small blocks and batches: requests are scheduled in several chunks.
    config = ContinuousBatchingConfig(block_size=16, num_blocks=64,
                                      max_batch_tokens=24,
                                      allow_block_sharing=block_sharing)
    out = model.generate_batch(prompts_, continuous_batching_config=config,
                               max_new_tokens=6)
    return {key: list(value.generated_tokens) for key, value in out.items()}


@pytest.fixture
def cpu_batching(monkeypatch):
    """Continuous batching sizes its cache from the device's memory; on
    the CPU, say 8 GiB are free. Leaves the format at its default after."""
    from transformers.generation.continuous_batching import cache as cb
    monkeypatch.setattr(cb, "get_device_and_memory_breakdown",
                        lambda: (torch.device("cpu"), 8 << 30, 0, 0))
    yield
    from pattn.integrations import transformers_batching
    transformers_batching.use(None)


@pytest.mark.parametrize("fmt", ["f16", "i4", "nvfp4"])
def test_generate_batch_on_pattn_pages(cpu_batching, fmt):
    """generate_batch() unchanged, 'paged|pattn': transformers' scheduler
    and allocator, chunked prefill over 16-token blocks, pattn pages; f16
    gives paged|sdpa's tokens, quantized formats mostly the same."""
    from pattn.integrations import transformers_batching
    model = model_of("llama")
    generator = torch.Generator().manual_seed(3)
    lengths = (30, 3, 47, 12, 21)
    requests = [torch.randint(1, 96, (n,), generator=generator).tolist()
                for n in lengths]
    expected = _batching_run(model, requests, "paged|sdpa")
    transformers_batching.use(fmt)
    got = _batching_run(model, requests, "paged|pattn")
    assert sorted(got) == sorted(expected)
    same = sum(a == b for key in got
               for a, b in zip(got[key], expected[key]))
    total = sum(len(v) for v in expected.values())
    if fmt == "f16":
        assert got == expected
    else:
        assert same >= 0.7 * total, (fmt, same, total)


def test_block_table_from_the_engines_slots():
    from pattn.integrations.transformers_batching import _block_table
    # Two requests: 5 tokens in blocks 7, 2 (4-token blocks); 3 in block 9.
    read = torch.tensor([28, 29, 30, 31, 8, 36, 37, 38])
    cu_k = torch.tensor([0, 5, 8])
    table = _block_table(read, torch.tensor([8, 38]), cu_k,
                         torch.tensor([0, 1, 2]), 4, 3)
    assert table.tolist() == [[7, 2, -1], [9, -1, -1]]
    # No cached past: the write index lists every token.
    table = _block_table(torch.tensor([], dtype=torch.long), read, cu_k,
                         cu_k, 4, 2)
    assert table.tolist() == [[7, 2], [9, -1]]


def test_paged_pattn_outside_batching_is_an_error():
    model = model_of("llama")
    ids, mask = prompts()
    from pattn.integrations import transformers_batching
    transformers_batching.register()
    model.set_attn_implementation("paged|pattn")
    with pytest.raises(pattn.ArgumentError, match="generate_batch"):
        model(ids, attention_mask=mask)


def test_a_pattn_cache_needs_the_pattn_attention():
    """With another attention the model would attend over the new rows
    alone: the next update says so instead."""
    model = model_of("llama")
    ids, mask = prompts()
    model.set_attn_implementation("sdpa")
    with pytest.raises(pattn.ArgumentError, match="attn_implementation="
                       "'pattn'"):
        model(ids, attention_mask=mask,
              past_key_values=ptx.PattnCache(model.config, 3, 64))


def test_replays_of_a_captured_step_are_counted_on_the_host():
    """note_replays() advances what the host knows (lengths, positions)
    as replays advanced the device; past the pages it is an error."""
    model = model_of("llama")
    ids, mask = prompts()
    cache = ptx.PattnCache(model.config, 3, 32, "f16")
    model.set_attn_implementation("pattn")
    model(ids, attention_mask=mask, past_key_values=cache)
    cache.note_replays(3)
    assert cache.seq_lens == [24, 20, 16]
    assert cache.get_seq_length() == 24
    with pytest.raises(pattn.ArgumentError, match="max_cache_len"):
        cache.note_replays(9)
    assert cache.seq_lens == [24, 20, 16]


def test_rules_of_the_attention_function():
    """Each rule pattn's attention enforces, with its message."""
    model = model_of("llama")
    ids, mask = prompts()
    model.set_attn_implementation("pattn")
    # Training-time dropout.
    model.train()
    model.config.attention_dropout = 0.1
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.1
    with pytest.raises(pattn.ArgumentError, match="dropout"):
        model(ids, attention_mask=mask,
              past_key_values=ptx.PattnCache(model.config, 3, 64))
    model.eval()
    # A 4-D mask is not a padding mask.
    with pytest.raises(pattn.ArgumentError, match="2-D padding mask"):
        ptx.pattn_attention_mask(3, 21, 21,
                                 attention_mask=torch.ones(3, 1, 21, 21))
    # One batch per cache.
    cache = ptx.PattnCache(model.config, 3, 64)
    model(ids, attention_mask=mask, past_key_values=cache)
    with pytest.raises(pattn.ArgumentError, match="serves one batch"):
        model(ids[:2, -1:], past_key_values=cache)
    # One head size for Q, K and V.
    state = cache._state
    query = torch.zeros(3, 8, 1, 16, dtype=torch.float16)
    with pytest.raises(pattn.ArgumentError, match="one head size"):
        state.attend(0, query, torch.zeros(3, 2, 1, 16, dtype=torch.float16),
                     torch.zeros(3, 2, 1, 8, dtype=torch.float16), None)


def test_rules_of_continuous_batching(monkeypatch):
    from pattn.integrations import transformers_batching as tb
    with pytest.raises(pattn.ArgumentError, match="rows of different"):
        tb.use(serving.CacheFormat("x", k=("i4", "channel"),
                                   v=("i8", "token")))
    # The module transformers put in sys.modules (its lazy loader may have
    # replaced the one imported above).
    monkeypatch.setattr(sys.modules["transformers"], "__version__", "5.25.0")
    with pytest.raises(pattn.ArgumentError, match="5.25.0"):
        tb.use("i4")
    monkeypatch.undo()

    class Cache:
        pattn_format = serving.FORMATS["f16"]

    class Module:
        layer_idx = 0
    rows = torch.zeros(1, 2, 3, 16, dtype=torch.float16)
    with pytest.raises(pattn.ArgumentError, match="sliding-window"):
        tb.paged_attention(Module(), rows, rows, rows, None, cache=Cache(),
                           sliding_window=8)


@pytest.mark.parametrize("fmt", ["f16", "i4", "nvfp4"])
def test_interleaved_pages_hold_what_separate_pages_hold(fmt, opt):
    """LayerSpec(interleaved_kv=True): K and V are the halves of one
    [blocks, 2, ...] allocation (an engine's), the kernels take them as
    page-strided views; a prompt step writes the same page bytes and
    attends to the same output as with separate K and V buffers."""
    import dataclasses
    spec = serving.LayerSpec(8, 2, 64, "f16", serving.CacheFormat(fmt), 16,
                             softmax_scale=0.125, layout="hnd")
    engine = dataclasses.replace(spec, interleaved_kv=True)
    module = serving.build_module(engine)
    assert "strided<[" in str(module)
    module.verify(opt)
    generator = torch.Generator().manual_seed(5)
    lengths, tables = (20, 7), [[3, 0], [5, -1]]
    slots = [tables[0][t // 16] * 16 + t % 16 for t in range(20)] + \
        [5 * 16 + t for t in range(7)]

    def rows(*shape):
        return (torch.rand(shape, generator=generator) * 2 - 1).half()

    inputs = {"query": rows(27, 8, 64), "k_new": rows(27, 2, 64),
              "v_new": rows(27, 2, 64),
              "slots": torch.tensor(slots, dtype=torch.int32),
              "block_table": torch.tensor(tables, dtype=torch.int32),
              "seq_lens": torch.tensor(lengths, dtype=torch.int32),
              "query_start": torch.tensor([0, 20, 27], dtype=torch.int32)}
    results = []
    for layer in (spec, engine):
        buffers = serving.LayerBuffers(layer, 6, "cpu")
        tensors = {**buffers.tensors, **inputs,
                   "out": torch.full((27, 8, 64), float("nan"),
                                     dtype=torch.float16)}
        serving.ReferenceKernels(layer).step("extend", tensors)
        results.append((tensors, buffers))
    (separate, _), (interleaved, buffers) = results
    k, v = buffers.tensors["k_pages"], buffers.tensors["v_pages"]
    assert k.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()
    assert k.stride(0) == 2 * spec.cache_type("k").page_bytes
    assert torch.equal(interleaved["out"], separate["out"])
    assert not torch.isnan(interleaved["out"]).any()
    for name in ("k_pages", "v_pages"):
        assert torch.equal(interleaved[name], separate[name]), name
        assert interleaved[name].any(), name


def test_interleaved_pages_need_pages_of_one_size():
    with pytest.raises(pattn.ArgumentError, match="interleaved K and V "
                       "pages must be of one size"):
        serving.LayerSpec(8, 2, 64, "f16", serving.CacheFormat(
            "x", k=("i4", "channel"), v=("i8", "token")), 16,
            interleaved_kv=True)
