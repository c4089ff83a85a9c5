"""The TUI uses Textual through its public API only (issue 31): no private module, no
private attribute of a Textual object, no override of a Textual class's private method.

Private names are found in Textual's own source: a name starting with one `_` that Textual
defines (a method, an attribute it assigns, a class attribute). The check reads tui/'s source:
- an import from a private Textual module (`textual.widgets._tree`) or of a private name;
- in a class of tui/ that subclasses a Textual class, `self._x`, `super()._x` or `def _x`
  where a Textual class it inherits from defines `_x`;
- anywhere, `obj._x` where Textual defines `_x` and treetool defines no `_x` of its own.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from functools import cache
from pathlib import Path

import textual

TUI = Path(__file__).resolve().parents[2] / "tui"
TREETOOL = TUI.parent / "treetool"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, assigned attributes, class names."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and _private(n.name):
            out.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and _private(n.attr):
            out.add(n.attr)
        elif isinstance(n, ast.ClassDef):
            for stmt in n.body:
                targets = (
                    stmt.targets
                    if isinstance(stmt, ast.Assign)
                    else [stmt.target]
                    if isinstance(stmt, ast.AnnAssign)
                    else []
                )
                out |= {t.id for t in targets if isinstance(t, ast.Name) and _private(t.id)}
    return out


@cache
def _names_in(root: Path) -> frozenset[str]:
    names: set[str] = set()
    for f in root.rglob("*.py"):
        names |= _defined(ast.parse(f.read_text(encoding="utf-8")))
    return frozenset(names)


@cache
def _class_private(cls: type) -> frozenset[str]:
    """The private names a Textual class defines (its body and what its methods assign)."""
    try:
        tree = ast.parse(inspect.getsource(cls))
    except (OSError, TypeError):
        tree = ast.Module(body=[], type_ignores=[])
    return frozenset(_defined(tree) | {n for n in vars(cls) if _private(n)})


def _textual_private_of(cls: type) -> set[str]:
    out: set[str] = set()
    for base in cls.__mro__:
        if base.__module__.split(".")[0] == "textual":
            out |= _class_private(base)
    return out


def _module_name(path: Path) -> str:
    parts = path.relative_to(TUI).with_suffix("").parts
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(("treetool", "tui", *parts))


def _is_self(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def _ours(module_name: str, tree: ast.Module) -> set[str]:
    """The private names a tui module may use on objects: those it defines and those of the
    treetool modules it imports from (`scope._origin` of `treetool._jaxpr._view`)."""
    names = set(_defined(tree))
    package = module_name if module_name.endswith(".tui") else module_name.rsplit(".", 1)[0]
    for n in ast.walk(tree):
        if not isinstance(n, ast.ImportFrom):
            continue
        base = importlib.util.resolve_name("." * n.level + (n.module or ""), package)
        if base.split(".")[0] != "treetool":
            continue
        targets = [base] + [f"{base}.{a.name}" for a in n.names]
        for name in targets:
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            file = getattr(mod, "__file__", None)
            if file:
                names |= _defined(ast.parse(Path(file).read_text(encoding="utf-8")))
    return names


def _violations(
    tree: ast.Module, where: str, classes: dict[str, type], ours: set[str]
) -> list[str]:
    textual_names = _names_in(Path(textual.__file__).parent)
    out: list[str] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "textual":
            if any(_private(p) for p in (n.module or "").split(".")):
                out.append(f"{where}:{n.lineno}: import from {n.module}")
            out += [f"{where}:{n.lineno}: import of {a.name}" for a in n.names if _private(a.name)]
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.name.split(".")[0] == "textual" and any(
                    _private(p) for p in a.name.split(".")
                ):
                    out.append(f"{where}:{n.lineno}: import {a.name}")
        elif isinstance(n, ast.ClassDef):
            cls = classes.get(n.name)
            if cls is None:
                continue
            theirs = _textual_private_of(cls)
            for m in ast.walk(n):
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name in theirs:
                    out.append(f"{where}:{m.lineno}: {n.name} overrides Textual's {m.name}")
                elif isinstance(m, ast.Attribute) and _is_self(m.value) and m.attr in theirs:
                    out.append(f"{where}:{m.lineno}: {n.name} uses Textual's {m.attr}")
        if (
            isinstance(n, ast.Attribute)
            and not _is_self(n.value)
            and n.attr in textual_names
            and n.attr not in ours
        ):
            out.append(f"{where}:{n.lineno}: .{n.attr} (private in Textual)")
    return out


def _check(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = _module_name(path)
    module = importlib.import_module(name)
    classes = {k: v for k, v in vars(module).items() if isinstance(v, type)}
    return _violations(tree, f"tui/{path.relative_to(TUI)}", classes, _ours(name, tree))


def test_the_tui_uses_no_private_textual_api():
    files = sorted(TUI.rglob("*.py"))
    assert len(files) >= 20
    found = [v for f in files for v in _check(f)]
    assert found == []


def test_the_check_finds_each_kind_of_private_use():
    """What tui/widgets/tree_view.py did before issue 31, each kind found once."""
    from textual.widgets import Tree

    source = (
        "from textual.widgets._tree import _TreeLine\n"
        "from textual._segment_tools import line_pad\n"
        "class T(Tree):\n"
        "    def _build(self):\n"
        "        self._tree_lines\n"
        "        super()._get_label_region(0)\n"
        "        node._expanded\n"
        "        self._own = node._line\n"
    )
    tree = ast.parse(source)
    name = "treetool.tui.widgets.tree_view"
    ours = _ours(name, ast.parse((TUI / "widgets" / "tree_view.py").read_text()))
    found = _violations(tree, "t.py", {"T": Tree}, ours | _defined(tree))
    assert found == [
        "t.py:1: import from textual.widgets._tree",
        "t.py:1: import of _TreeLine",
        "t.py:2: import from textual._segment_tools",
        "t.py:4: T overrides Textual's _build",
        "t.py:5: T uses Textual's _tree_lines",
        "t.py:6: T uses Textual's _get_label_region",
        "t.py:7: ._expanded (private in Textual)",
        "t.py:8: ._line (private in Textual)",
    ]
