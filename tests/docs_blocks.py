"""Run the code blocks of a Markdown page (README.md, docs/*.md) and compare their output.

A page is run top to bottom in one fresh process, in an empty working directory, so that later
blocks see what earlier ones defined and wrote (files included):

- a ```` ```python ```` block holding `>>>` lines is a doctest (`doctest.DocTestParser`, with the
  options of pytest's doctest run: NORMALIZE_WHITESPACE and ELLIPSIS);
- another ```` ```python ```` block is executed; when the next block is a ```` ```text ````
  block, that block is the output the code must print (stdout and stderr, in order);
- a ```` ```console ```` block is shell commands (`$ cmd`) each followed by the output it must
  print (stdout and stderr together);
- `<!-- docs-test: setup` ... `-->` holds Python run where it stands, hidden from the page
  (files for the commands to read);
- `<!-- docs-test: skip REASON -->` before a block: not run (it needs something the test run
  does not have); `<!-- docs-test: no-compare REASON -->`: run, its output not compared
  (timings, memory addresses). Both must say why.

Output comparison: trailing spaces and blank lines are ignored, and `...` matches anything
(doctest's ELLIPSIS). Blocks of other languages (toml, json, a bare fence) are not run.

    python tests/docs_blocks.py PAGE.md            # report mismatches, exit 1 on any
    python tests/docs_blocks.py --update PAGE.md   # write the actual output into the page
"""

from __future__ import annotations

import contextlib
import dataclasses
import doctest
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S
)
DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(?P<kind>skip|no-compare|setup)(?P<rest>.*?)-->", re.S)
FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
#: the environment every page runs in: no colours, a fixed width where rich cannot measure one
ENV = {
    "COLUMNS": "100",
    "NO_COLOR": "1",
    "TERM": "dumb",
    "JAX_PLATFORMS": "cpu",
    "TREETOOL_SHOW": "text",
}


@dataclasses.dataclass
class Block:
    lang: str
    body: str
    start: int  # offset of the body in the page
    end: int
    line: int
    mode: str = "run"  # run | skip | no-compare | setup
    output: Block | None = None  # the ```text block after a python block


def parse(text: str) -> list[Block]:
    """The page's blocks and setup comments, in order."""
    items: list[tuple[int, Block]] = []
    for m in DIRECTIVE.finditer(text):
        if m.group("kind") == "setup":
            line = text.count("\n", 0, m.start()) + 1
            items.append(
                (m.start(), Block("setup", m.group("rest"), m.start(), m.end(), line, "setup"))
            )
    fences = list(FENCE.finditer(text))
    blocks: list[Block] = []
    for m in fences:
        before = text[: m.start()].rstrip()
        mode = "run"
        if before.endswith("-->"):
            at = before.rfind("<!--")
            d = DIRECTIVE.search(before[at:])
            if d and d.group("kind") in ("skip", "no-compare"):
                if not d.group("rest").strip():
                    line = text.count("\n", 0, at) + 1
                    raise ValueError(f"line {line}: a {d.group('kind')} directive must say why")
                mode = d.group("kind")
        line = text.count("\n", 0, m.start()) + 1
        b = Block(m.group("lang"), m.group("body"), m.start("body"), m.end("body"), line, mode)
        blocks.append(b)
    for i, b in enumerate(blocks):
        if b.lang == "python" and ">>>" not in b.body and i + 1 < len(blocks):
            nxt = blocks[i + 1]
            if nxt.lang == "text" and re.fullmatch(
                r"\s*```\s*```text[^\n]*\n", text[b.end : nxt.start]
            ):
                b.output = nxt
        items.append((b.start, b))
    return [b for _, b in sorted(items, key=lambda t: t[0])]


def _clean(s: str) -> str:
    lines = [line.rstrip() for line in s.replace("\r\n", "\n").split("\n")]
    return "\n".join(lines).strip("\n") + "\n"


def _same(expected: str, actual: str) -> bool:
    return doctest.OutputChecker().check_output(_clean(expected), _clean(actual), doctest.ELLIPSIS)


@dataclasses.dataclass
class Result:
    line: int
    kind: str
    ok: bool
    expected: str = ""
    actual: str = ""
    #: (offset, end, new text) that --update writes into the page
    patch: tuple[int, int, str] | None = None


def _exec(code: str, globs: dict[str, Any], name: str, line: int) -> str:
    """Run `code`, which starts at `line` of the page `name` (tracebacks give page lines)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            exec(compile("\n" * line + code, name, "exec"), globs)
        except Exception:
            traceback.print_exc(file=out)
    return out.getvalue()


def _doctest(block: Block, globs: dict[str, Any], name: str) -> list[Result]:
    test = doctest.DocTestParser().get_doctest(block.body, globs, name, name, block.line)
    results: list[Result] = []
    new = []
    for ex in test.examples:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                exec(compile(ex.source, name, "single"), globs)
            except Exception as e:
                out.write("Traceback (most recent call last):\n  ...\n")
                out.write("".join(traceback.format_exception_only(type(e), e)))
        actual = out.getvalue()
        checker = doctest.OutputChecker()
        expected = ex.want
        if ex.exc_msg is not None:
            ok = ex.exc_msg.strip() in actual and "Traceback" in actual
        else:
            ok = block.mode == "no-compare" or checker.check_output(expected, actual, FLAGS)
        results.append(Result(block.line + ex.lineno, "doctest", ok, expected, actual))
        src = ex.source.rstrip("\n").split("\n")
        new.append(">>> " + "\n... ".join(src) + "\n")
        want = expected if ok else actual
        new.append(want if not want.strip() else _clean(want))
    if results:
        results[-1].patch = (block.start, block.end, "".join(new))
    return results


def _console(block: Block, cwd: str) -> Result:
    parts = re.split(r"^\$ ", block.body, flags=re.M)
    new = [parts[0]]
    ok = True
    exp_all, act_all = [], []
    for part in parts[1:]:
        cmd, _, expected = part.partition("\n")
        proc = subprocess.run(
            ["bash", "-c", cmd],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        actual = proc.stdout
        if block.mode != "no-compare" and not _same(expected, actual):
            ok = False
        exp_all.append(f"$ {cmd}\n{expected}")
        act_all.append(f"$ {cmd}\n{actual}")
        new.append(f"{cmd}\n{_clean(actual) if actual.strip() else ''}")
    body = "$ ".join(new)
    return Result(
        block.line,
        "console",
        ok,
        "".join(exp_all),
        "".join(act_all),
        (block.start, block.end, body),
    )


def run_page(page: Path) -> list[Result]:
    """Run every block of `page` in order; the working directory, environment and import
    path are the page's own while it runs and are restored after."""
    text = page.read_text()
    blocks = parse(text)
    results: list[Result] = []
    name = page.name
    saved_env, saved_cwd, saved_path = dict(os.environ), os.getcwd(), list(sys.path)
    with tempfile.TemporaryDirectory(prefix="docs-") as cwd:
        os.environ.update(ENV)
        os.chdir(cwd)
        sys.path.insert(0, cwd)
        try:
            globs: dict[str, Any] = {"__name__": "__main__"}
            for b in blocks:
                results.extend(_run_block(b, globs, name, cwd))
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            sys.path[:] = saved_path
    return results


def _run_block(b: Block, globs: dict[str, Any], name: str, cwd: str) -> list[Result]:
    if b.mode == "skip":
        return []
    if b.mode == "setup":
        out = _exec(b.body, globs, name, b.line)
        return [Result(b.line, "setup", "Traceback" not in out, "", out)]
    if b.lang == "python" and ">>>" in b.body:
        return _doctest(b, globs, name)
    if b.lang == "python":
        actual = _exec(b.body, globs, name, b.line)
        if b.output is None:
            # a block that shows no output must print nothing (a traceback included)
            return [Result(b.line, "python", not actual.strip(), "", actual)]
        ok = b.mode == "no-compare" or _same(b.output.body, actual)
        patch = (b.output.start, b.output.end, _clean(actual))
        return [Result(b.line, "python", ok, b.output.body, actual, patch)]
    if b.lang == "console":
        return [_console(b, cwd)]
    return []


def update(page: Path, results: list[Result]) -> None:
    """Write each block's actual output into the page, in place of the output it shows."""
    text = page.read_text()
    patches = [r.patch for r in results if r.patch is not None]
    for start, end, new in sorted(patches, key=lambda p: -p[0]):
        text = text[:start] + new + text[end:]
    page.write_text(text)


def main(argv: list[str]) -> int:
    upd = "--update" in argv
    as_json = "--json" in argv
    pages = [Path(a).resolve() for a in argv if not a.startswith("--")]
    bad = 0
    for page in pages:
        results = run_page(page)
        if as_json:
            print(json.dumps([dataclasses.asdict(r) for r in results]))
        if upd:
            update(page, results)
        for r in results:
            if not r.ok:
                bad += 1
                if not as_json:
                    print(
                        f"--- {page.name}:{r.line} ({r.kind})\nexpected:\n{r.expected}\nactual:\n{r.actual}"
                    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
