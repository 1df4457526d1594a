#!/usr/bin/env bash
# Installs what pattn builds and tests with on Debian 12 (bookworm): LLVM/MLIR
# 22 from Debian's packages, CMake, Ninja, GoogleTest. Needs root (or sudo).
set -euo pipefail

packages=(
  cmake ninja-build ccache
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 lld-22
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

# The Python tests: the float64 reference needs numpy.
python3 -c "import numpy, pytest" 2>/dev/null ||
  python3 -m pip install --quiet --disable-pip-version-check numpy pytest
