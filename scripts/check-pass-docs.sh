#!/usr/bin/env bash
# Every pass and pipeline pattn-opt registers under pattn's names has a
# section in the generated reference (ninja pattn-doc), or is a pipeline
# that docs/Passes.md describes. Usage: check-pass-docs.sh PATTN_OPT DOCS_DIR
set -euo pipefail
pattn_opt="$1"
docs="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
passes=$("$pattn_opt" --help | sed -n -E 's/^ +--((convert-)?pattn-[a-z0-9-]+).*/\1/p' | sort -u)
[ -n "$passes" ] || { echo "no pattn passes in pattn-opt --help" >&2; exit 1; }
missing=0
for pass in $passes; do
  if grep -q -- "^### \`-$pass\`" "$docs"/PAttnPasses.md "$docs"/PAttnConversionPasses.md; then
    continue
  fi
  # Pipelines are not ODS passes: docs/Passes.md describes them.
  if grep -q -- "$pass" "$root/docs/Passes.md"; then
    continue
  fi
  echo "pass-docs: $pass has no section in $docs" >&2
  missing=1
done
echo "pass-docs: $(echo "$passes" | wc -l) passes and pipelines documented"
exit $missing
