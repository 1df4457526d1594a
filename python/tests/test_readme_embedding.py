"""The README's embedding example is the program the embedding test builds
(issue 32 §12): its C++ block is test/embedding/pattn-readme.cpp below the
file's header, character for character, so a snippet that would not
compile, or that names no headers, fails here or in
scripts/test-embedding.sh (which builds and runs the file against the
installed package)."""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]


def _readme_block(section: str, language: str) -> str:
    text = (REPO / "README.md").read_text()
    start = text.index(f"## {section}\n")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(rf"```{re.escape(language)}\n(.*?)```",
                        text[start:end], re.S)
    assert len(blocks) == 1, f"{len(blocks)} {language} blocks in {section}"
    return blocks[0]


def test_readme_embedding_snippet_is_the_built_program():
    source = (REPO / "test" / "embedding" / "pattn-readme.cpp").read_text()
    body = source[source.index('#include "pattn/InitAll.h"'):]
    assert _readme_block("Embedding pattn in a compiler", "c++") == body


def test_readme_embedding_snippet_names_its_headers_and_runs_a_module():
    block = _readme_block("Embedding pattn in a compiler", "c++")
    for header in ("pattn/InitAll.h", "pattn/Pipelines/Pipelines.h",
                   "mlir/Parser/Parser.h", "mlir/Pass/PassManager.h"):
        assert f'#include "{header}"' in block
    assert "parseSourceFile" in block and "pm.run(*module)" in block
    built = (REPO / "test" / "embedding" / "CMakeLists.txt").read_text()
    assert "add_executable(pattn-readme pattn-readme.cpp)" in built
    run = (REPO / "scripts" / "test-embedding.sh").read_text()
    assert '"$consumer/pattn-readme"' in run
