"""GPU tests of pattn's torch custom ops (Module.torch_ops).

One decode step, three ops (``write_k`` and ``write_v`` append the new rows
to the quantized caches, ``decode`` attends over them), runs three ways on
the same inputs:

(a) eagerly, each op through the dispatcher to its CUDA kernel;
(b) through ``torch.compile(fullgraph=True)`` with the default (inductor)
    backend, which functionalizes the ops' writes (the schemas declare the
    cache storage and the output written) and must still leave the caches
    and the output written in place;
(c) captured in a ``torch.cuda.CUDAGraph`` and replayed.

Each run starts from the same cache bytes (random, as stale pages are) and a
NaN-poisoned output. The output and every written buffer agree bit for bit
between the three; the caches equal the reference quantizers' bytes and the
output matches the float64 reference within SPEC §8's tolerance, as in
test_gpu_attention.py, whose planning and comparison helpers this file uses.
Arguments are passed to the ops by their MLIR names, so the schemas must
carry them.

The modules are compiled like the suite's: ``PATTN_ARTIFACT_DIR`` serves
them on a machine without pattn-compile (precompile.py compiles CASES).
"""

from __future__ import annotations

import contextlib
import os

import pytest

from gpu_required import torch  # skips the module without a CUDA device

import numpy as np  # noqa: E402  (after the skip: CPU-only CI may lack it)

import ir  # noqa: E402
import pattn  # noqa: E402
import test_gpu_attention as suite  # noqa: E402

#: decode_int4.mlir's deployment (INT4 K with channel scales, INT8 V with a
#: tensor scale, 32 heads over 8, D128, 16-token pages) and a speculative
#: NVFP4/FP8 one with group and token scales, HND pages and sinks.
CASES = [
    suite.Case(ir.Config(name="torch-op-int4", k_encoding="i4",
                         k_scale="channel", v_encoding="i8", v_scale="tensor",
                         kv_heads=8, g=4, head_dim=128, block_size=16,
                         seq_lens=(33, 1, 200, 17))),
    suite.Case(ir.Config(name="torch-op-nvfp4-spec", k_encoding="nvfp4",
                         k_scale="token", v_encoding="f8e4m3",
                         v_scale="token", layout="hnd", query_tokens=3,
                         sinks=True, dtype="bf16", seq_lens=(40, 3, 77))),
]

STEP = ("write_k", "write_v", "decode")


def _load(text: str):
    path = pattn.compile(text, chips=[suite.CHIP], backend=suite.BACKEND)
    module = pattn.load(path)
    if not os.environ.get("PATTN_ARTIFACT_DIR"):
        with contextlib.suppress(OSError):  # a temporary file of ours
            os.unlink(path)
    return module


def _initial_tensors(plan) -> dict:
    """The step's inputs on the device, as run_paged makes them."""
    tensors = {**suite.paged_cache_tensors(plan),
               "k_new": suite.upload(plan.k_new, plan.dtype),
               "v_new": suite.upload(plan.v_new, plan.dtype),
               "slots": suite.upload(plan.slots, "i64"),
               "query": suite.upload(plan.query, plan.dtype),
               "block_table": suite.upload(plan.block_table, "i32"),
               "seq_lens": suite.upload(np.array(plan.config.seq_lens),
                                        "i32")}
    for prefix, operand in (("k", plan.k_operand), ("v", plan.v_operand)):
        if operand is not None:
            tensors[f"{prefix}_scale"] = suite.upload(operand, "f32")
    if plan.query_start is not None:
        tensors["query_start"] = suite.upload(plan.query_start, "i32")
    if plan.sinks is not None:
        tensors["sinks"] = suite.upload(plan.sinks, "f32")
    tensors["out"] = suite.poisoned(plan.query.shape, plan.dtype)
    return tensors


def _bytes(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous().view(torch.uint8).clone()


@pytest.mark.parametrize("case", CASES, ids=suite._ids)
def test_op_eager_compiled_and_graph_replay_agree(case, gpu_results):
    plan = case.plan()
    module = _load(plan.module.text)
    ops = module.torch_ops()
    signatures = {name: tuple(arg.name for arg in plan.module.functions[name])
                  for name in STEP}
    written = set()
    for name in STEP:
        function = module[name]
        assert function.arg_names == signatures[name], (
            f"@{name}: the manifest names {function.arg_names}, the IR "
            f"{signatures[name]}")
        written |= {spec.name for spec in function.args if spec.written}
    assert "out" in written and "k_pages" in written and \
        "v_pages" in written, written
    assert "query" not in written and "slots" not in written, written

    tensors = _initial_tensors(plan)
    initial = {name: tensor.clone() for name, tensor in tensors.items()}
    write_k, write_v, decode = (ops[name] for name in STEP)
    names_k, names_v, names_decode = (signatures[name] for name in STEP)

    def step(t: dict) -> None:
        # By keyword: the ops' schemas carry the MLIR names.
        write_k(**{name: t[name] for name in names_k})
        write_v(**{name: t[name] for name in names_v})
        decode(**{name: t[name] for name in names_decode})

    def reset() -> None:
        for name, value in initial.items():
            tensors[name].copy_(value)
        tensors["out"].fill_(float("nan"))
        torch.cuda.synchronize()

    def outcome() -> dict:
        torch.cuda.synchronize()
        module.check_device_errors()
        return {name: _bytes(tensors[name]) for name in sorted(written)}

    module.take_device_errors()
    reset()
    step(tensors)
    eager = outcome()
    k_cache = suite.downloaded_cache("k", plan.k_initial, tensors)
    v_cache = suite.downloaded_cache("v", plan.v_initial, tensors)
    got = suite.activation_values(suite.download(tensors["out"]), plan.dtype)

    reset()
    torch.compile(step, fullgraph=True)(tensors)
    compiled = outcome()

    reset()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up, as torch.cuda.graph advises
        step(tensors)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(tensors)
    reset()
    graph.replay()
    replayed = outcome()

    for name in sorted(written):
        assert torch.equal(compiled[name], eager[name]), \
            f"{name}: torch.compile differs from the eager op"
        assert torch.equal(replayed[name], eager[name]), \
            f"{name}: CUDA graph replay differs from the eager op"
        if name != "out":
            assert not torch.equal(eager[name], _bytes(initial[name])), \
                f"{name}: the step wrote nothing"

    # The eager run against the reference.
    suite.assert_cache_equal(k_cache, plan.k_expected, "K cache")
    suite.assert_cache_equal(v_cache, plan.v_expected, "V cache")
    run = suite.PagedRun(plan, module, tensors, k_cache, v_cache)
    suite.assert_close(got, run.reference(), plan.dtype,
                       "decode through the torch op", gpu_results,
                       run.families(), run.value_scale())


@pytest.mark.parametrize("case", CASES[:1], ids=suite._ids)
def test_op_under_reduce_overhead_records_a_cuda_graph(case):
    """torch.compile(mode="reduce-overhead"): with the tensors the step
    writes marked static (torch._dynamo.mark_static_address: a serving
    engine's caches and output buffers live for the whole run), inductor's
    CUDA-graph trees accept the ops' in-place writes, record the step and
    replay it; every replay writes what the eager step writes, bit for
    bit."""
    from torch._dynamo.utils import counters
    from torch._inductor import cudagraph_trees
    plan = case.plan()
    module = _load(plan.module.text)
    ops = module.torch_ops()
    signatures = {name: tuple(arg.name for arg in plan.module.functions[name])
                  for name in STEP}
    written = sorted({spec.name for name in STEP
                      for spec in module[name].args if spec.written})
    tensors = _initial_tensors(plan)
    initial = {name: tensor.clone() for name, tensor in tensors.items()}

    def step(t: dict) -> None:
        for name in STEP:
            ops[name](**{arg: t[arg] for arg in signatures[name]})

    def reset() -> None:
        for name, value in initial.items():
            tensors[name].copy_(value)
        tensors["out"].fill_(float("nan"))

    def outcome() -> dict:
        torch.cuda.synchronize()
        module.check_device_errors()
        return {name: _bytes(tensors[name]) for name in written}

    reset()
    step(tensors)
    eager = outcome()
    for name in written:
        torch._dynamo.mark_static_address(tensors[name])
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    for call in range(4):  # warm-up, record, then replays
        reset()
        compiled(tensors)
        got = outcome()
        for name in written:
            assert torch.equal(got[name], eager[name]), \
                f"call {call}, {name}: the CUDA-graph step differs from eager"
    skips = dict(counters["inductor"])
    assert skips.get("cudagraph_skips", 0) == 0, (
        f"inductor skipped CUDA graphs: {skips}")
    manager = cudagraph_trees.get_manager(torch.cuda.current_device(),
                                          create_if_none_exists=False)
    assert manager is not None and any(manager.roots.values()), \
        "no CUDA graph was recorded"
