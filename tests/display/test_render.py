"""The rich tree: exact text at several depths, folding, width limits, errors in place."""

from __future__ import annotations

import io
import textwrap

import equinox as eqx
import jax
import numpy as np
import pytest
from rich.console import Console
from trees import corpus

import treetool as tt


def _text(obj, console_width: int = 80, **kw) -> str:
    console = Console(file=io.StringIO(), width=console_width, color_system=None)
    console.print(tt.render(obj, **kw))
    return console.file.getvalue()


@pytest.mark.parametrize(
    ("depth", "expected"),
    [
        (
            1,
            """\
            MLP  46 params · 184 B
            ├── .layers  tuple[3]  46 params · 184 B
            ├── .activation  <custom_jvp relu>
            └── .final_activation  <function <lambda>>
            """,
        ),
        (
            2,
            """\
            MLP  46 params · 184 B
            ├── .layers  tuple[3]  46 params · 184 B
            │   ├── [0]  Linear  16 params · 64 B
            │   ├── [1]  Linear  20 params · 80 B
            │   └── [2]  Linear  10 params · 40 B
            ├── .activation  <custom_jvp relu>
            └── .final_activation  <function <lambda>>
            """,
        ),
    ],
)
def test_mlp_at_several_depths(depth, expected):
    assert _text(corpus()["mlp"], depth=depth) == textwrap.dedent(expected)


def test_flax_params_keys_and_nones():
    assert _text(corpus()["linen"], depth=2) == textwrap.dedent(
        """\
        dict[1]  34 params · 136 B
        └── ['params']  dict[3]  34 params · 136 B
            ├── ['Dense_0']  dict[2]  16 params · 64 B
            ├── ['Dense_1']  dict[2]  10 params · 40 B
            └── ['LayerNorm_0']  dict[2]  8 params · 32 B
        """
    )
    assert _text(corpus()["keys"]) == textwrap.dedent(
        """\
        dict[2]  2 params · 32 B
        ├── ['legacy']  u32[2]  2 params · 8 B
        └── ['typed']  key<fry>[3]  24 B  [key]
        """
    )
    assert _text(corpus()["nones"]).splitlines()[:3] == [
        "dict[3]",
        "├── ['a']  None",
        "├── ['b']  list[2]",
    ]


class Block(eqx.Module):
    w: jax.Array
    b: jax.Array


def test_identical_siblings_fold_and_wide_nodes_page():
    layers = [Block(np.ones((4, 4), np.float32), np.zeros(4, np.float32)) for _ in range(32)]
    text = _text({"layers": layers, "head": np.ones((4, 2), np.float32)})
    assert text == textwrap.dedent(
        """\
        dict[2]  648 params · 2.6 KB
        ├── ['head']  f32[4,2]  8 params · 32 B
        └── ['layers']  list[32]  640 params · 2.6 KB
            └── [0..31]  ×32 Block  640 params · 2.6 KB
                ├── .w  f32[4,4]  16 params · 64 B
                └── .b  f32[4]  4 params · 16 B
        """
    )
    unfolded = _text({"layers": layers}, fold=False, width=3, depth=2)
    assert unfolded.splitlines()[-4:] == [
        "    ├── [0]  Block  20 params · 80 B",
        "    ├── [1]  Block  20 params · 80 B",
        "    ├── [2]  Block  20 params · 80 B",
        "    └── … 29 more",
    ]
    assert _text(list(range(30)), width=5).splitlines()[-2:] == ["├── [4]  4", "└── … 25 more"]


class Broken:
    """Registered with a field that its instances do not have."""


tt.register_node(Broken, ["missing"], [])


def test_a_node_that_fails_shows_its_error_in_place():
    text = _text({"bad": Broken(), "good": np.ones(2, np.float32)}, console_width=120)
    lines = text.splitlines()
    assert lines[0] == "dict[2]"  # no totals: a descendant is broken
    assert lines[1].startswith("├── ['bad']  Broken  ⚠ AttributeError:")
    assert "'Broken' object has no attribute 'missing'" in lines[1]
    assert lines[2] == "└── ['good']  f32[2]  2 params · 8 B"
