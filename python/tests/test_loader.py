"""Tests of pattn's Python package: compile(), load() and calling functions.

Most run on any machine with a C compiler: they build stand-in artifacts
(a manifest and entry points with the expanded-memref ABI, linked against a
stand-in runtime the way real artifacts link libpattn_runtime.so) and call
them with small fake tensors. Tests that need more (torch, a CUDA device,
pattn-compile, the built runtime) skip, saying what is missing.
"""

import ctypes
import json
import math
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import threading

import pytest

import pattn
from pattn import _compiler

REPO = pathlib.Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------
# Stand-ins
# ---------------------------------------------------------------------------


class FakeDevice:
    """What the loader reads of a torch.device."""

    def __init__(self, type_, index=None):
        self.type = type_
        self.index = index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class FakeTensor:
    """What the loader reads of a torch tensor."""

    def __init__(self, shape, dtype, pointer, device=FakeDevice("cuda", 0),
                 contiguous=True):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device
        self._pointer = pointer
        self._contiguous = contiguous

    def data_ptr(self):
        return self._pointer

    def is_contiguous(self):
        return self._contiguous


STREAM = 0x5EA

MANIFEST = {
    "version": 1,
    "chips": ["sm_80", "sm_90a"],
    "functions": [
        {"name": "decode_step", "symbol": "decode_step",
         "args": [{"name": "cache", "dtype": "i8", "shape": [-1, 16, 8, 64]},
                  {"name": "seq_lens", "dtype": "i32", "shape": [-1]}]},
        {"name": "fill", "symbol": "_pattn_fill",
         "args": [{"name": "out", "dtype": "f16", "shape": []}]},
    ],
}

# Stands in for libpattn_runtime.so: the per-thread sticky error the entry
# points return. Named apart from the real one, whose soname the dynamic
# loader would otherwise match if both end up in one process.
RUNTIME_SOURCE = r"""
#include <stdint.h>
#include <string.h>

static _Thread_local int32_t pending;
static _Thread_local char message[512];

int32_t pattnRuntimeRecordError(int32_t status, const char *text) {
  if (status != 0 && pending == 0) {
    pending = status;
    strncpy(message, text, sizeof(message) - 1);
  }
  return status;
}

int32_t pattnRuntimeTakeStatus(void) {
  int32_t status = pending;
  pending = 0;
  return status;
}

const char *pattnRuntimeLastErrorMessage(void) { return message; }

int32_t device_errors; /* a test plays the kernels by setting it */

int32_t pattnRuntimeTakeDeviceErrors(void) {
  int32_t bits = device_errors;
  device_errors = 0;
  return bits;
}

const char *pattnStatusString(int32_t status) {
  switch (status) {
  case 0: return "PATTN_SUCCESS";
  case 3: return "PATTN_ERROR_NO_BINARY_FOR_DEVICE";
  case 4: return "PATTN_ERROR_LAUNCH";
  default: return "PATTN_ERROR_UNKNOWN";
  }
}
"""

# An artifact for MANIFEST: each entry point records the C arguments it
# received in `received` and fails with `next_status` if it is nonzero.
ARTIFACT_SOURCE = r"""
#include <stdint.h>

#ifdef NO_RUNTIME
static int32_t pending;
static int32_t pattnRuntimeRecordError(int32_t status, const char *message) {
  (void)message;
  pending = status;
  return status;
}
static int32_t pattnRuntimeTakeStatus(void) { return pending; }
#else
int32_t pattnRuntimeRecordError(int32_t status, const char *message);
int32_t pattnRuntimeTakeStatus(void);
#endif

#ifdef MANIFEST
const char *pattn_manifest(void) { return MANIFEST; }
#endif

int64_t received[32];
int32_t received_count;
int32_t calls;
int32_t next_status;

static void take(int64_t value) { received[received_count++] = value; }

static int32_t finish(void) {
  ++calls;
  if (next_status == 3)
    pattnRuntimeRecordError(3, "no kernel binary for this GPU (sm_75)");
  else if (next_status != 0)
    pattnRuntimeRecordError(next_status,
        "cuLaunchKernel(pattn_decode_portable) failed: "
        "CUDA_ERROR_INVALID_VALUE (invalid argument)");
  return pattnRuntimeTakeStatus();
}

int32_t decode_step(void *cache_allocated, void *cache_aligned,
                    int64_t cache_offset, int64_t c0, int64_t c1, int64_t c2,
                    int64_t c3, int64_t cs0, int64_t cs1, int64_t cs2,
                    int64_t cs3, void *lens_allocated, void *lens_aligned,
                    int64_t lens_offset, int64_t l0, int64_t ls0,
                    void *stream) {
  int64_t values[] = {
      (int64_t)(intptr_t)cache_allocated, (int64_t)(intptr_t)cache_aligned,
      cache_offset, c0, c1, c2, c3, cs0, cs1, cs2, cs3,
      (int64_t)(intptr_t)lens_allocated, (int64_t)(intptr_t)lens_aligned,
      lens_offset, l0, ls0, (int64_t)(intptr_t)stream};
  received_count = 0;
  for (unsigned i = 0; i < sizeof(values) / sizeof(values[0]); ++i)
    take(values[i]);
  return finish();
}

int32_t _pattn_fill(void *out_allocated, void *out_aligned,
                    int64_t out_offset, void *stream) {
  received_count = 0;
  take((int64_t)(intptr_t)out_allocated);
  take((int64_t)(intptr_t)out_aligned);
  take(out_offset);
  take((int64_t)(intptr_t)stream);
  return finish();
}
"""


def _c_string(text):
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"')
               .replace("\n", "\\n"))
    return f'"{escaped}"'


def _run(command):
    result = subprocess.run(command, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, check=False)
    assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout}"


class ArtifactBuilder:
    """Builds stand-in artifacts in one directory, linked against one
    stand-in runtime."""

    def __init__(self, compiler, directory):
        self.compiler = compiler
        self.directory = directory
        runtime_c = directory / "runtime.c"
        runtime_c.write_text(RUNTIME_SOURCE)
        _run([compiler, "-shared", "-fPIC", "-o",
              str(directory / "libpattn_fake_runtime.so"), str(runtime_c)])

    def build(self, name, manifest_text=None, with_runtime=True):
        """Builds `name`.so; manifest_text=None leaves pattn_manifest out."""
        source = self.directory / f"{name}.c"
        header = ("" if manifest_text is None else
                  f"#define MANIFEST {_c_string(manifest_text)}\n")
        if not with_runtime:
            header += "#define NO_RUNTIME\n"
        source.write_text(header + ARTIFACT_SOURCE)
        output = self.directory / f"{name}.so"
        command = [self.compiler, "-shared", "-fPIC", "-o", str(output),
                   str(source)]
        if with_runtime:
            command += [f"-L{self.directory}", "-lpattn_fake_runtime",
                        f"-Wl,-rpath,{self.directory}"]
        _run(command)
        return output


@pytest.fixture(scope="session")
def builder(c_compiler, tmp_path_factory):
    return ArtifactBuilder(c_compiler, tmp_path_factory.mktemp("artifacts"))


@pytest.fixture(scope="session")
def artifact_path(builder):
    return builder.build("artifact", json.dumps(MANIFEST))


class Probe:
    """Reads and scripts the stand-in artifact's globals."""

    def __init__(self, path):
        # The same library the module loaded, so the same globals.
        self._library = ctypes.CDLL(str(path))

    def _int(self, ctype, name):
        return ctype.in_dll(self._library, name)

    @property
    def calls(self):
        return self._int(ctypes.c_int32, "calls").value

    @property
    def received(self):
        count = self._int(ctypes.c_int32, "received_count").value
        values = (ctypes.c_int64 * 32).in_dll(self._library, "received")
        return [values[i] for i in range(count)]

    def fail_next_calls_with(self, status):
        self._int(ctypes.c_int32, "next_status").value = status

    def raise_device_errors(self, bits):
        self._int(ctypes.c_int32, "device_errors").value = bits


@pytest.fixture
def module(artifact_path):
    module = pattn.load(artifact_path)
    Probe(artifact_path).fail_next_calls_with(0)
    return module


@pytest.fixture
def probe(artifact_path):
    return Probe(artifact_path)


def cache(shape=(3, 16, 8, 64), dtype="torch.int8", pointer=0x1000, **kwargs):
    return FakeTensor(shape, dtype, pointer, **kwargs)


def seq_lens(shape=(5,), dtype="torch.int32", pointer=0x2000, **kwargs):
    return FakeTensor(shape, dtype, pointer, **kwargs)


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


def test_manifest_is_read(module, artifact_path):
    assert module.path == str(artifact_path)
    assert module.chips == ("sm_80", "sm_90a")
    assert list(module.functions) == ["decode_step", "fill"]
    decode = module.decode_step
    assert decode is module.functions["decode_step"]
    assert decode.args == (
        pattn.ArgSpec("cache", "i8", (-1, 16, 8, 64)),
        pattn.ArgSpec("seq_lens", "i32", (-1,)),
    )
    assert repr(decode) == ("<pattn.Function decode_step(cache: i8[?, 16, 8, "
                            "64], seq_lens: i32[?])>")
    assert "fill" in dir(module)
    with pytest.raises(AttributeError, match="has no function 'prefill'"):
        module.prefill  # noqa: B018


@pytest.mark.parametrize("name, manifest, message", [
    ("no_manifest", None, "does not export pattn_manifest"),
    ("not_json", "{not json", "bad manifest"),
    ("version_2", json.dumps({**MANIFEST, "version": 2}),
     "version 2 is not supported"),
    ("unknown_dtype", json.dumps({**MANIFEST, "functions": [
        {"name": "f", "symbol": "decode_step",
         "args": [{"name": "x", "dtype": "f64", "shape": [4]}]}]}),
     "argument 'x' of 'f' has dtype 'f64'"),
    ("missing_symbol", json.dumps({**MANIFEST, "functions": [
        {"name": "f", "symbol": "f_missing", "args": []}]}),
     "names entry point 'f_missing', which the library does not export"),
    ("incomplete_entry", json.dumps({**MANIFEST, "functions": [
        {"name": "f"}]}),
     "needs a name, a symbol and args"),
    ("short_strides", json.dumps({**MANIFEST, "functions": [
        {"name": "f", "symbol": "decode_step",
         "args": [{"name": "x", "dtype": "i8", "shape": [-1, 4],
                   "strides": [16]}]}]}),
     "argument 'x' of 'f' has strides \\[16\\]; they must be one size"),
])
def test_broken_artifacts_are_load_errors(builder, name, manifest, message):
    path = builder.build(name, manifest)
    with pytest.raises(pattn.LoadError, match=message):
        pattn.load(path)


def test_artifact_without_runtime_is_a_load_error(builder):
    path = builder.build("no_runtime", json.dumps(MANIFEST),
                         with_runtime=False)
    with pytest.raises(pattn.LoadError,
                       match="pattnStatusString not found; a pattn artifact "
                             "links libpattn_runtime.so"):
        pattn.load(path)


def test_missing_file_is_a_load_error(tmp_path):
    with pytest.raises(pattn.LoadError, match="cannot load"):
        pattn.load(tmp_path / "missing.so")


# ---------------------------------------------------------------------------
# Calling
# ---------------------------------------------------------------------------


def test_expanded_arguments_and_stream_reach_the_function(module, probe):
    module.decode_step(cache(), seq_lens(), stream=STREAM)
    assert probe.calls >= 1
    assert probe.received == [
        0x1000, 0x1000, 0, 3, 16, 8, 64, 16 * 8 * 64, 8 * 64, 64, 1,
        0x2000, 0x2000, 0, 5, 1,
        STREAM,
    ]


def test_rank_zero_and_symbol_mapping(module, probe):
    module.fill(FakeTensor((), "torch.float16", 0x3000), stream=STREAM)
    assert probe.received == [0x3000, 0x3000, 0, STREAM]


def test_strides_ignore_size_one_dimensions(module, probe):
    module.decode_step(cache(shape=(1, 16, 8, 64)), seq_lens(shape=(1,)),
                       stream=STREAM)
    assert probe.received[3:11] == [1, 16, 8, 64, 16 * 8 * 64, 8 * 64, 64, 1]


def test_uint8_is_accepted_for_raw_i8_storage(module, probe):
    module.decode_step(cache(dtype="torch.uint8"), seq_lens(), stream=STREAM)
    assert probe.received[0] == 0x1000


def test_stream_objects_are_accepted(module, probe):
    class Stream:
        cuda_stream = 0xABC
        device = FakeDevice("cuda", 0)

    module.decode_step(cache(), seq_lens(), stream=Stream())
    assert probe.received[-1] == 0xABC


@pytest.mark.parametrize("make_args, stream, message", [
    (lambda: (cache(),), STREAM,
     r"decode_step\(\) takes 2 arguments \(cache, seq_lens\), got 1"),
    (lambda: (cache(), seq_lens(), seq_lens()), STREAM,
     r"takes 2 arguments .*, got 3"),
    (lambda: (cache(dtype="torch.float16"), seq_lens()), STREAM,
     r"decode_step: argument 'cache' must have dtype i8 \(torch.int8 or "
     r"torch.uint8\), got torch.float16"),
    (lambda: (cache(), seq_lens(dtype="torch.int64")), STREAM,
     r"argument 'seq_lens' must have dtype i32 \(torch.int32\), got "
     r"torch.int64"),
    (lambda: (cache(shape=(3, 16, 8)), seq_lens()), STREAM,
     r"argument 'cache' must have rank 4 \(shape \[\?, 16, 8, 64\]\), got "
     r"shape \[3, 16, 8\]"),
    (lambda: (cache(shape=(3, 16, 4, 64)), seq_lens()), STREAM,
     r"dimension 2 of argument 'cache' must be 8 \(shape \[\?, 16, 8, 64\]\)"
     r", got shape \[3, 16, 4, 64\]"),
    (lambda: (cache(contiguous=False), seq_lens()), STREAM,
     r"argument 'cache' must be contiguous"),
    (lambda: (cache(device=FakeDevice("cpu")), seq_lens()), STREAM,
     r"argument 'cache' is on cpu, expected a CUDA device"),
    (lambda: (cache(), seq_lens(device=FakeDevice("cuda", 1))), STREAM,
     r"argument 'seq_lens' is on cuda:1, but 'cache' is on cuda:0; all "
     r"arguments must be on one device"),
    (lambda: (cache(), seq_lens(pointer=0)), STREAM,
     r"argument 'seq_lens' has a null data pointer"),
    (lambda: (cache(), [1, 2, 3]), STREAM,
     r"argument 'seq_lens' must be a tensor with data_ptr\(\), shape, "
     r"dtype, device and is_contiguous\(\); got list"),
    (lambda: (cache(), seq_lens()), "stream", r"stream must be an int handle"),
    (lambda: (cache(), seq_lens()),
     type("Stream", (), {"cuda_stream": 1, "device": FakeDevice("cuda", 1)}),
     r"the stream is on cuda:1, but the arguments are on cuda:0"),
])
def test_bad_arguments_never_reach_the_function(module, probe, make_args,
                                                stream, message):
    before = probe.calls
    with pytest.raises(pattn.ArgumentError, match=message) as caught:
        module.decode_step(*make_args(), stream=stream)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, pattn.Error)
    assert probe.calls == before


def test_empty_tensors_may_have_null_pointers(module, probe):
    module.decode_step(cache(shape=(0, 16, 8, 64), pointer=0),
                       seq_lens(shape=(0,), pointer=0), stream=STREAM)
    assert probe.received[:4] == [0, 0, 0, 0]


def test_nonzero_status_raises_launch_error(module, probe):
    probe.fail_next_calls_with(4)
    with pytest.raises(pattn.LaunchError) as caught:
        module.decode_step(cache(), seq_lens(), stream=STREAM)
    error = caught.value
    assert isinstance(error, RuntimeError) and isinstance(error, pattn.Error)
    assert error.function == "decode_step"
    assert error.status == 4
    assert error.status_name == "PATTN_ERROR_LAUNCH"
    assert error.detail == ("cuLaunchKernel(pattn_decode_portable) failed: "
                            "CUDA_ERROR_INVALID_VALUE (invalid argument)")
    assert str(error) == f"decode_step failed with PATTN_ERROR_LAUNCH: " \
                         f"{error.detail}"

    # The status was taken: the next call starts clean.
    probe.fail_next_calls_with(0)
    module.decode_step(cache(), seq_lens(), stream=STREAM)


def test_device_errors_are_taken_once_and_named(module, probe):
    assert module.take_device_errors() == 0
    module.check_device_errors()  # nothing raised: no exception

    probe.raise_device_errors(pattn.DEVICE_ERROR_SLOT_OUT_OF_RANGE)
    assert module.take_device_errors() == 1
    assert module.take_device_errors() == 0, "taking clears the bits"

    probe.raise_device_errors(1 | 0x40)
    with pytest.raises(pattn.DeviceError) as caught:
        module.check_device_errors()
    error = caught.value
    assert isinstance(error, RuntimeError) and isinstance(error, pattn.Error)
    assert error.bits == 0x41
    assert error.reasons == (
        pattn.DEVICE_ERRORS[pattn.DEVICE_ERROR_SLOT_OUT_OF_RANGE],
        "unknown device error bits 0x40")
    assert "slot was below -1 or past the cache's pages" in str(error)
    module.check_device_errors()  # cleared by the check

    probe.raise_device_errors(pattn.DEVICE_ERROR_POSITION_OUT_OF_RANGE)
    with pytest.raises(pattn.DeviceError, match="position was below 0 or "
                       "past its cos/sin tables"):
        module.check_device_errors()
    assert pattn.DEVICE_ERROR_POSITION_OUT_OF_RANGE == 2  # Runtime.h


def test_errors_are_read_on_the_calling_thread(module, probe):
    probe.fail_next_calls_with(4)
    caught = []

    def call():
        try:
            module.decode_step(cache(), seq_lens(), stream=STREAM)
        except pattn.LaunchError as error:
            caught.append(error)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    assert len(caught) == 1
    assert "cuLaunchKernel(pattn_decode_portable)" in caught[0].detail


def test_missing_binary_lists_the_artifact_chips(module, probe):
    probe.fail_next_calls_with(3)
    with pytest.raises(pattn.LaunchError,
                       match=r"PATTN_ERROR_NO_BINARY_FOR_DEVICE: no kernel "
                             r"binary for this GPU \(sm_75\) \(this artifact "
                             r"holds sm_80, sm_90a\)"):
        module.decode_step(cache(), seq_lens(), stream=STREAM)


# ---------------------------------------------------------------------------
# Real torch tensors (CPU: the device check is the only CUDA part)
# ---------------------------------------------------------------------------


def _torch():
    try:
        import torch
    except ImportError as error:
        pytest.skip(f"torch is not installed ({error})")
    return torch


class OnCuda:
    """A CPU tensor that claims a CUDA device, so that real torch shapes,
    dtypes and pointers go through the loader without a GPU."""

    def __init__(self, tensor):
        self._tensor = tensor
        self.device = FakeDevice("cuda", 0)

    def __getattr__(self, name):
        return getattr(self._tensor, name)


def test_real_torch_tensors(module, probe):
    torch = _torch()
    pages = torch.zeros((2, 16, 8, 64), dtype=torch.uint8)
    lens = torch.tensor([3, 4, 5], dtype=torch.int32)
    module.decode_step(OnCuda(pages), OnCuda(lens), stream=STREAM)
    assert probe.received == [
        pages.data_ptr(), pages.data_ptr(), 0, 2, 16, 8, 64,
        16 * 8 * 64, 8 * 64, 64, 1,
        lens.data_ptr(), lens.data_ptr(), 0, 3, 1, STREAM,
    ]
    # A slice's data_ptr already includes its offset.
    module.decode_step(OnCuda(pages[1:]), OnCuda(lens[1:]), stream=STREAM)
    assert probe.received[0] == pages[1].data_ptr()

    with pytest.raises(pattn.ArgumentError, match="is on cpu"):
        module.decode_step(pages, lens, stream=STREAM)
    with pytest.raises(pattn.ArgumentError, match="must be contiguous"):
        strided = torch.zeros((2, 16, 64, 8), dtype=torch.int8)
        module.decode_step(OnCuda(strided.transpose(2, 3)), OnCuda(lens),
                           stream=STREAM)
    with pytest.raises(pattn.ArgumentError, match="got torch.float32"):
        module.decode_step(OnCuda(pages.float()), OnCuda(lens), stream=STREAM)


# ---------------------------------------------------------------------------
# compile()
# ---------------------------------------------------------------------------

FAKE_COMPILER = """#!{python}
# Records its command line; then fails, succeeds, or succeeds silently.
# "broken" plays a copy that cannot run (a GPU machine without libMLIR).
import json, os, sys
mode = os.environ.get("FAKE_COMPILER_MODE", "ok")
if mode == "broken":
    sys.stderr.write("pattn-compile: error while loading shared libraries: "
                     "libMLIR.so.22.1: cannot open shared object file\\n")
    sys.exit(127)
with open(os.environ["FAKE_COMPILER_LOG"], "w") as log:
    json.dump(sys.argv[1:], log)
if mode == "fail":
    sys.stderr.write("input.mlir:3:5: error: 'pattn.paged_attention' op "
                     "head_dim must be a multiple of 8\\n")
    sys.exit(1)
if mode == "ok":
    with open(sys.argv[sys.argv.index("-o") + 1], "wb") as out:
        out.write(b"artifact")
"""


@pytest.fixture
def fake_compiler(tmp_path, monkeypatch):
    path = tmp_path / "pattn-compile"
    path.write_text(FAKE_COMPILER.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "argv.json"
    monkeypatch.setenv("FAKE_COMPILER_LOG", str(log))
    monkeypatch.delenv("PATTN_COMPILE", raising=False)
    return path, log


MLIR = "func.func @f() {\n  return\n}\n"


def test_compile_runs_the_compiler(fake_compiler, tmp_path):
    compiler, log = fake_compiler
    output = tmp_path / "out.so"
    result = pattn.compile(MLIR, chips=("sm_80", "sm_90a"), output=output,
                           compiler=compiler)
    assert result == str(output)
    assert output.read_bytes() == b"artifact"
    argv = json.loads(log.read_text())
    assert argv[1:] == ["--chips=sm_80,sm_90a", "-o", str(output)]
    assert argv[0].endswith("input.mlir")


def test_compile_can_turn_hardware_conversions_off(fake_compiler, tmp_path,
                                                  monkeypatch):
    compiler, log = fake_compiler
    output = tmp_path / "soft.so"
    pattn.compile(MLIR, chips="sm_90a", output=output, compiler=compiler,
                  hardware_conversions=False)
    argv = json.loads(log.read_text())
    assert argv[1:] == ["--chips=sm_90a", "-o", str(output),
                        "--hardware-conversions=false"]
    # The artifact cache keeps the two variants apart.
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(tmp_path / "cache"))
    hard = pattn.compile(MLIR, chips="sm_90a", compiler=compiler)
    soft = pattn.compile(MLIR, chips="sm_90a", compiler=compiler,
                         hardware_conversions=False)
    assert hard != soft


def test_compile_passes_the_backend_and_the_fold(fake_compiler, tmp_path):
    compiler, log = fake_compiler
    output = tmp_path / "out.so"
    pattn.compile(MLIR, chips="sm_90a", output=output, compiler=compiler,
                  backend="portable", fold=False)
    argv = json.loads(log.read_text())
    assert argv[1:] == ["--chips=sm_90a", "-o", str(output),
                        "--backend=portable", "--fold=false"]
    pattn.compile(MLIR, chips="sm_90a", output=output, compiler=compiler,
                  backend="xqa", hardware_conversions=False)
    argv = json.loads(log.read_text())
    assert argv[1:] == ["--chips=sm_90a", "-o", str(output),
                        "--hardware-conversions=false", "--backend=xqa"]
    # The defaults add nothing to the command line.
    pattn.compile(MLIR, chips="sm_90a", output=output, compiler=compiler,
                  backend="auto", fold=True)
    assert json.loads(log.read_text())[1:] == [
        "--chips=sm_90a", "-o", str(output)]


def test_compile_passes_the_prompt_kernel(fake_compiler, tmp_path,
                                          monkeypatch):
    compiler, log = fake_compiler
    output = tmp_path / "out.so"
    pattn.compile(MLIR, chips="sm_90a", output=output, compiler=compiler,
                  prompt_kernel="xqa")
    assert json.loads(log.read_text())[1:] == [
        "--chips=sm_90a", "-o", str(output), "--prompt-kernel=xqa"]
    # The default (prefill) adds nothing; the cache keeps the two apart.
    pattn.compile(MLIR, chips="sm_90a", output=output, compiler=compiler,
                  prompt_kernel="prefill")
    assert json.loads(log.read_text())[1:] == [
        "--chips=sm_90a", "-o", str(output)]
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(tmp_path / "cache"))
    prefill = pattn.compile(MLIR, chips="sm_90a", compiler=compiler)
    tiles = pattn.compile(MLIR, chips="sm_90a", compiler=compiler,
                          prompt_kernel="xqa")
    assert tiles != prefill
    # Artifacts cached before the default changed hold xqa's prompt
    # kernels: the key names the prompt kernel at the default too.
    assert pattn.compile(MLIR, chips="sm_90a", compiler=compiler,
                         prompt_kernel="prefill") == prefill


@pytest.mark.parametrize("option,value,flag", [
    ("xqa_keys_per_tile", 128, "--xqa-keys-per-tile=128"),
    ("xqa_stages", 6, "--xqa-stages=6"),
    ("xqa_copy_warp", True, "--xqa-copy-warp"),
    ("xqa_scores_ahead", True, "--xqa-scores-ahead"),
    ("xqa_cluster_heads", 8, "--xqa-cluster-heads=8"),
    ("xqa_cluster_splits", 4, "--xqa-cluster-splits=4"),
    ("xqa_merge_unsplit", True, "--xqa-merge-unsplit")])
def test_compile_passes_the_xqa_plan_request(fake_compiler, tmp_path,
                                             monkeypatch, option, value, flag):
    compiler, log = fake_compiler
    output = tmp_path / "out.so"
    pattn.compile(MLIR, chips="sm_90a", output=output, compiler=compiler,
                  **{option: value})
    assert json.loads(log.read_text())[1:] == [
        "--chips=sm_90a", "-o", str(output), flag]
    # 0 (the planner's choice; no copy warp) adds nothing; the cache keeps
    # them apart.
    pattn.compile(MLIR, chips="sm_90a", output=output, compiler=compiler,
                  **{option: 0})
    assert json.loads(log.read_text())[1:] == [
        "--chips=sm_90a", "-o", str(output)]
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(tmp_path / "cache"))
    planned = pattn.compile(MLIR, chips="sm_90a", compiler=compiler)
    asked = pattn.compile(MLIR, chips="sm_90a", compiler=compiler,
                          **{option: value})
    assert planned != asked


def test_compile_passes_tile_and_stages_together(fake_compiler, tmp_path):
    compiler, log = fake_compiler
    output = tmp_path / "out.so"
    pattn.compile(MLIR, chips="sm_90a", output=output, compiler=compiler,
                  xqa_keys_per_tile=64, xqa_stages=8)
    assert json.loads(log.read_text())[1:] == [
        "--chips=sm_90a", "-o", str(output), "--xqa-keys-per-tile=64",
        "--xqa-stages=8"]


@pytest.mark.parametrize("option,value,error", [
    ("xqa_keys_per_tile", 48, pattn.ArgumentError),
    ("xqa_keys_per_tile", 256, pattn.ArgumentError),
    ("xqa_keys_per_tile", -16, pattn.ArgumentError),
    ("xqa_keys_per_tile", "64", pattn.ArgumentTypeError),
    ("xqa_keys_per_tile", True, pattn.ArgumentTypeError),
    ("xqa_keys_per_tile", 64.0, pattn.ArgumentTypeError),
    ("xqa_stages", 1, pattn.ArgumentError),
    ("xqa_stages", 9, pattn.ArgumentError),
    ("xqa_stages", -2, pattn.ArgumentError),
    ("xqa_stages", "4", pattn.ArgumentTypeError),
    ("xqa_stages", True, pattn.ArgumentTypeError),
    ("xqa_stages", 4.0, pattn.ArgumentTypeError),
    ("xqa_copy_warp", "yes", pattn.ArgumentTypeError),
    ("xqa_copy_warp", 2, pattn.ArgumentTypeError),
    ("xqa_scores_ahead", "yes", pattn.ArgumentTypeError),
    ("xqa_scores_ahead", 2, pattn.ArgumentTypeError),
    ("xqa_cluster_heads", 3, pattn.ArgumentError),
    ("xqa_cluster_heads", 16, pattn.ArgumentError),
    ("xqa_cluster_heads", -2, pattn.ArgumentError),
    ("xqa_cluster_heads", "8", pattn.ArgumentTypeError),
    ("xqa_cluster_heads", True, pattn.ArgumentTypeError),
    ("xqa_cluster_splits", 6, pattn.ArgumentError),
    ("xqa_cluster_splits", 16, pattn.ArgumentError),
    ("xqa_cluster_splits", "8", pattn.ArgumentTypeError),
    ("xqa_merge_unsplit", "yes", pattn.ArgumentTypeError),
    ("xqa_merge_unsplit", 2, pattn.ArgumentTypeError)])
def test_compile_rejects_a_bad_xqa_plan_request(fake_compiler, option, value,
                                                error):
    compiler, log = fake_compiler
    with pytest.raises(error, match=option):
        pattn.compile(MLIR, chips="sm_90a", compiler=compiler,
                      **{option: value})
    assert not log.exists()


@pytest.mark.parametrize("kernel", ["bogus", "Prefill", "", None, 1])
def test_compile_rejects_an_unknown_prompt_kernel(fake_compiler, tmp_path,
                                                  kernel):
    compiler, log = fake_compiler
    with pytest.raises(pattn.CompileError,
                       match="unknown prompt_kernel .*expected one of prefill, "
                             "prefill-mma-sync, prefill-wgmma, xqa"):
        pattn.compile(MLIR, chips="sm_90a", compiler=compiler,
                      prompt_kernel=kernel)
    assert not log.exists()


@pytest.mark.parametrize("backend", ["bogus", "XQA", "", None])
def test_compile_rejects_an_unknown_backend_before_running(fake_compiler,
                                                          tmp_path,
                                                          monkeypatch,
                                                          backend):
    compiler, log = fake_compiler
    cache = tmp_path / "artifacts"
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(cache))
    with pytest.raises(pattn.CompileError,
                       match="unknown backend .*expected one of auto, xqa, "
                             "portable"):
        pattn.compile(MLIR, chips="sm_90a", compiler=compiler,
                      backend=backend)
    # Nothing ran and nothing was cached.
    assert not log.exists()
    assert not cache.exists()


def test_artifact_cache_keeps_backends_and_folds_apart(fake_compiler,
                                                       tmp_path, monkeypatch):
    compiler, log = fake_compiler
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    variants = [{}, {"backend": "xqa"}, {"backend": "portable"},
                {"fold": False}, {"backend": "portable", "fold": False}]
    paths = [pattn.compile(MLIR, chips="sm_90a", compiler=compiler, **options)
             for options in variants]
    assert len(set(paths)) == len(variants)
    # Spelling out a default finds the default's entry without compiling.
    log.unlink()
    again = pattn.compile(MLIR, chips="sm_90a", compiler=compiler,
                          backend="auto", fold=True)
    assert again == paths[0] and not log.exists()
    # The key names the backend even at its default: an artifact cached
    # under the chips alone (when pattn-compile forced the portable
    # backend) is not taken for an "auto" one.
    old_key = _compiler._cached_artifact(
        MLIR, "sm_90a", _compiler._compiler_identity(str(compiler)),
        os.environ["PATTN_ARTIFACT_DIR"])
    assert old_key not in paths


def test_compile_takes_a_file_and_makes_a_temporary_output(fake_compiler,
                                                           tmp_path):
    compiler, log = fake_compiler
    source = tmp_path / "decode.mlir"
    source.write_text(MLIR)
    result = pattn.compile(str(source), chips="sm_90a", compiler=compiler)
    try:
        assert pathlib.Path(result).read_bytes() == b"artifact"
        assert json.loads(log.read_text()) == [
            str(source), "--chips=sm_90a", "-o", result]
    finally:
        os.unlink(result)


def test_compile_finds_the_compiler_through_the_environment(fake_compiler,
                                                            tmp_path,
                                                            monkeypatch):
    compiler, log = fake_compiler
    monkeypatch.setenv("PATTN_COMPILE", str(compiler))
    pattn.compile(MLIR, output=tmp_path / "out.so")
    assert json.loads(log.read_text())[1] == "--chips=sm_90a"


def test_compile_failure_carries_the_diagnostics(fake_compiler, tmp_path,
                                                 monkeypatch):
    compiler, _ = fake_compiler
    monkeypatch.setenv("FAKE_COMPILER_MODE", "fail")
    with pytest.raises(pattn.CompileError) as caught:
        pattn.compile(MLIR, compiler=compiler)
    error = caught.value
    assert isinstance(error, pattn.Error)
    assert error.returncode == 1
    assert "head_dim must be a multiple of 8" in error.stderr
    assert "head_dim must be a multiple of 8" in str(error)
    assert error.command[0] == str(compiler)
    # The temporary output is not left behind.
    assert not os.path.exists(error.command[-1])


def test_compile_without_output_is_an_error(fake_compiler, monkeypatch):
    compiler, _ = fake_compiler
    monkeypatch.setenv("FAKE_COMPILER_MODE", "silent")
    with pytest.raises(pattn.CompileError, match="wrote no artifact"):
        pattn.compile(MLIR, compiler=compiler)


def test_compile_reports_missing_inputs(fake_compiler, tmp_path, monkeypatch):
    compiler, _ = fake_compiler
    with pytest.raises(pattn.CompileError, match="no such MLIR file"):
        pattn.compile(str(tmp_path / "missing.mlir"), compiler=compiler)
    with pytest.raises(pattn.CompileError,
                       match="compiler= names .*missing-compiler, which does "
                             "not exist"):
        pattn.compile(MLIR, compiler=tmp_path / "missing-compiler")
    garbage = tmp_path / "garbage-compiler"
    garbage.write_bytes(b"\x00not a program")
    garbage.chmod(0o755)
    with pytest.raises(pattn.CompileError, match="cannot run .*garbage"):
        pattn.compile(MLIR, compiler=garbage)
    monkeypatch.setattr(_compiler, "_REPO_COMPILER",
                        tmp_path / "no-build" / "pattn-compile")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(pattn.CompileError, match="pattn-compile not found"):
        pattn.compile(MLIR)


# ---------------------------------------------------------------------------
# With the real compiler: an artifact without a driver
# ---------------------------------------------------------------------------

NO_DRIVER_SCRIPT = """
import json, sys
sys.path.insert(0, {python_dir!r})
import pattn

class Device:
    type, index = "cuda", 0
    def __str__(self):
        return "cuda:0"

class Tensor:
    def __init__(self, spec, pointer):
        self.shape = tuple(1 if d < 0 else d for d in spec.shape)
        self.dtype = {dtypes!r}[spec.dtype]
        self.device = Device()
        self.pointer = pointer
    def data_ptr(self):
        return self.pointer
    def is_contiguous(self):
        return True

module = pattn.load({artifact!r})
function = next(iter(module.functions.values()))
tensors = [Tensor(spec, 0x1000 * (i + 1)) for i, spec in enumerate(function.args)]
try:
    function(*tensors, stream=0)
    print(json.dumps({{"status": 0}}))
except pattn.LaunchError as error:
    print(json.dumps({{"status": error.status, "detail": error.detail}}))
"""


def test_compiled_example_reports_a_missing_driver(tmp_path):
    """The whole chain on a CPU machine: pattn-compile's artifact loads, its
    entry point runs its host code, and the runtime's missing-driver error
    comes back as a LaunchError. The driver path is overridden in a child
    process, so no fake pointer can ever reach a real GPU."""
    try:
        compiler = pattn.find_compiler()
    except pattn.CompileError as error:
        pytest.skip(str(error))
    artifact = pattn.compile(REPO / "examples" / "decode_int4.mlir",
                             chips=("sm_90a",), output=tmp_path / "decode.so",
                             compiler=compiler)
    dtypes = {"f16": "torch.float16", "bf16": "torch.bfloat16",
              "f32": "torch.float32", "i8": "torch.int8",
              "i32": "torch.int32", "i64": "torch.int64",
              "f8E4M3FN": "torch.float8_e4m3fn",
              "f8E5M2": "torch.float8_e5m2"}
    script = NO_DRIVER_SCRIPT.format(python_dir=str(REPO / "python"),
                                     dtypes=dtypes, artifact=artifact)
    env = dict(os.environ, PATTN_CUDA_DRIVER="/nonexistent/libcuda.so")
    result = subprocess.run([sys.executable, "-c", script], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["status"] == 1, outcome
    assert "CUDA driver not found" in outcome["detail"]
    assert "libcuda" in outcome["detail"]


def test_real_compiler_checks_the_backend(tmp_path):
    """pattn-compile itself: backend="xqa" on an op the eligibility table
    rejects is a compile error naming the failed condition."""
    try:
        compiler = pattn.find_compiler()
    except pattn.CompileError as error:
        pytest.skip(str(error))
    # The MLA example with an f16 query: the tensor-core MLA kernel takes
    # bf16 queries only.
    source = (REPO / "examples" / "mla_nvfp4.mlir").read_text()
    source = source.replace("x576xbf16>", "x576xf16>").replace(
        "x16x512xbf16>", "x16x512xf16>")
    (tmp_path / "mla.mlir").write_text(source)
    with pytest.raises(pattn.CompileError,
                       match="force=xqa, but the op is not eligible for XQA "
                       "on sm_90a: MLA query f16 is not bf16") as caught:
        pattn.compile(tmp_path / "mla.mlir", chips="sm_90a",
                      output=tmp_path / "mla.so", compiler=compiler,
                      backend="xqa")
    assert "--backend=xqa" in caught.value.command
    assert not (tmp_path / "mla.so").exists()


# ---------------------------------------------------------------------------
# GPU: a hand-written artifact over the real runtime
# ---------------------------------------------------------------------------

# What pattn-compile's host code does, written by hand: load the kernel
# image from a global constructor, look the kernel up and launch it on the
# caller's stream from the entry point, return the runtime's status.
GPU_ARTIFACT_SOURCE = r"""
#include <stddef.h>
#include <stdint.h>

void *pattnMgpuModuleLoadJIT(void *data, int optLevel);
void pattnMgpuModuleUnload(void *module);
void *pattnMgpuModuleGetFunction(void *module, const char *name);
void pattnMgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **extra, size_t paramsCount);
int32_t pattnRuntimeRecordError(int32_t status, const char *message);
int32_t pattnRuntimeTakeStatus(void);

static const char ptx[] = PTX;
static void *module;

__attribute__((constructor)) static void load(void) {
  module = pattnMgpuModuleLoadJIT((void *)ptx, 3);
}
__attribute__((destructor)) static void unload(void) {
  pattnMgpuModuleUnload(module);
}

const char *pattn_manifest(void) { return MANIFEST; }

int32_t affine(float *outAllocated, float *out, int64_t outOffset,
               int64_t outSize, int64_t outStride, float *xAllocated,
               float *x, int64_t xOffset, int64_t xSize, int64_t xStride,
               void *stream) {
  if (outSize != xSize) {
    pattnRuntimeRecordError(5, "affine: out and x differ in length");
    return pattnRuntimeTakeStatus();
  }
  unsigned n = (unsigned)xSize;
  unsigned smemWords = 64 * 1024 / 4;
  void *params[] = {&out, &x, &n, &smemWords};
  void *function = pattnMgpuModuleGetFunction(module, "pattn_test_affine");
  pattnMgpuLaunchKernel(function, (n + 255) / 256, 1, 1, 256, 1, 1, 64 * 1024,
                   stream, params, NULL, 4);
  return pattnRuntimeTakeStatus();
}
"""

GPU_MANIFEST = {
    "version": 1, "chips": ["sm_80"],
    "functions": [{"name": "affine", "symbol": "affine", "args": [
        {"name": "out", "dtype": "f32", "shape": [-1]},
        {"name": "x", "dtype": "f32", "shape": [-1]}]}],
}


@pytest.fixture(scope="module")
def gpu_module(c_compiler, tmp_path_factory):
    try:
        import torch
    except ImportError as error:
        pytest.skip(f"no CUDA device: torch is not installed ({error})")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: torch.cuda.is_available() is False")
    runtime = pathlib.Path(os.environ.get(
        "PATTN_RUNTIME", REPO / "build" / "lib" / "libpattn_runtime.so"))
    if not runtime.is_file():
        pytest.skip(f"libpattn_runtime.so not built ({runtime}); build it or "
                    "set PATTN_RUNTIME")
    directory = tmp_path_factory.mktemp("gpu")
    ptx = (REPO / "unittests" / "Runtime" / "affine.ptx").read_text()
    source = directory / "affine.c"
    source.write_text(f"#define PTX {_c_string(ptx)}\n"
                      f"#define MANIFEST {_c_string(json.dumps(GPU_MANIFEST))}"
                      f"\n{GPU_ARTIFACT_SOURCE}")
    artifact = directory / "affine.so"
    _run([c_compiler, "-shared", "-fPIC", "-o", str(artifact), str(source),
          str(runtime), f"-Wl,-rpath,{runtime.parent}"])
    return torch, pattn.load(artifact)


def _expect_affine(torch, out, x):
    torch.cuda.synchronize()
    assert torch.equal(out, x * 2 + 1)


def test_gpu_launch_on_the_current_stream(gpu_module):
    torch, module = gpu_module
    x = torch.arange(1000, device="cuda", dtype=torch.float32) - 100
    out = torch.full_like(x, math.nan)
    module.affine(out, x)
    _expect_affine(torch, out, x)

    side = torch.cuda.Stream()
    out.fill_(math.nan)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        module.affine(out, x)
    _expect_affine(torch, out, x)
    out.fill_(math.nan)
    torch.cuda.synchronize()
    module.affine(out, x, stream=side)
    _expect_affine(torch, out, x)


def test_gpu_launch_from_a_new_thread(gpu_module):
    torch, module = gpu_module
    x = torch.arange(300, device="cuda", dtype=torch.float32)
    out = torch.full_like(x, math.nan)
    torch.cuda.synchronize()
    failures = []

    def call():
        try:
            module.affine(out, x)
        except pattn.Error as error:
            failures.append(error)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    assert not failures
    _expect_affine(torch, out, x)


def test_gpu_launch_is_captured_by_cuda_graphs(gpu_module):
    torch, module = gpu_module
    x = torch.arange(512, device="cuda", dtype=torch.float32)
    out = torch.full_like(x, math.nan)
    module.affine(out, x)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        module.affine(out, x)
    x.copy_(torch.arange(512, device="cuda", dtype=torch.float32) * -3)
    out.fill_(math.nan)
    graph.replay()
    _expect_affine(torch, out, x)


def test_gpu_errors_come_back_as_launch_errors(gpu_module):
    torch, module = gpu_module
    x = torch.zeros(8, device="cuda")
    out = torch.zeros(4, device="cuda")
    with pytest.raises(pattn.LaunchError,
                       match="PATTN_ERROR_INVALID_ARGUMENT: affine: out and x "
                             "differ in length"):
        module.affine(out, x)
    # The failed call left nothing pending.
    module.affine(x, x.clone())
    torch.cuda.synchronize()
    assert torch.equal(x, torch.ones(8, device="cuda"))


def test_artifact_cache_compiles_once_then_needs_no_compiler(fake_compiler,
                                                             tmp_path,
                                                             monkeypatch):
    compiler, log = fake_compiler
    cache = tmp_path / "artifacts"
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(cache))
    first = pattn.compile(MLIR, chips="sm_90a", compiler=compiler)
    assert os.path.dirname(first) == str(cache)
    assert open(first, "rb").read() == b"artifact"
    log.unlink()
    # A GPU machine finds the same artifact through a copy of the compiler
    # that cannot run there: the key comes from its bytes.
    copy = tmp_path / "gpu" / "bin" / "pattn-compile"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(compiler.read_bytes())
    copy.chmod(0o755)
    monkeypatch.setenv("FAKE_COMPILER_MODE", "broken")
    again = pattn.compile(MLIR, chips="sm_90a", compiler=copy)
    assert again == first and not log.exists()
    monkeypatch.delenv("FAKE_COMPILER_MODE")
    # Other chips or another source are other entries.
    other = pattn.compile(MLIR, chips="sm_80", compiler=compiler)
    assert other != first


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_artifact_cache_entries_follow_the_umask(fake_compiler, tmp_path,
                                                 monkeypatch, umask):
    """Cache files get the modes files created under the umask get (issue
    32 §11): a cache filled by one account is readable by another where the
    umask lets it (they used to be 0600 whatever the umask)."""
    script, _ = fake_compiler
    # An install tree: bin/pattn-compile and the lib/libpattn_runtime.so
    # the cache copies beside its entries.
    compiler = tmp_path / "tool" / "bin" / "pattn-compile"
    compiler.parent.mkdir(parents=True)
    shutil.copy2(script, compiler)
    (tmp_path / "tool" / "lib").mkdir()
    (tmp_path / "tool" / "lib" / "libpattn_runtime.so").write_bytes(
        b"\x7fELF stands in for the runtime")
    cache = tmp_path / "artifacts"
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(cache))
    previous = os.umask(umask)
    try:
        entry = pattn.compile(MLIR, chips="sm_90a", compiler=compiler)
    finally:
        os.umask(previous)
    modes = {path.name: stat.S_IMODE(path.stat().st_mode)
             for path in cache.iterdir() if not path.name.endswith(".lock")}
    base = os.path.basename(entry)[:-len(".so")]
    assert modes[base + ".so"] == 0o777 & ~umask
    assert modes[base + ".so.sha256"] == 0o666 & ~umask
    assert modes[base + ".json"] == 0o666 & ~umask
    assert stat.S_IMODE(cache.stat().st_mode) == 0o777 & ~umask
    assert modes["libpattn_runtime.so"] == 0o777 & ~umask
    assert modes["libpattn_runtime.so.sha256"] == 0o666 & ~umask


def test_compile_caches_in_cache_dir_without_the_environment(
        fake_compiler, tmp_path, monkeypatch):
    """cache_dir= is the artifact cache where $PATTN_ARTIFACT_DIR is unset
    (and wins over it where set): a second compile is served from it."""
    compiler, log = fake_compiler
    monkeypatch.delenv("PATTN_ARTIFACT_DIR", raising=False)
    first = pattn.compile(MLIR, chips="sm_90a", compiler=compiler,
                          cache_dir=tmp_path / "mine")
    assert pathlib.Path(first).parent == tmp_path / "mine"
    log.unlink()
    monkeypatch.setenv("PATTN_ARTIFACT_DIR", str(tmp_path / "other"))
    again = pattn.compile(MLIR, chips="sm_90a", compiler=compiler,
                          cache_dir=str(tmp_path / "mine"))
    assert again == first and not log.exists()
    with pytest.raises(pattn.ArgumentTypeError, match="cache_dir"):
        pattn.compile(MLIR, chips="sm_90a", compiler=compiler, cache_dir=3)


#: decode_step over page-strided K pages: each page 16 x 8 x 64 bytes, the
#: pages 16384 bytes apart (K of a [blocks, 2, 16, 8, 64] allocation).
PAGE_STRIDED = {**MANIFEST, "functions": [
    {"name": "decode_step", "symbol": "decode_step",
     "args": [{"name": "cache", "dtype": "i8", "shape": [-1, 16, 8, 64],
               "strides": [16384, 512, 64, 1]},
              {"name": "seq_lens", "dtype": "i32", "shape": [-1]}]}]}


def test_page_strided_views_of_an_engine_allocation(builder):
    """A page-strided argument takes K or V of an engine's [blocks, 2, ...]
    allocation as they are (no copy): the view's pointer and the manifest's
    strides reach the function; other strides are an error naming the
    expected ones, a contiguous tensor included."""
    torch = _torch()
    path = builder.build("page_strided", json.dumps(PAGE_STRIDED))
    module = pattn.load(path)
    probe = Probe(path)
    probe.fail_next_calls_with(0)
    assert module.decode_step.args[0].strides == (16384, 512, 64, 1)
    kv = torch.zeros((3, 2, 16, 8, 64), dtype=torch.uint8)
    lens = torch.tensor([3, 4, 5], dtype=torch.int32)
    for side in (0, 1):
        module.decode_step(OnCuda(kv[:, side]), OnCuda(lens), stream=STREAM)
        assert probe.received[:11] == [
            kv[0, side].data_ptr(), kv[0, side].data_ptr(), 0, 3, 16, 8, 64,
            16384, 512, 64, 1]
    # One page: the outer stride is not read.
    module.decode_step(OnCuda(kv[:1, 1].clone()), OnCuda(lens),
                       stream=STREAM)
    with pytest.raises(pattn.ArgumentError,
                       match=r"argument 'cache' must have strides \[16384, "
                       r"512, 64, 1\] \(pages 16384 elements apart, "
                       r"row-major inside\), got strides \[8192, 512, 64, "
                       r"1\]"):
        module.decode_step(OnCuda(kv[:, 0].contiguous()), OnCuda(lens),
                           stream=STREAM)
    hnd = torch.zeros((3, 2, 8, 16, 64), dtype=torch.uint8)
    with pytest.raises(pattn.ArgumentError, match="must have strides"):
        module.decode_step(OnCuda(hnd[:, 0].transpose(1, 2)), OnCuda(lens),
                           stream=STREAM)
