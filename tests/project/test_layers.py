"""The layering holds: import-linter's contracts, no import cycle, no type test by name.

The contracts live in pyproject.toml (`[tool.importlinter]`): front ends > render > core >
io > model and leaf types > base, core and io never import render/ or the TUI, and the one
allowed edge up is the seam `treetool._repr -> treetool.render` (a lazy import inside
`_repr.lower`, through which result objects draw themselves).

import-linter (grimp) reads every `import` statement with `ast`, including those inside
functions and methods: `test_the_linter_sees_lazy_imports_and_the_tui` checks it on the seam,
which is such an import, so the contracts are not blind to lazy imports.
"""

from __future__ import annotations

import re
import subprocess
import sys

from import_graph import ROOT, cycles, imports, modules, top_level

SEAM = ("treetool._repr", "treetool.render")
FRONT_ENDS = {"treetool.cli", "treetool._cli", "treetool.show", "treetool.tui"}


#: Cycles between top-level modules and packages that are allowed: none.
KNOWN_CYCLES: list[list[str]] = []

#: Cycles between single modules (imports inside functions count) still to be opened.
KNOWN_MODULE_CYCLES: list[list[str]] = [
    [
        "treetool._jaxpr._view",
        "treetool._repr",
        "treetool._sharding._devices",
        "treetool._sharding._leaf_placement",
        "treetool._sharding._placement",
        "treetool._tree._lookup",
        "treetool._tree._model",
        "treetool._tree._views",
        "treetool._tree._walk",
        "treetool.render",
        "treetool.render._registry",
        "treetool.render.devices",
        "treetool.render.html",
        "treetool.render.html_base",
        "treetool.render.html_tree",
        "treetool.render.labels",
        "treetool.render.text",
    ],
    [
        "treetool.io",
        "treetool.io._save",
        "treetool.io.msgpack",
        "treetool.io.npz",
        "treetool.io.orbax",
        "treetool.io.pickle",
        "treetool.io.safetensors",
        "treetool.io.sharded",
        "treetool.io.torch",
    ],
    [
        "treetool.io._sources._http",
        "treetool.io._sources._remote",
        "treetool.io._sources._s3",
        "treetool.io._sources._source",
    ],
    ["treetool.tui", "treetool.tui._app_reading", "treetool.tui.app", "treetool.tui.tabs"],
]


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
    # the seam is an import inside a function: grimp sees it, and the contracts ignore it by name
    assert graph.direct_import_exists(importer="treetool._repr", imported="treetool.render")
    # treetool.tui is in the graph with its imports of the core and of render/
    assert graph.direct_import_exists(
        importer="treetool.tui.widgets.details", imported="treetool._tree._model"
    )
    assert graph.direct_import_exists(
        importer="treetool.tui.widgets.jaxpr_tab", imported="treetool.render.jaxpr"
    )
    assert graph.direct_import_exists(importer="treetool.show", imported="treetool.tui")


def test_no_import_cycle_between_top_level_modules():
    """Nodes are the top-level modules of treetool: `treetool._diff._tree_diff`, `treetool.io` (the whole
    package), `treetool.render`, `treetool.tui`, `treetool.cli` (with its `_cli_*` parts)… An edge is any import from one
    into another (module level or inside a function; `if TYPE_CHECKING:` blocks left out, they
    never run). The seam `treetool._repr -> treetool.render` is the one edge left out: a result
    drawing itself reaches its renderer through it, late, and the renderer depends on the result
    class; every other edge must point down the layers. `KNOWN_CYCLES` names the cycles merged
    work still has, so that any new one fails here."""
    edges = _top_edges()
    assert SEAM in edges
    assert cycles(edges - {SEAM}) == KNOWN_CYCLES


def test_no_import_cycle_between_modules():
    """Nodes are single modules; every import counts, also one inside a function (it closes a
    cycle as surely, only later). `KNOWN_MODULE_CYCLES` names those not yet opened."""
    edges = {(i.importer, i.imported) for i in imports()}
    assert sorted(cycles(edges)) == sorted(KNOWN_MODULE_CYCLES)


def test_the_cycle_check_fails_on_an_added_cycle():
    edges = _top_edges() - {SEAM}
    # an error module that imported diff (diff imports errors) would close a cycle
    found = cycles(edges | {("treetool._errors", "treetool._diff")})
    assert found != KNOWN_CYCLES
    assert any({"treetool._errors", "treetool._diff"} <= set(c) for c in found), found
    # the seam itself closes one: that is why it is the single named exception
    assert any("treetool._repr" in c and "treetool.render" in c for c in cycles(edges | {SEAM}))


def test_the_seam_is_the_only_import_from_below_into_render():
    ups = sorted(
        (i.importer, i.line)
        for i in imports()
        if top_level(i.imported) == "treetool.render"
        and top_level(i.importer) not in FRONT_ENDS | {"treetool.render"}
    )
    assert ups == [
        (
            "treetool._repr",
            next(i.line for i in imports() if (i.importer, top_level(i.imported)) == SEAM),
        )
    ]


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
