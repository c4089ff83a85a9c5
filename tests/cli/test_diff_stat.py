"""`treetool diff --stat`: the changes counted by kind, per top-level path and in all, as text
and as JSON (`diff --json`'s head with `stat` rows in place of `changes`); the exit code is
the full diff's."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

import treetool as tt
from treetool._diff._stat import diff_stat, stat_lines
from treetool.cli import main


def _run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["diff", *args])
    return code, out.getvalue()


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("stat")
    f32 = np.float32
    a = {
        "model": {"w": np.zeros((2, 3), f32), "b": np.zeros(3, f32), "s": np.zeros(2, f32)},
        "opt": {"mu": np.zeros(3, f32), "nu": np.zeros(3, f32)},
        "step": np.array(1),
    }
    b = {
        "model": {"w": np.ones((2, 3), f32), "b": np.zeros(4, f32), "s": np.zeros(2, f32)},
        "opt": {"mu": np.zeros(3, f32), "x": np.zeros(3, f32)},
        "step": np.array(2),
    }
    tt.save(a, str(root / "a.npz"))
    tt.save(b, str(root / "b.npz"))
    return str(root / "a.npz"), str(root / "b.npz")


def test_stat_counts_by_top_level_path_and_in_all(pair):
    code, text = _run(*pair, "--stat")
    assert code == 1
    assert text.splitlines() == [
        "['model']  2  ~2 changed (1 shape, 1 value)",
        "['opt']    2  +1 added  -1 removed",
        "['step']   1  ~1 changed (1 value)",
        "5 changes  +1 added  -1 removed  ~3 changed (1 shape, 2 value)",
    ]


def test_stat_json_is_the_diff_json_head_with_stat_rows(pair):
    code, text = _run(*pair, "--stat", "--json")
    assert code == 1
    data = json.loads(text)
    full = json.loads(_run(*pair, "--json")[1])
    assert sorted(data) == ["counts", "equal", "kinds", "options", "stat"]
    assert {k: data[k] for k in ("equal", "counts", "kinds", "options")} == {
        k: full[k] for k in ("equal", "counts", "kinds", "options")
    }
    assert data["counts"] == {"added": 1, "removed": 1, "changed": 3}
    assert data["stat"] == [
        {
            "path": "['model']",
            "changes": 2,
            "counts": {"added": 0, "removed": 0, "changed": 2},
            "kinds": {"shape": 1, "value": 1},
        },
        {
            "path": "['opt']",
            "changes": 2,
            "counts": {"added": 1, "removed": 1, "changed": 0},
            "kinds": {"added": 1, "removed": 1},
        },
        {
            "path": "['step']",
            "changes": 1,
            "counts": {"added": 0, "removed": 0, "changed": 1},
            "kinds": {"value": 1},
        },
    ]
    assert sum(r["changes"] for r in data["stat"]) == len(full["changes"]) == 5


def test_stat_of_equal_trees(pair):
    assert _run(pair[0], pair[0], "--stat") == (0, "no differences\n")
    code, text = _run(pair[0], pair[0], "--stat", "--json")
    assert code == 0
    assert json.loads(text)["stat"] == [] and json.loads(text)["equal"] is True


def test_stat_options_apply(pair):
    code, text = _run(*pair, "--stat", "--no-values")
    assert code == 1
    assert text.splitlines() == [
        "['model']  1  ~1 changed (1 shape)",
        "['opt']    2  +1 added  -1 removed",
        "3 changes  +1 added  -1 removed  ~1 changed (1 shape)",
    ]


def test_a_change_of_the_root_counts_under_the_root():
    d = tt.diff([1, 2], {"a": 1})
    assert [r["path"] for r in diff_stat(d)["stat"]] == [""]
    assert stat_lines(d)[0].startswith("<root>  1  ~1 changed (1 node_type)")


def test_paths_from_the_file_are_escaped(tmp_path: Path):
    evil = "a\x1b[31m"
    tt.save({evil: np.zeros(2, np.float32)}, str(tmp_path / "a.npz"))
    tt.save({evil: np.ones(2, np.float32)}, str(tmp_path / "b.npz"))
    code, text = _run(str(tmp_path / "a.npz"), str(tmp_path / "b.npz"), "--stat")
    assert code == 1 and "\x1b" not in text
    assert text.splitlines()[0].endswith("1  ~1 changed (1 value)")
