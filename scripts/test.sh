#!/usr/bin/env bash
# README command 2: build and run the whole test suite (lit + unit tests)
# through ctest; its last line is the summary.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

bash "$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "$(nproc)"
