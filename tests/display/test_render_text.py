"""Plain-text truths: print() of results draws them, numbers keep their dtype's digits,
plurals agree, and output to a pipe is never broken at 80 columns."""

from __future__ import annotations

import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import treetool as tt


def test_print_render_and_summary_draw_the_tree_and_table(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    x = {"b": np.zeros(3, np.float32), "w": np.ones((2, 3), np.float32)}
    assert str(tt.render(x)) == (
        "dict[2]  9 params · 36 B\n"
        "├── ['b']  f32[3]  3 params · 12 B\n"
        "└── ['w']  f32[2,3]  6 params · 24 B"
    )
    assert str(tt.summary(x)).splitlines() == [
        "path   type      leaves  params      %  bytes  dtypes",
        "['b']  f32[3]         1       3  33.3%   12 B  float32",
        "['w']  f32[2,3]       1       6  66.7%   24 B  float32",
        "total  dict           2       9   100%   36 B  float32×2",
    ]


def test_float32_scalars_print_with_float32_digits():
    x = {"a": np.float32(-0.07974771410226822), "b": jnp.float32(-0.0797477), "c": 0.1}
    text = str(tt.render(x))
    assert "f32[] -0.079747714 " in text and "f32[] -0.0797477 " in text
    assert "-0.07974771410226822" not in text and "['c']  0.1" in text
    d = tt.diff(x, {**x, "a": np.float32(0.5)})
    assert d.changes[0].before == -0.079747714 and "-0.0797477 → 0.5" in str(d)


def test_one_change_is_singular():
    d = tt.diff({"a": 1}, {"a": 2})
    assert str(d).startswith("1 change ") and "1 changes" not in repr(d) + str(d)
    assert repr(d).startswith("TreeDiff(1 change:")


@pytest.mark.slow
def test_pipe_gets_whole_lines_and_columns_is_respected(tmp_path):
    key = "k" * 150
    (tmp_path / "wide_target.py").write_text(
        f"import numpy as np\nTREE = {{{key!r}: np.ones((2, 3), np.float32)}}\n"
    )

    def inspect(env: dict) -> list[str]:
        env = {k: v for k, v in {**__import__("os").environ, **env}.items() if v is not None}
        r = subprocess.run(
            [sys.executable, "-m", "treetool.cli", "inspect", "wide_target:TREE", "--no-tui"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout.splitlines()

    import os

    env = dict(os.environ)
    env.pop("COLUMNS", None)
    lines = inspect({**env, "COLUMNS": None})
    assert len(lines) == 2 and lines[1].startswith(f"└── ['{key}']  f32[2,3]")
    narrow = inspect({"COLUMNS": "60"})
    assert max(len(line) for line in narrow) <= 60 and len(narrow) > 2


@pytest.mark.slow
def test_show_into_a_pipe_does_not_wrap(tmp_path):
    key = "k" * 150
    code = (
        f"import numpy as np, treetool as tt\ntt.show({{{key!r}: np.ones((2, 3), np.float32)}})\n"
    )
    import os

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[1].startswith(f"└── ['{key}']  f32[2,3]")
