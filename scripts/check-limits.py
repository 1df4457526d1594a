#!/usr/bin/env python3
"""The size limits the tree keeps (CI runs this): no file under lib/ over
900 lines, no function over 120 lines.

A function is a brace block opened after a parameter list ")" (optionally
followed by qualifiers, a trailing return type or a constructor's member
initializers) that is not inside another function; lambdas and local
classes count toward the function around them. Comments, string and
character literals are blanked before braces are counted.

  python3 scripts/check-limits.py            # check lib/ (exit 1 on a breach)
  python3 scripts/check-limits.py --report   # also list the longest functions
"""
import argparse
import pathlib
import re
import sys

MAX_FILE_LINES = 900
MAX_FUNCTION_LINES = 120
SOURCES = (".cpp", ".h", ".c", ".inc")


def blank_comments_and_literals(text):
    """The text with comments and literals replaced by spaces (newlines kept,
    so that offsets and line numbers stay those of the source)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            # A digit separator (1'000) is not a literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and text[i - 1] not in "uUL":
                out.append(c)
                i += 1
                continue
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


# What may stand between a parameter list's ")" and the body's "{".
_AFTER_PARAMS = re.compile(
    r"\)\s*(?:const\b|override\b|final\b|noexcept\b|volatile\b|&&?|\s|->[^;{}]*)*$")
_INIT_LIST = re.compile(r"\)\s*:\s*[A-Za-z_][\w:<>, ]*[({][^;{}]*$", re.S)
_NOT_FUNCTION = re.compile(r"\b(if|for|while|switch|catch)\s*\(")


def _opens_function(head):
    """Whether the text before a "{" (since the previous ; { or }) makes the
    block a function body."""
    head = head.rstrip()
    if not head or head.endswith("=") or head.endswith(","):
        return False
    if re.search(r"\b(namespace|class|struct|union|enum)\b[^()]*$", head):
        return False
    if _NOT_FUNCTION.search(head.split("\n")[-1]) and not re.search(r"\)\s*:", head):
        return False
    return bool(_AFTER_PARAMS.search(head) or _INIT_LIST.search(head))


def functions(text):
    """(name, first line, line count) of each function body in `text`."""
    code = blank_comments_and_literals(text)
    result = []
    depth = 0
    function_depth = None  # the depth inside the function being measured
    start = None
    name = None
    last_boundary = 0
    for i, c in enumerate(code):
        if c == "{":
            head = code[last_boundary:i]
            if function_depth is None and _opens_function(head):
                function_depth = depth + 1
                # From the signature's first line (the head's first
                # non-blank character), as a reader counts a function.
                start = last_boundary + (len(head) - len(head.lstrip()))
                m = re.findall(r"([~\w:]+)\s*\(", head)
                name = m[0] if m else "?"
            depth += 1
            last_boundary = i + 1
        elif c == "}":
            if function_depth is not None and depth == function_depth:
                first = code.count("\n", 0, start) + 1
                last = code.count("\n", 0, i) + 1
                result.append((name, first, last - first + 1))
                function_depth = None
            depth -= 1
            last_boundary = i + 1
        elif c == ";":
            last_boundary = i + 1
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--report", type=int, nargs="?", const=20, default=0,
                        help="list the N longest functions")
    parser.add_argument("roots", nargs="*", default=["lib"])
    args = parser.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent
    breaches, all_functions = [], []
    for top in args.roots:
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SOURCES or not path.is_file():
                continue
            rel = path.relative_to(root)
            text = path.read_text()
            lines = text.count("\n")
            if lines > MAX_FILE_LINES:
                breaches.append(f"{rel}: {lines} lines (limit {MAX_FILE_LINES})")
            for name, first, count in functions(text):
                all_functions.append((count, f"{rel}:{first}", name))
                if count > MAX_FUNCTION_LINES:
                    breaches.append(f"{rel}:{first}: {name} is {count} lines "
                                    f"(limit {MAX_FUNCTION_LINES})")
    if args.report:
        for count, where, name in sorted(all_functions, reverse=True)[:args.report]:
            print(f"{count:5d}  {where}  {name}")
    for breach in breaches:
        print("check-limits: " + breach, file=sys.stderr)
    if breaches:
        return 1
    print(f"check-limits: {len(all_functions)} functions, every file within "
          f"{MAX_FILE_LINES} lines and every function within {MAX_FUNCTION_LINES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
