#!/usr/bin/env bash
# README command 2: build and run the whole test suite: lit and GoogleTest
# through ctest, then the Python tests through pytest.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

bash "$root/scripts/build.sh"
(cd "$build" && ctest --output-on-failure -j "$(nproc)")

# The installed package: a consumer under test/embedding, configured against
# `cmake --install` of this build with clang-22 and with GCC 12.
BUILD_DIR="$build" bash "$root/scripts/test-embedding.sh"

# Python: the loader, the float64 reference, and the GPU suite (which skips,
# saying why, on a machine without a GPU). pytest's summary is the last line.
export PATTN_COMPILE="$build/bin/pattn-compile"
python3 -m pytest -q -rs "$root/python/tests"
