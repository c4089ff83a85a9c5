"""The rich lowerings print file names literally: escaped, never parsed as markup.

Exact strings, rendered the rich way (a fixed-width Console with no colours), for a tree,
its summary table and a diff whose keys and values hold markup, escapes, a newline, a tab
and a bidi override.
"""

from __future__ import annotations

import io
import textwrap

import numpy as np
import pytest
from rich.console import Console

import treetool as tt
from treetool._lowering._labels import label
from treetool._tree._model import view
from treetool._tree._rich import TreeView

A = {"[bold red]x": np.zeros(2, np.float32), "a\nb\tc": {"\u202eevil": 1, "[/]": "\x1b]0;t\x07"}}
B = {"[bold red]x": np.zeros(3, np.float32), "a\nb\tc": {"\u202eevil": 2, "[/]": "\x1b]0;t\x07"}}


def _render(obj) -> str:
    c = Console(width=70, color_system=None, file=io.StringIO())
    c.print(obj)
    return "".join(line.rstrip() + "\n" for line in c.file.getvalue().splitlines())


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            TreeView(tt.view(A)),
            """\
            dict[2]  2 params · 8 B
            ├── ['[bold red]x']  f32[2]  2 params · 8 B
            └── ['a\\nb\\tc']  dict[2]
                ├── ['[/]']  '\\x1b]0;t\\x07'
                └── ['\\u202eevil']  1
            """,
        ),
        (
            tt.summary(A),
            """\
            path             type    leaves  params       %  bytes  dtypes
            ['[bold red]x']  f32[2]       1       2  100.0%    8 B  float32
            ['a\\nb\\tc']      dict         2       0    0.0%    0 B
            total            dict         3       2    100%    8 B  float32
            """,
        ),
        (
            tt.diff(A, B),
            """\
            2 changes  ~2 changed (1 shape, 1 value)
            dict[2]
            ├── ~ ['[bold red]x']  shape  f32[2] → f32[3]
            └── ['a\\nb\\tc']  dict[2]
                ├── ~ ['\\u202eevil']  value  1 → 2
                └── · 1 unchanged
            """,
        ),
    ],
    ids=["tree", "summary", "diff"],
)
def test_hostile_names_render_escaped_and_literal(obj, expected):
    assert _render(obj) == textwrap.dedent(expected)


class _Evil:
    """A leaf whose repr is an attack (a broken or hostile __repr__ from a trusted load)."""

    def __repr__(self) -> str:
        return "\x1b[2J[link=https://evil.example]click[/link]\n"


def test_labels_escape_keys_types_and_reprs():
    lbl = label(view({"k\x1b": _Evil()}).children[0])
    assert lbl.key == "['k\\x1b']"
    assert lbl.type == "\\x1b[2J[link=https://evil.example]click…"  # cut at 40 characters
    assert _render(TreeView(tt.view({"k": _Evil()}))).splitlines()[1] == (
        "└── ['k']  \\x1b[2J[link=https://evil.example]click…"
    )


def test_opaque_class_and_attribute_names_from_a_pickle(tmp_path):
    from hostile.hostile_names import write_pickle

    write_pickle(tmp_path / "names.pkl", tmp_path / "clicked")
    obj = tt.load(tmp_path / "names.pkl")["a\nb\tc"]
    assert _render(TreeView(tt.view(obj))) == textwrap.dedent(
        """\
        a_b\\tc  6 params · 24 B  [not executed]
        ├── .a\\nb\\tc  f32[3]  3 params · 12 B
        └── .ok  f32[3]  3 params · 12 B
        """
    )
    assert repr(view(obj).children[0]) == "Node(.a\\nb\\tc, ndarray)"
