"""Named arguments (issue 9, item 3): a Function takes its tensors by
position and by the names its MLIR function gives them, as a Python function
does; the manifest says which arguments a function writes.

The artifacts are stand-ins built with the C compiler (test_loader.py's
ArtifactBuilder): each entry point records the C arguments it received, so
a test sees which tensor reached which slot.
"""

import json

import pytest

import pattn

import test_loader as base
from test_loader import FakeDevice, FakeTensor, Probe, STREAM
from test_loader import (artifact_path, builder, module,  # noqa: F401
                         probe)  # (fixtures)




def cache(pointer=0x1000, **kwargs):
    return FakeTensor((3, 16, 8, 64), "torch.int8", pointer, **kwargs)


def lens(pointer=0x2000, **kwargs):
    return FakeTensor((5,), "torch.int32", pointer, **kwargs)


EXPECTED = [0x1000, 0x1000, 0, 3, 16, 8, 64, 16 * 8 * 64, 8 * 64, 64, 1,
            0x2000, 0x2000, 0, 5, 1, STREAM]


@pytest.mark.parametrize("call", [
    lambda f: f(cache(), lens(), stream=STREAM),
    lambda f: f(cache(), seq_lens=lens(), stream=STREAM),
    lambda f: f(cache=cache(), seq_lens=lens(), stream=STREAM),
    lambda f: f(seq_lens=lens(), cache=cache(), stream=STREAM),
    lambda f: f(stream=STREAM, seq_lens=lens(), cache=cache()),
    lambda f: f(**{"seq_lens": lens(), "cache": cache()}, stream=STREAM),
], ids=["positional", "mixed", "keywords", "keywords-reordered",
        "stream-first", "unpacked"])
def test_arguments_by_position_and_by_name(module, probe, call):
    assert module.decode_step.arg_names == ("cache", "seq_lens")
    call(module.decode_step)
    assert probe.received == EXPECTED


def test_errors_name_arguments_by_their_manifest_names(module, probe):
    before = probe.calls
    with pytest.raises(pattn.ArgumentError,
                       match=r"decode_step: argument 'seq_lens' must have "
                             r"dtype i32"):
        module.decode_step(seq_lens=cache(), cache=cache(), stream=STREAM)
    with pytest.raises(pattn.ArgumentError,
                       match=r"argument 'seq_lens' is on cuda:1, but 'cache' "
                             r"is on cuda:0"):
        module.decode_step(seq_lens=lens(device=FakeDevice("cuda", 1)),
                           cache=cache(), stream=STREAM)
    assert probe.calls == before


# A function whose MLIR argument is named "stream", and one where every
# name that Python treats specially is an argument name.
STREAM_MANIFEST = {
    "version": 1, "chips": ["sm_90a"],
    "functions": [
        {"name": "decode_step", "symbol": "decode_step",
         "args": [{"name": "stream", "dtype": "i8",
                   "shape": [-1, 16, 8, 64], "written": True},
                  {"name": "seq_lens", "dtype": "i32", "shape": [-1],
                   "written": False}]},
        {"name": "fill", "symbol": "_pattn_fill",
         "args": [{"name": "self", "dtype": "f16", "shape": []}]},
    ],
}


@pytest.fixture(scope="module")
def stream_module(builder):
    path = builder.build("stream_named", json.dumps(STREAM_MANIFEST))
    Probe(path).fail_next_calls_with(0)
    return pattn.load(path), Probe(path)


def test_an_argument_named_stream_is_passed_by_position(stream_module):
    module, probe = stream_module
    function = module.decode_step
    assert function.arg_names == ("stream", "seq_lens")
    # By position it is the tensor; the keyword stream= is the launch stream.
    function(cache(), seq_lens=lens(), stream=STREAM)
    assert probe.received == EXPECTED
    function(cache(), lens(), stream=STREAM)
    assert probe.received == EXPECTED
    before = probe.calls
    # stream= never binds the tensor: the argument is then missing, and the
    # error says how to pass it.
    with pytest.raises(pattn.ArgumentTypeError,
                       match=r"decode_step\(\) missing 1 required argument: "
                             r"'stream' \(it takes stream, seq_lens\); the "
                             r"argument named 'stream' is passed by position, "
                             r"since the keyword stream= is the CUDA stream"):
        function(seq_lens=lens(), stream=cache())
    with pytest.raises(pattn.ArgumentTypeError,
                       match=r"takes 2 arguments \(stream, seq_lens\), got 1; "
                             r"the argument named 'stream' is passed by "
                             r"position"):
        function(lens(), stream=cache())
    assert probe.calls == before


def test_an_argument_named_self_is_a_keyword(stream_module):
    module, probe = stream_module
    module.fill(self=FakeTensor((), "torch.float16", 0x3000), stream=STREAM)
    assert probe.received == [0x3000, 0x3000, 0, STREAM]


def test_manifest_says_which_arguments_are_written(stream_module, module):
    stream, _ = stream_module
    assert [spec.written for spec in stream.decode_step.args] == [True, False]
    # No "written" key (an older compiler): every argument may be written.
    assert stream.fill.args == (pattn.ArgSpec("self", "f16", (), True),)
    assert all(spec.written for spec in module.decode_step.args)


@pytest.mark.parametrize("name, args, message", [
    ("duplicate_names",
     [{"name": "x", "dtype": "i8", "shape": [-1, 16, 8, 64]},
      {"name": "x", "dtype": "i32", "shape": [-1]}],
     r"argument 'x' of 'f' is listed twice: argument names are unique"),
    ("written_string",
     [{"name": "x", "dtype": "i8", "shape": [4], "written": "yes"}],
     r"argument 'x' of 'f' has 'written' 'yes'; it must be true or false"),
    ("written_number",
     [{"name": "x", "dtype": "i8", "shape": [4], "written": 1}],
     r"argument 'x' of 'f' has 'written' 1; it must be true or false"),
    ("written_null",
     [{"name": "x", "dtype": "i8", "shape": [4], "written": None}],
     r"has 'written' None"),
])
def test_malformed_argument_entries_are_load_errors(builder, name, args,
                                                    message):
    manifest = {"version": 1, "chips": ["sm_90a"], "functions": [
        {"name": "f", "symbol": "decode_step", "args": args}]}
    path = builder.build(f"named_{name}", json.dumps(manifest))
    with pytest.raises(pattn.LoadError, match=message):
        pattn.load(path)


class StoragelessTensor(FakeTensor):
    """What a meta or fake tensor shows: no data pointer."""

    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that "
                           "doesn't have storage")


def meta(shape, dtype):
    return StoragelessTensor(shape, dtype, 0, device=FakeDevice("meta"))


def test_check_fake_checks_what_a_tensor_without_storage_shows(module,
                                                               probe):
    function = module.decode_step
    before = probe.calls
    function.check_fake(meta((3, 16, 8, 64), "torch.int8"),
                        seq_lens=meta((5,), "torch.int32"))
    for args, kwargs, message in [
        ((meta((3, 16, 4, 64), "torch.int8"), meta((5,), "torch.int32")), {},
         r"dimension 2 of argument 'cache' must be 8"),
        ((meta((3, 16, 8, 64), "torch.int8"),), {},
         r"takes 2 arguments \(cache, seq_lens\), got 1"),
        ((), {"cache": meta((3, 16, 8, 64), "torch.int8"),
              "seq_lens": meta((5,), "torch.float32")},
         r"argument 'seq_lens' must have dtype i32"),
        ((meta((3, 16, 8, 64), "torch.int8"),
          StoragelessTensor((5,), "torch.int32", 0)), {},
         r"argument 'seq_lens' is on cuda:0, but 'cache' is on meta"),
        ((StoragelessTensor((3, 16, 8, 64), "torch.int8", 0,
                            device=FakeDevice("cpu")),
          meta((5,), "torch.int32")), {},
         r"argument 'cache' is on cpu, expected a CUDA device"),
        ((meta((3, 16, 8, 64), "torch.int8"),
          StoragelessTensor((5,), "torch.int32", 0, device=FakeDevice("meta"),
                            contiguous=False)), {},
         r"argument 'seq_lens' must be contiguous"),
    ]:
        with pytest.raises(pattn.ArgumentError, match=message):
            function.check_fake(*args, **kwargs)
    assert probe.calls == before, "check_fake launches nothing"
