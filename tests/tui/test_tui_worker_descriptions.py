"""Textual describes a `@work` worker by the repr of its arguments unless it is given a
description: a worker handed the whole tree read (a live `inspect` of a big pickle) spent 26 s
printing 20,000 arrays before it ran. Every worker that takes arguments is described."""

from __future__ import annotations

import ast
from pathlib import Path

from treetool._reading._read import Read

TUI = Path(__file__).resolve().parents[2] / "tui"


def _workers() -> list[tuple[str, ast.FunctionDef, ast.Call]]:
    found = []
    for path in sorted(TUI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and getattr(dec.func, "id", None) == "work":
                    found.append((f"{path.relative_to(TUI)}:{node.name}", node, dec))
    return found


def test_every_worker_with_arguments_has_a_description():
    workers = _workers()
    assert len(workers) >= 10  # the app's, the tabs', the widgets'
    with_args = [(name, dec) for name, fn, dec in workers if len(fn.args.args) > 1]
    assert "_app_reading.py:_keep_rows" in [name for name, _ in with_args]
    undescribed = {
        name for name, dec in with_args if not any(k.arg == "description" for k in dec.keywords)
    }
    # small arguments (a query, a column name) cost nothing to repr: named here
    assert sorted(undescribed - _SMALL_ARGS) == []


#: workers whose arguments are a few scalars or a short string
_SMALL_ARGS = {"app.py:_search", "widgets/leaves_table.py:_sort"}


def test_a_reads_repr_leaves_the_tree_out():
    import numpy as np

    read = Read({f"w{i}": np.zeros(100) for i in range(1000)}, "a note", {"format": "pickle"})
    text = repr(read)
    assert text == "Read(note='a note', file_facts={'format': 'pickle'})"
