"""pattn functions as torch custom ops (issue 9, item 4): Module.torch_ops.

Runs without a GPU. The ops of stand-in artifacts (test_loader.py's
ArtifactBuilder, with manifests that say which arguments are written) and
of pattn-compile's examples/decode_int4.mlir are registered with
torch.library; their schemas are checked as text and as torch reads them,
and calls on meta and fake tensors (FakeTensorMode, torch.compile with the
aot_eager backend) go through the fake implementation, which checks what the
real call checks. Nothing here launches a kernel: the CUDA implementation
runs on the H200 in python/tests/gpu/test_torch_op.py.

Tests that need torch skip, saying so, where it is not installed; the one
that checks that ``import pattn`` does not import torch runs everywhere.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import pattn
from pattn import _torch_ops

import test_loader as base
from test_loader import FakeTensor, Probe, STREAM
from test_loader import builder  # noqa: F401  (fixture)

REPO = pathlib.Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO / "python"


def _torch():
    try:
        import torch
    except ImportError as error:
        pytest.skip(f"torch is not installed ({error})")
    return torch


# decode_step writes its cache and reads its lengths; fill writes its out.
MANIFEST = {
    "version": 1, "chips": ["sm_90a"],
    "functions": [
        {"name": "decode_step", "symbol": "decode_step",
         "args": [{"name": "cache", "dtype": "i8", "shape": [-1, 16, 8, 64],
                   "written": True},
                  {"name": "seq_lens", "dtype": "i32", "shape": [-1],
                   "written": False}]},
        {"name": "fill", "symbol": "_pattn_fill",
         "args": [{"name": "out", "dtype": "f16", "shape": [],
                   "written": True}]},
    ],
}



@pytest.fixture(scope="module")
def artifact_path(builder):
    return builder.build("artifact", json.dumps(MANIFEST))


def test_importing_pattn_does_not_import_torch(artifact_path):
    script = f"""
import sys
sys.path.insert(0, {str(PYTHON_DIR)!r})
import pattn
module = pattn.load({str(artifact_path)!r})
class Device:
    type, index = "cuda", 0
class Tensor:
    def __init__(self, shape, dtype, pointer):
        self.shape, self.dtype, self.device = shape, dtype, Device()
        self.pointer = pointer
    def data_ptr(self):
        return self.pointer
    def is_contiguous(self):
        return True
module.fill(Tensor((), "torch.float16", 0x3000), stream=0x5EA)
assert "torch" not in sys.modules, "pattn imported torch"
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", \
        result.stderr[-2000:]


@pytest.fixture(scope="module")
def ops(artifact_path):
    _torch()
    return pattn.load(artifact_path).torch_ops()


def test_schema_declares_what_each_function_writes(ops):
    torch = _torch()
    namespace = ops.namespace
    assert re.fullmatch(r"pattn_[0-9a-f]{12}", namespace)
    assert ops.schemas == {
        "decode_step": f"{namespace}::decode_step(Tensor(a!) cache, "
                       "Tensor seq_lens) -> ()",
        "fill": f"{namespace}::fill(Tensor(a!) out) -> ()",
    }
    # As torch reads them: the written argument is a mutable alias, the
    # other is not, and nothing is returned.
    schema = getattr(torch.ops, namespace).decode_step.default._schema
    assert str(schema) == ops.schemas["decode_step"]
    assert [(a.name, a.alias_info is not None and a.alias_info.is_write)
            for a in schema.arguments] == [("cache", True),
                                           ("seq_lens", False)]
    assert len(schema.returns) == 0
    assert ops.decode_step is getattr(torch.ops, namespace).decode_step
    assert ops["fill"] is getattr(torch.ops, namespace).fill
    assert list(ops) == ["decode_step", "fill"] and len(ops) == 2
    with pytest.raises(pattn.UnknownFunctionError, match="has no op 'prefill'"):
        ops.prefill  # noqa: B018


def test_old_manifests_declare_every_argument_written(builder):
    _torch()
    module = pattn.load(builder.build("old_manifest",
                                      json.dumps(base.MANIFEST)))
    ops = module.torch_ops()
    assert ops.schemas["decode_step"] == (
        f"{ops.namespace}::decode_step(Tensor(a!) cache, Tensor(b!) "
        "seq_lens) -> ()")


def test_many_written_arguments_get_alias_sets_of_their_own():
    function = type("F", (), {})()
    function.name = "wide"
    function.args = tuple(pattn.ArgSpec(f"x{i}", "f32", (4,), True)
                          for i in range(30))
    text = _torch_ops.schema(function)
    sets = re.findall(r"Tensor\((\w+)!\)", text)
    assert len(sets) == 30 and len(set(sets)) == 30
    torch = _torch()
    parsed = torch._C.parse_schema("ns::" + text)
    assert all(a.alias_info.is_write for a in parsed.arguments)


def meta(torch, shape, dtype):
    return torch.empty(shape, dtype=dtype, device="meta")


def test_meta_calls_run_the_fake_implementation(ops):
    torch = _torch()
    cache = meta(torch, (3, 16, 8, 64), torch.int8)
    lens = meta(torch, (5,), torch.int32)
    assert ops.decode_step(cache, lens) is None
    # By the MLIR names, as keywords of the op.
    assert ops.decode_step(seq_lens=lens, cache=cache) is None
    assert ops.decode_step(cache=meta(torch, (1, 16, 8, 64), torch.uint8),
                           seq_lens=meta(torch, (0,), torch.int32)) is None
    for args, message in [
        ((meta(torch, (3, 16, 4, 64), torch.int8), lens),
         r"decode_step: dimension 2 of argument 'cache' must be 8 \(shape "
         r"\[\?, 16, 8, 64\]\), got shape \[3, 16, 4, 64\]"),
        ((cache, meta(torch, (5,), torch.int64)),
         r"decode_step: argument 'seq_lens' must have dtype i32 "
         r"\(torch.int32\), got torch.int64"),
        ((meta(torch, (3, 16, 8), torch.int8), lens),
         r"argument 'cache' must have rank 4"),
        ((meta(torch, (3, 16, 64, 8), torch.int8).transpose(2, 3), lens),
         r"argument 'cache' must be contiguous"),
    ]:
        with pytest.raises(pattn.ArgumentError, match=message):
            ops.decode_step(*args)


def test_fake_tensor_mode_runs_the_fake_implementation(ops):
    torch = _torch()
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        try:
            cache = torch.empty((3, 16, 8, 64), dtype=torch.int8,
                                device="cuda")
        except (AssertionError, RuntimeError) as error:
            pytest.skip(f"this torch cannot make fake CUDA tensors: {error}")
        lens = torch.empty((5,), dtype=torch.int32, device="cuda")
        assert ops.decode_step(cache, lens) is None
        with pytest.raises(pattn.ArgumentError,
                           match=r"dimension 1 of argument 'cache' must be "
                                 r"16"):
            ops.decode_step(torch.empty((3, 8, 8, 64), dtype=torch.int8,
                                        device="cuda"), lens)
        with pytest.raises(pattn.ArgumentError,
                           match=r"argument 'seq_lens' is on cpu, expected a "
                                 r"CUDA device"):
            ops.decode_step(cache, torch.empty((5,), dtype=torch.int32))
        with pytest.raises(pattn.ArgumentError,
                           match=r"argument 'out' must have dtype f16"):
            ops.fill(torch.empty((), dtype=torch.float32, device="cuda"))


def test_the_cuda_kernel_calls_the_function_on_the_current_stream(
        ops, artifact_path, monkeypatch):
    """The CUDA kernel itself, without a GPU: torch's current stream is
    played by a stand-in, the tensors are test_loader's stand-ins."""
    torch = _torch()
    probe = Probe(artifact_path)
    probe.fail_next_calls_with(0)

    class Stream:
        cuda_stream = STREAM

    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda device=None: Stream())
    _, target = _torch_ops._REGISTERED[f"{ops.namespace}::decode_step"]
    kernel = _torch_ops._cuda_kernel(target)
    kernel(FakeTensor((3, 16, 8, 64), "torch.int8", 0x1000),
           FakeTensor((5,), "torch.int32", 0x2000))
    assert probe.received[0] == 0x1000 and probe.received[11] == 0x2000
    assert probe.received[-1] == STREAM
    kernel(seq_lens=FakeTensor((5,), "torch.int32", 0x2000),
           cache=FakeTensor((3, 16, 8, 64), "torch.int8", 0x1000))
    assert probe.received[-1] == STREAM


def _decode_step_function(torch, op):
    """A small decode step around the op: values computed before it, the
    written cache read after it."""
    def step(cache, lens, scale):
        op(cache, lens + 1)
        return cache[:, 0].float().sum() * scale
    return step


def test_page_strided_views_go_through_the_op(builder):
    """An op over a page-strided argument (test_loader.PAGE_STRIDED: K of
    a [blocks, 2, 16, 8, 64] allocation) takes the view of an engine's
    buffer on meta tensors and through torch.compile, in one graph; a
    contiguous tensor fails with the expected strides."""
    torch = _torch()
    path = builder.build("page_strided_op", json.dumps(base.PAGE_STRIDED))
    ops = pattn.load(path).torch_ops()
    kv = meta(torch, (3, 2, 16, 8, 64), torch.int8)
    lens = meta(torch, (5,), torch.int32)
    assert ops.decode_step(kv[:, 0], lens) is None
    assert ops.decode_step(kv[:, 1], lens) is None
    with pytest.raises(pattn.ArgumentError, match=r"argument 'cache' must "
                       r"have strides \[16384, 512, 64, 1\]"):
        ops.decode_step(meta(torch, (3, 16, 8, 64), torch.int8), lens)

    def step(kv, lens):
        ops.decode_step(kv[:, 0], lens)
        ops.decode_step(kv[:, 1], lens)
        return lens.sum()

    torch._dynamo.reset()
    explained = torch._dynamo.explain(step)(kv, lens)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, \
        explained.break_reasons
    torch.compile(step, fullgraph=True, backend="aot_eager")(kv, lens)


def test_torch_compile_traces_the_op_without_graph_breaks(ops):
    torch = _torch()
    import torch._dynamo
    import torch._dynamo.testing
    torch._dynamo.reset()
    step = _decode_step_function(torch, ops.decode_step)
    args = (meta(torch, (3, 16, 8, 64), torch.int8),
            meta(torch, (5,), torch.int32),
            meta(torch, (), torch.float32))
    explained = torch._dynamo.explain(step)(*args)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, \
        explained.break_reasons
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(step, fullgraph=True, backend=counter)
    result = compiled(*args)
    assert result.device.type == "meta" and result.shape == ()
    assert counter.frame_count == 1
    # The op is in the traced graph, by its qualified name.
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    torch.compile(step, fullgraph=True, backend=backend)(*args)
    assert len(graphs) == 1
    assert f"torch.ops.{ops.namespace}.decode_step" in graphs[0].code
    # A wrong shape fails while tracing, with the fake implementation's
    # message.
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"dimension 2 of argument 'cache' "
                                        r"must be 8"):
        torch.compile(step, fullgraph=True, backend="aot_eager")(
            meta(torch, (3, 16, 2, 64), torch.int8), args[1], args[2])


def test_functionalization_keeps_the_mutation(ops):
    """aot_autograd's functional graph wraps the op in auto_functionalized
    and returns the written cache as an extra output (copied back into the
    input after the graph), which it does only because the schema says the
    op writes it; the lengths, only read, are not returned."""
    torch = _torch()
    import torch._dynamo
    from torch._functorch.aot_autograd import aot_module_simplified
    torch._dynamo.reset()
    captured = []

    def backend(graph_module, example_inputs):
        def inner(graph, inputs):
            captured.append(graph)
            return graph.forward
        return aot_module_simplified(graph_module, example_inputs,
                                     fw_compiler=inner)

    step = _decode_step_function(torch, ops.decode_step)
    torch.compile(step, fullgraph=True, backend=backend)(
        meta(torch, (3, 16, 8, 64), torch.int8),
        meta(torch, (5,), torch.int32), meta(torch, (), torch.float32))
    graph = captured[0]
    assert "auto_functionalized" in graph.code, graph.code
    calls = [node for node in graph.graph.nodes
             if node.op == "call_function" and
             "auto_functionalized" in str(node.target)]
    assert len(calls) == 1 and calls[0].args[0] is \
        ops.decode_step.default, graph.code
    outputs = next(node for node in graph.graph.nodes
                   if node.op == "output").args[0]
    assert len(outputs) == 2, ("the written cache and the result", graph.code)


def test_registering_again_reuses_the_ops(artifact_path, ops):
    _torch()
    again = pattn.load(artifact_path)
    second = again.torch_ops()
    assert second.namespace == ops.namespace
    assert second.schemas == ops.schemas
    assert second.decode_step is ops.decode_step
    _, target = _torch_ops._REGISTERED[f"{ops.namespace}::decode_step"]
    assert target.function is again.decode_step, "rebound to the newest load"
    assert again.torch_ops(namespace=None).namespace == ops.namespace


def test_default_namespace_is_stable_and_per_artifact(artifact_path, ops,
                                                      tmp_path):
    script = f"""
import sys
sys.path.insert(0, {str(PYTHON_DIR)!r})
import pattn
from pattn import _torch_ops
print(_torch_ops.default_namespace(pattn.load({str(artifact_path)!r})))
"""
    result = subprocess.run([sys.executable, "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == ops.namespace, "stable across processes"
    # The same bytes at another path are another artifact (the rpath finds
    # the stand-in runtime wherever the copy is).
    copy = tmp_path / "copy.so"
    shutil.copy2(artifact_path, copy)
    other = pattn.load(copy).torch_ops()
    assert other.namespace != ops.namespace


def test_a_namespace_of_ones_own(builder):
    torch = _torch()
    module = pattn.load(builder.build("own_namespace", json.dumps(MANIFEST)))
    ops = module.torch_ops(namespace="pattn_test_own")
    assert ops.namespace == "pattn_test_own"
    assert torch.ops.pattn_test_own.decode_step is ops.decode_step
    assert str(torch.ops.pattn_test_own.fill.default._schema) == \
        "pattn_test_own::fill(Tensor(a!) out) -> ()"


@pytest.mark.parametrize("namespace, error, message", [
    ("1abc", pattn.ArgumentError, r"argument 'namespace' '1abc' must be an "
     r"ASCII identifier"),
    ("a-b", pattn.ArgumentError, r"must be an ASCII identifier"),
    ("a.b", pattn.ArgumentError, r"must be an ASCII identifier"),
    ("class", pattn.ArgumentError, r"not a Python keyword"),
    ("", pattn.ArgumentError, r"must be an ASCII identifier"),
    ("naïve", pattn.ArgumentError, r"must be an ASCII identifier"),
    (5, pattn.ArgumentTypeError, r"argument 'namespace' must be a str"),
])
def test_bad_namespaces_are_argument_errors(artifact_path, namespace, error,
                                            message):
    _torch()
    with pytest.raises(error, match=message):
        pattn.load(artifact_path).torch_ops(namespace=namespace)


def test_torch_ops_misuse(artifact_path):
    _torch()
    module = pattn.load(artifact_path)
    with pytest.raises(pattn.ArgumentTypeError,
                       match=r"pattn.Module.torch_ops: got an unexpected "
                             r"keyword argument 'name_space'"):
        module.torch_ops(name_space="x")


def test_same_namespace_and_another_schema_is_an_error(builder):
    torch = _torch()
    first = pattn.load(builder.build("conflict_a", json.dumps(MANIFEST)))
    first.torch_ops(namespace="pattn_test_conflict")
    other = json.loads(json.dumps(MANIFEST))
    other["functions"][0]["args"][1]["written"] = True
    other["functions"].append(
        {"name": "extra", "symbol": "_pattn_fill",
         "args": [{"name": "out", "dtype": "f16", "shape": []}]})
    second = pattn.load(builder.build("conflict_b", json.dumps(other)))
    with pytest.raises(pattn.TorchOpError,
                       match=r"op pattn_test_conflict::decode_step is "
                             r"already registered with schema "
                             r"'decode_step\(Tensor\(a!\) cache, Tensor "
                             r"seq_lens\) -> \(\)', and this artifact's "
                             r"'decode_step' is 'decode_step\(Tensor\(a!\) "
                             r"cache, Tensor\(b!\) seq_lens\) -> \(\)'; pass "
                             r"another namespace="):
        second.torch_ops(namespace="pattn_test_conflict")
    # Nothing of the second artifact was registered.
    assert not torch._C._jit_get_schemas_for_operator(
        "pattn_test_conflict::extra")
    _, target = _torch_ops._REGISTERED["pattn_test_conflict::decode_step"]
    assert target.function is first.decode_step
    # Its own default namespace works.
    assert second.torch_ops().namespace != "pattn_test_conflict"


def test_an_op_pattn_did_not_register_is_an_error(artifact_path):
    torch = _torch()
    library = torch.library.Library("pattn_test_foreign", "DEF")
    library.define("decode_step(Tensor cache, Tensor seq_lens) -> ()")
    try:
        with pytest.raises(pattn.TorchOpError,
                           match=r"torch already has an op "
                                 r"pattn_test_foreign::decode_step that pattn "
                                 r"did not register"):
            pattn.load(artifact_path).torch_ops(
                namespace="pattn_test_foreign")
    finally:
        library._destroy()


@pytest.mark.parametrize("function, arg, message", [
    ("f", "k.pages", r"function 'f' cannot be a torch op: its argument "
     r"'k.pages' is not an ASCII identifier"),
    ("f", "0", r"its argument '0' is not an ASCII identifier"),
    ("f", "lambda", r"its argument 'lambda' is not an ASCII identifier that "
     r"is not a Python keyword"),
    ("f-2", "x", r"function 'f-2' cannot be a torch op: its name is not an "
     r"ASCII identifier"),
])
def test_names_a_schema_cannot_hold_are_torch_op_errors(builder, function,
                                                        arg, message):
    torch = _torch()
    manifest = {"version": 1, "chips": ["sm_90a"], "functions": [
        {"name": "good", "symbol": "_pattn_fill",
         "args": [{"name": "out", "dtype": "f16", "shape": []}]},
        {"name": function, "symbol": "_pattn_fill",
         "args": [{"name": arg, "dtype": "f16", "shape": []}]}]}
    name = "badname_" + re.sub(r"\W", "_", function + arg)
    module = pattn.load(builder.build(name, json.dumps(manifest)))
    with pytest.raises(pattn.TorchOpError, match=message):
        module.torch_ops(namespace=f"pattn_test_{name}")
    # Nothing was registered, the good function included.
    assert not torch._C._jit_get_schemas_for_operator(
        f"pattn_test_{name}::good")


def test_without_torch_torch_ops_is_a_pattn_error(artifact_path):
    script = f"""
import sys
sys.path.insert(0, {str(PYTHON_DIR)!r})
sys.modules["torch"] = None  # import torch fails
import pattn
try:
    pattn.load({str(artifact_path)!r}).torch_ops()
except pattn.TorchOpError as error:
    print(error)
"""
    result = subprocess.run([sys.executable, "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "pattn.Module.torch_ops needs torch, which is not importable" in \
        result.stdout


# ---------------------------------------------------------------------------
# The example, compiled by pattn-compile
# ---------------------------------------------------------------------------

#: examples/decode_int4.mlir's arguments, as its func.func names them, and
#: the ones it writes (the caches' storage and the output).
EXAMPLE_ARGS = ("k_pages", "v_pages", "k_new", "v_new", "slots", "k_scale",
                "v_scale", "query", "block_table", "seq_lens", "out")
EXAMPLE_WRITTEN = {"k_pages", "v_pages", "out"}


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    torch = _torch()
    try:
        compiler = pattn.find_compiler()
    except pattn.CompileError as error:
        pytest.skip(f"needs pattn-compile for a real artifact: {error}")
    output = tmp_path_factory.mktemp("example") / "decode_int4.so"
    pattn.compile(REPO / "examples" / "decode_int4.mlir", chips="sm_90a",
                  output=output, compiler=compiler)
    # Loading maps it and runs its constructor (which looks for a driver);
    # no entry point is ever called here.
    module = pattn.load(output)
    return torch, module


def _example_tensors(torch, function, device="meta"):
    sizes = {-1: 6}
    return {spec.name: torch.empty(
        [sizes.get(d, d) for d in spec.shape],
        dtype={"i8": torch.int8, "f16": torch.float16, "f32": torch.float32,
               "i32": torch.int32, "i64": torch.int64}[spec.dtype],
        device=device) for spec in function.args}


def test_example_op_has_the_mlir_names_and_mutations(example):
    torch, module = example
    function = module.decode_step
    if function.arg_names != EXAMPLE_ARGS:
        pytest.skip(f"this pattn-compile writes manifest names "
                    f"{function.arg_names[:3]}..., not the MLIR names: it "
                    "predates named manifest arguments (rebuild it)")
    ops = module.torch_ops()
    schema = getattr(torch.ops, ops.namespace).decode_step.default._schema
    assert tuple(a.name for a in schema.arguments) == EXAMPLE_ARGS
    written = {a.name for a in schema.arguments
               if a.alias_info is not None and a.alias_info.is_write}
    if written == set(EXAMPLE_ARGS) and all(
            spec.written for spec in function.args):
        pytest.skip("this pattn-compile's manifest does not say which "
                    "arguments are written (no 'written' key): rebuild it")
    assert written == EXAMPLE_WRITTEN
    # By keyword, in any order, on meta tensors.
    tensors = _example_tensors(torch, function)
    ops.decode_step(**dict(reversed(list(tensors.items()))))


def test_example_decode_step_compiles_in_one_graph(example):
    torch, module = example
    import torch._dynamo
    import torch._dynamo.testing
    ops = module.torch_ops()
    function = module.decode_step
    tensors = _example_tensors(torch, function)
    names = function.arg_names

    def step(*args):
        values = dict(zip(names, args))
        query = values["query"] * 0.5  # a producer the op depends on
        values["query"] = query
        ops.decode_step(*[values[name] for name in names])
        return values["out"].float().mean()

    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    result = torch.compile(step, fullgraph=True, backend=counter)(
        *tensors.values())
    assert result.device.type == "meta"
    assert counter.frame_count == 1
    explained = torch._dynamo.explain(step)(*tensors.values())
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    bad = dict(tensors)
    bad["k_scale"] = torch.empty((8, 64), dtype=torch.float32, device="meta")
    with pytest.raises(pattn.ArgumentError,
                       match=r"decode_step: dimension 1 of argument "
                             rf"'{names[5]}' must be 128"):
        ops.decode_step(*bad.values())
