"""The layering holds: import-linter's contracts, no import cycle, no type test by name.

The contracts live in pyproject.toml (`[tool.importlinter]`): front ends (`_display`, the CLI,
the TUI) > surgery, transforms, porting > results > io > tree > the lowering kit > leaves and
paths > base, with no exception: each result owns its lowerings (`_diff/_rich.py`…) and imports
them inside its own methods, and no module below the front ends imports one of them.

import-linter (grimp) reads every `import` statement with `ast`, including those inside
functions and methods: `test_the_linter_sees_lazy_imports_and_the_tui` checks it on a result
importing its own lowering, which is such an import, so the contracts are not blind to lazy
imports.
"""

from __future__ import annotations

import re
import subprocess
import sys

from import_graph import ROOT, cycles, imports, modules, top_level

FRONT_ENDS = {"treetool.cli", "treetool._cli", "treetool._display", "treetool.tui"}


#: Cycles between top-level modules and packages that are allowed: none.
KNOWN_CYCLES: list[list[str]] = []

#: Cycles between single modules (imports inside functions count) still to be opened.
KNOWN_MODULE_CYCLES: list[list[str]] = []


def _top_edges() -> set[tuple[str, str]]:
    return {
        (top_level(i.importer), top_level(i.imported))
        for i in imports()
        if top_level(i.importer) != top_level(i.imported)
    }


def test_import_linter_contracts_are_kept():
    run = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "lint_imports.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 kept, 0 broken" in run.stdout, run.stdout


def test_the_linter_sees_lazy_imports_and_the_tui():
    sys.path.insert(0, str(ROOT / "tests"))
    from lint_imports import _WithTui

    graph = _WithTui().build(["treetool"], cache_dir=None, exclude_type_checking_imports=True)
    # a result importing its own lowering inside a method: grimp sees it
    assert graph.direct_import_exists(
        importer="treetool._diff._tree_diff", imported="treetool._diff._rich"
    )
    # treetool.tui is in the graph with its imports of the core and of the lowerings
    assert graph.direct_import_exists(
        importer="treetool.tui.widgets.details", imported="treetool._tree._model"
    )
    assert graph.direct_import_exists(
        importer="treetool.tui.widgets.jaxpr_tab", imported="treetool._jaxpr._rich"
    )
    assert graph.direct_import_exists(importer="treetool._display._show", imported="treetool.tui")


def test_no_import_cycle_between_top_level_modules():
    """Nodes are the top-level modules of treetool: `treetool._diff._tree_diff`, `treetool.io` (the whole
    package), `treetool._display`, `treetool.tui`, `treetool.cli`… An edge is any import from
    one into another (module level or inside a function; `if TYPE_CHECKING:` blocks left out,
    they never run). Every edge must point down the layers, with no exception. `KNOWN_CYCLES`
    names the cycles merged work still has, so that any new one fails here."""
    assert cycles(_top_edges()) == KNOWN_CYCLES


def test_no_import_cycle_between_modules():
    """Nodes are single modules; every import counts, also one inside a function (it closes a
    cycle as surely, only later). `KNOWN_MODULE_CYCLES` names those not yet opened."""
    edges = {(i.importer, i.imported) for i in imports()}
    assert sorted(cycles(edges)) == sorted(KNOWN_MODULE_CYCLES)


def test_the_cycle_check_fails_on_an_added_cycle():
    edges = _top_edges()
    # an error module that imported diff (diff imports errors) would close a cycle
    found = cycles(edges | {("treetool._errors", "treetool._diff")})
    assert found != KNOWN_CYCLES
    assert any({"treetool._errors", "treetool._diff"} <= set(c) for c in found), found
    # a lowering importing its result back (the old render seam's shape) closes one per module
    modules_ = {(i.importer, i.imported) for i in imports()}
    back = ("treetool._diff._rich", "treetool._diff._tree_diff")
    assert back not in modules_
    assert any(set(back) <= set(c) for c in cycles(modules_ | {back}))


def test_no_import_from_below_into_the_front_ends():
    """Nothing below the front ends imports `_display`, the CLI or the TUI, not even inside a
    function (import-linter's layers say it by package; this names the offending line)."""
    ups = sorted(
        (i.importer, i.imported, i.line)
        for i in imports()
        if top_level(i.imported) in FRONT_ENDS and top_level(i.importer) not in FRONT_ENDS
    )
    assert ups == []


def test_each_lowering_is_imported_only_by_its_result_and_above():
    """`_diff/_rich.py` and the like are imported by their own package (the result's methods)
    and by the front ends; never by another result package, the tree or the kit."""
    lowerings = {"_rich", "_html"}
    found = sorted(
        (i.importer, i.imported)
        for i in imports()
        if i.imported.rsplit(".", 1)[-1] in lowerings
        and i.imported.count(".") == 2
        and top_level(i.importer) not in FRONT_ENDS
        and top_level(i.importer) != top_level(i.imported)
    )
    assert found == []


#: `type(x).__name__ == "Name"` (or `!=`, `in`): a type test by name string
_NAME_TEST = re.compile(r"""(?:type\([^()]*\)|\b\w+)\.__name__\s*(?:==|!=|in)\s*[("']""")
#: left as they are: not result types, and in other owners' modules
_NAME_TESTS_ALLOWED = {
    "treetool/io/_sources/_remote.py": 1,  # fsspec's FSTimeoutError, without importing fsspec's module
}


def test_no_type_tested_by_its_name():
    """Types are tested with isinstance (jax's and the loaders' through `_typetests`)."""
    found: dict[str, int] = {}
    for f in modules().values():
        text = "\n".join(
            line for line in f.read_text().splitlines() if 'if __name__ == "__main__"' not in line
        )
        n = len(_NAME_TEST.findall(text))
        if n:
            found[str(f.relative_to(ROOT))] = n
    assert found == _NAME_TESTS_ALLOWED
