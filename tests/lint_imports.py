"""Run import-linter (`lint-imports`) on treetool with `treetool.tui` in the graph.

import-linter builds its graph with grimp, which walks the `treetool/` folder; `tui/` is
installed as `treetool.tui` by setuptools' package-dir mapping, which grimp cannot follow, so
its modules and imports are added here (read with `ast` by `import_graph`, also the imports
inside functions, as grimp reads them). The contracts are the ones in pyproject.toml.

Usage: `python tests/lint_imports.py` from the repository root; exit 0 when every contract
is kept, 1 otherwise, with import-linter's report on stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from import_graph import imports, modules, top_level
from importlinter.adapters.building import GraphBuilder
from importlinter.application.app_config import settings
from importlinter.cli import lint_imports
from importlinter.configuration import configure


class _WithTui(GraphBuilder):
    """grimp's graph of treetool, plus treetool.tui's modules, their imports and those into it."""

    def build(self, root_package_names: list[str], *args: Any, **kwargs: Any) -> Any:
        graph = super().build(root_package_names, *args, **kwargs)
        for name in modules():
            if name.startswith("treetool.tui"):
                graph.add_module(name)
        for i in imports():
            # grimp drops the imports of a module it has not found: those into the TUI too
            if "treetool.tui" in (top_level(i.importer), top_level(i.imported)):
                graph.add_import(
                    importer=i.importer,
                    imported=i.imported,
                    line_number=i.line,
                    line_contents=i.text,
                )
        return graph


def main() -> int:
    configure()
    settings.configure(GRAPH_BUILDER=_WithTui())
    return lint_imports(no_cache=True, no_logo=True)


if __name__ == "__main__":
    sys.exit(main())
