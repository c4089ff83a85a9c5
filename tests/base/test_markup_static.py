"""No widget or rich text in the TUI or the terminal renderers parses file text as markup.

A static check over `tui/` and the terminal lowerings: each result's `_rich.py`, the kit
`_lowering/`, the tree's leaf report and `_display/` (the HTML lowerings excepted: they escape
for HTML): every call that would parse a plain `str` as rich or Textual markup gets something that
is not markup. `notify(...)` always passes `markup=False`. `Static(...)`, `Label(...)`,
`.update(...)`, `add_row(...)`, tree labels (`Tree(...)`, `.add(...)`, `.add_leaf(...)`,
`.set_label(...)`) and `border_title`/`border_subtitle` get a constant, a `Text`/`Content`
(or another renderable built by a class), a call of a function below that returns one, or
`markup=False`. A name or expression the check cannot see through must carry the comment
`# plain:` on its line saying why it is plain. `Text.from_markup`, `Content.from_markup` and
`rich.markup.render` are allowed on constants only.

A new call site that forgets fails here, naming the file and the line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_PKG = ROOT / "treetool"
FILES = sorted(
    [p for p in (ROOT / "tui").rglob("*.py")]
    + list(_PKG.glob("*/_rich.py"))
    + [_PKG / "_tree" / "_leaf_report.py"]
    + [
        p
        for d in ("_lowering", "_display")
        for p in (_PKG / d).glob("*.py")
        if not p.name.startswith(("_html", "__init__"))
    ]
)

#: functions in treetool that return rich Text / renderables built from sanitised text
RENDERABLE_FUNCTIONS = {
    "safe_text",
    "label_text",
    "totals_text",
    "histogram_text",
    "bindings_table",
    "eqn_text",
    "scope_text",
    "counts_text",
    "summary",
    "axes",
    "build",
    "_facts_table",
    "_inner",
    "_largest",
    "_label",
    "_var_label",
    "_row",
    "_row_label",
    "_header",
    "_title",
    "cell",
    "_t",  # _port/_rich.py: Text(safe(str(x)))
}
#: functions that format numbers (digits, units, block characters: never a `[`)
NUMBER_FUNCTIONS = {"fmt_count", "fmt_bytes", "bar", "sparkline", "_num", "_both", "_range"}
#: methods whose (first) positional arguments Textual or rich parse as markup when they are str
LABEL_CALLS = {"update": "all", "add_row": "all", "add_leaf": "first", "set_label": "first"}
WIDGETS = {"Static", "Label", "Tree", "TotalsBar"}
MARKUP_PARSERS = {"from_markup", "render_markup"}


def _func_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _numeric_spec(spec: ast.expr | None) -> bool:
    if not isinstance(spec, ast.JoinedStr) or len(spec.values) != 1:
        return False
    text = spec.values[0]
    return isinstance(text, ast.Constant) and str(text.value)[-1:] in set(",dfFgGeE%xXob")


class _Checker(ast.NodeVisitor):
    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.lines = source.splitlines()
        self.problems: list[str] = []
        self.scopes: list[dict[str, list[ast.expr | None]]] = [{}]

    # --- what a name may hold, from its assignments in the enclosing function ----------------

    def visit_Module(self, node: ast.Module) -> None:
        for sub in node.body:  # module constants
            if isinstance(sub, ast.Assign):
                for t in sub.targets:
                    if isinstance(t, ast.Name):
                        self.scopes[0].setdefault(t.id, []).append(sub.value)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        assigned: dict[str, list[ast.expr | None]] = {}
        for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
            assigned.setdefault(a.arg, []).append(a.annotation)  # parameter: its annotation
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign):
                for t in sub.targets:
                    if isinstance(t, ast.Name):
                        assigned.setdefault(t.id, []).append(sub.value)
            elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                assigned.setdefault(sub.target.id, []).append(sub.value or sub.annotation)
            elif isinstance(sub, (ast.For, ast.comprehension)) and isinstance(sub.target, ast.Name):
                it = sub.iter  # `for k in ("min", "max")` binds constants; anything else: unknown
                consts = isinstance(it, (ast.Tuple, ast.List)) and all(
                    isinstance(x, ast.Constant) for x in it.elts
                )
                assigned.setdefault(sub.target.id, []).append(it.elts[0] if consts else None)
        self.scopes.append(assigned)
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _plain(self, e: ast.expr | None, depth: int = 0) -> bool:
        """Is `e` something that is never parsed as markup?"""
        if e is None or depth > 4:
            return False
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, (ast.List, ast.Tuple, ast.Dict, ast.Set)):
            return True  # not a str: a dict.update or a data row, never markup
        if isinstance(e, ast.JoinedStr):  # an f-string of numbers only: `{n:,}`, `{v:.6g}`
            return all(
                (isinstance(v, ast.Constant) and "[" not in v.value)
                or (isinstance(v, ast.FormattedValue) and _numeric_spec(v.format_spec))
                for v in e.values
            )
        if isinstance(e, ast.Starred):
            return self._plain(e.value, depth + 1)
        if isinstance(e, (ast.GeneratorExp, ast.ListComp)):
            return self._plain(e.elt, depth + 1)
        if isinstance(e, ast.IfExp):
            return self._plain(e.body, depth + 1) and self._plain(e.orelse, depth + 1)
        if isinstance(e, ast.Call):
            name = _func_name(e.func)
            if name in MARKUP_PARSERS:
                return all(isinstance(a, ast.Constant) for a in e.args)
            if name in ("str", "repr", "format", "join", "safe"):
                return False  # a str: parsed as markup
            return name[:1].isupper() or name in RENDERABLE_FUNCTIONS | NUMBER_FUNCTIONS
        if isinstance(e, ast.Name):
            if e.id in ("Text", "Content"):  # an annotation
                return True
            values = self.scopes[-1].get(e.id) or self.scopes[0].get(e.id)
            return bool(values) and all(self._plain(v, depth + 1) for v in values)
        if isinstance(e, ast.Subscript):  # an annotation such as `list[Text]`
            return _func_name(e.value) in ("list", "tuple") and self._plain(e.slice, depth + 1)
        return False

    def _excused(self, node: ast.AST) -> bool:
        return any(
            "# plain:" in self.lines[i - 1]
            for i in range(node.lineno, (node.end_lineno or node.lineno) + 1)
        )

    def _problem(self, node: ast.AST, what: str) -> None:
        if not self._excused(node):
            rel = self.path.relative_to(ROOT)
            self.problems.append(f"{rel}:{node.lineno}: {what}: {ast.unparse(node)[:120]}")

    def _markup_false(self, node: ast.Call) -> bool:
        return any(
            k.arg == "markup" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in node.keywords
        )

    # --- the calls -------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        name = _func_name(node.func)
        if name == "notify" and not self._markup_false(node):
            self._problem(node, "notify() without markup=False")
        elif name in WIDGETS and node.args and not self._markup_false(node):
            if not self._plain(node.args[0]):
                self._problem(node, f"{name}() of text that may be markup")
        elif name in LABEL_CALLS and isinstance(node.func, ast.Attribute):
            args = node.args if LABEL_CALLS[name] == "all" else node.args[:1]
            for a in args:
                if not self._plain(a):
                    self._problem(node, f".{name}() of text that may be markup")
                    break
        elif name == "add" and isinstance(node.func, ast.Attribute) and node.args:
            # rich Tree.add(label) and Textual TreeNode.add(label, data); not set.add(x)
            receiver = _func_name(node.func.value)
            if receiver not in ("seen", "done", "visited") and not self._plain(node.args[0]):
                self._problem(node, ".add() of a tree label that may be markup")
        elif name in MARKUP_PARSERS and not all(isinstance(a, ast.Constant) for a in node.args):
            self._problem(node, f"{name}() of non-constant text")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            if (
                isinstance(t, ast.Attribute)
                and t.attr in ("border_title", "border_subtitle")
                and not self._plain(node.value)
            ):
                self._problem(node, f"{t.attr} of text that may be markup")
        self.generic_visit(node)


def _problems(path: Path) -> list[str]:
    source = path.read_text()
    checker = _Checker(path, source)
    checker.visit(ast.parse(source))
    return checker.problems


def test_the_check_covers_the_tui_and_the_renderers():
    names = {p.name for p in FILES}
    assert {"app.py", "tree_view.py", "details.py", "devices_tab.py", "_rich.py"} <= names
    assert {"_labels.py", "_rows.py", "_leaf_report.py", "_render.py"} <= names
    assert {p.parent.name for p in FILES if p.name == "_rich.py"} >= {
        "_diff",
        "_jaxpr",
        "_sharding",
        "_summary",
        "_tree",
    }
    assert not any(p.name.startswith("_html") for p in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_file_text_is_parsed_as_markup(path):
    problems = _problems(path)
    assert not problems, "file text may be parsed as markup:\n" + "\n".join(problems)


BAD = """
from textual.widgets import Static, Label
def f(self, name: str, node):
    self.notify(f"copied {name}")
    Static(name)
    Label(f"x {name}")
    self.query_one(Static).update(str(node.path))
    table.add_row(node.key, "1")
    tree.root.add(f"{name}", data)
    tn.set_label(name)
    w.border_title = name
    Text.from_markup(name)
"""

GOOD = """
from textual.widgets import Static, Label
def f(self, name: str, node):
    self.notify(f"copied {name}", markup=False)
    Static(Text(name))
    Label(Content(name))
    Static(name, markup=False)
    text = safe_text(name)
    self.query_one(Static).update(text)
    table.add_row(Text(node.key), "1", safe_text(name))
    tree.root.add(Text(name), data)
    tn.set_label(label_text(lbl))
    w.border_title = "help"
    seen.add(id(node))
    d.update({"a": 1})
    Text.from_markup("[b]constant[/b]")
    w.update(name)  # plain: `name` is a Content built by the caller
"""


def test_the_check_catches_each_kind_of_call(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(BAD)
    checker = _Checker(ROOT / "tui" / "bad.py", BAD)
    checker.visit(ast.parse(BAD))
    kinds = [p.split(": ")[1] for p in checker.problems]
    assert kinds == [
        "notify() without markup=False",
        "Static() of text that may be markup",
        "Label() of text that may be markup",
        ".update() of text that may be markup",
        ".add_row() of text that may be markup",
        ".add() of a tree label that may be markup",
        ".set_label() of text that may be markup",
        "border_title of text that may be markup",
        "from_markup() of non-constant text",
    ]
    checker = _Checker(ROOT / "tui" / "good.py", GOOD)
    checker.visit(ast.parse(GOOD))
    assert checker.problems == []
