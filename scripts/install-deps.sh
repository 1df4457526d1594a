#!/usr/bin/env bash
# Installs what pattn builds and tests with on Debian 12 (bookworm): LLVM/MLIR
# 22 from Debian's packages, CMake, Ninja, GoogleTest. Needs root (or sudo).
set -euo pipefail

packages=(
  cmake ninja-build ccache
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 lld-22
  clang-format-22 g++-12
  libgtest-dev python3
  libclang-rt-22-dev
)
# The CUDA toolkit (ptxas, fatbinary, libdevice) comes with the machine image;
# pattn-compile finds it through CUDA_HOME or the ptxas on PATH.

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "pattn: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The Python tests: the float64 reference needs numpy; the torch custom ops'
# tests (python/tests/test_torch_ops.py) need torch, whose CPU build is
# enough. Each is installed only when it does not import.
pip_install() {
  local flags=(--quiet --disable-pip-version-check)
  # Debian's own python3 refuses installs outside a virtual environment
  # (PEP 668) unless told.
  if python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
    flags+=(--break-system-packages)
  fi
  python3 -m pip install "${flags[@]}" "$@"
}
python3 -c "import numpy, pytest" 2>/dev/null || pip_install numpy pytest
# The ONNX importer (python/pattn/onnx.py) and its tests read models with the
# onnx package.
python3 -c "import onnx" 2>/dev/null || pip_install onnx
# python/tests/test_onnx_ort_cpu.py checks the importer's mapping against
# onnxruntime itself (its CPU provider runs GroupQueryAttention).
python3 -c "import onnxruntime" 2>/dev/null || pip_install onnxruntime
# PyTorch's CPU index has the small CPU-only build; where it cannot be
# reached, the default index's build (which brings CUDA's libraries) does.
python3 -c "import torch" 2>/dev/null ||
  pip_install --retries 0 --timeout 30 --index-url https://download.pytorch.org/whl/cpu torch 2>/dev/null ||
  pip_install torch
# pattn.integrations.transformers and its tests (python/tests/
# test_transformers_integration.py) run small models built from configs;
# 5.17.0 is what the GPU machine has (see docs/Serving.md), so the CPU tests
# check the same API the GPU tests use.
python3 -c "import transformers" 2>/dev/null ||
  pip_install "transformers==5.17.0"
# transformers' tensor parallelism (tp_plan="auto", python/tests/
# test_tensor_parallel.py) needs accelerate.
python3 -c "import accelerate" 2>/dev/null ||
  pip_install "accelerate==1.16.0"
