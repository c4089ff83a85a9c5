"""treetool's import graph, read from the source with `ast`, for the layering tests.

Every `import` statement counts, also those inside functions and methods (a lazy import is
still a dependency); the bodies of `if TYPE_CHECKING:` are left out (they never run).
Relative imports are resolved against the importing module's package; `tui/` is read as
`treetool.tui` (setuptools' package-dir mapping installs it there).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"treetool": ROOT / "treetool", "treetool.tui": ROOT / "tui"}


@dataclass(frozen=True)
class Import:
    """One import statement: who imports what, on which line."""

    importer: str
    imported: str
    line: int
    text: str


def modules() -> dict[str, Path]:
    """Every module of treetool (and treetool.tui) -> its file."""
    out: dict[str, Path] = {}
    for name, folder in PACKAGES.items():
        for f in sorted(folder.rglob("*.py")):
            parts = list(f.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([name, *parts])] = f
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    out: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _known(name: str, known: dict[str, Path]) -> str | None:
    """The deepest module of treetool that `name` (a module or a module's attribute) names."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports() -> list[Import]:
    """Every import between treetool's modules, in file order."""
    known = modules()
    out: list[Import] = []
    for mod, f in known.items():
        source = f.read_text()
        lines = source.splitlines()
        package = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
        for st in _statements(ast.parse(source)):
            targets: list[str] = []
            if isinstance(st, ast.Import):
                targets = [a.name for a in st.names]
            else:
                base = st.module or ""
                if st.level:
                    up = package.split(".")
                    up = up[: len(up) - (st.level - 1)]
                    base = ".".join([*up, *([st.module] if st.module else [])])
                # `from pkg import sub` imports the submodule; `from mod import name` the module
                targets = [f"{base}.{a.name}" for a in st.names] or [base]
            for t in targets:
                hit = _known(t, known)
                if hit is not None and hit != mod:
                    out.append(Import(mod, hit, st.lineno, lines[st.lineno - 1].strip()))
    return sorted(set(out), key=lambda i: (i.importer, i.line, i.imported))


def top_level(module: str) -> str:
    """The top-level module or package a module belongs to: `treetool._diff._align` ->
    `treetool._diff`, `treetool._display._html` -> `treetool._display`."""
    return ".".join(module.split(".")[:2])


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found
