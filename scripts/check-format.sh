#!/usr/bin/env bash
# The C and C++ sources follow .clang-format (LLVM style, as LLVM and MLIR):
# clang-format-22 would change nothing. Lists the files it would change and
# fails if there are any. To fix: clang-format-22 -i <files>.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
format=clang-format-22
command -v "$format" >/dev/null || { echo "check-format: $format not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.cpp' '*.h')
bad=()
for file in "${files[@]}"; do
  "$format" --dry-run --Werror "$file" >/dev/null 2>&1 || bad+=("$file")
done
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not formatted:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
