"""What `treetool get` and `inspect` print: corners with `...` at each gap (as numpy's
summarised print has), and file metadata values longer than a line folded to one line."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from treetool.cli import main


def _run(*args: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(list(args)) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("out") / "c.safetensors"
    save_file(
        {
            "v": np.arange(2000, dtype=np.int32),
            "m": np.arange(1000 * 1000, dtype=np.int32).reshape(1000, 1000),
            "t": np.arange(4 * 500, dtype=np.int16).reshape(4, 500),  # a short first axis
        },
        str(path),
    )
    return path


def _preview(text: str) -> list[str]:
    lines = text.splitlines()
    return [line.rstrip() for line in lines[lines.index("first and last 3 along each axis:") + 1 :]]


def test_corners_of_a_1d_leaf_mark_the_gap(ckpt):
    assert _preview(_run("get", str(ckpt), "v")) == ["[   0    1    2 ... 1997 1998 1999]"]


def test_corners_of_a_2d_leaf_mark_both_gaps(ckpt):
    assert _preview(_run("get", str(ckpt), "m")) == [
        "[[     0      1      2 ...    997    998    999]",
        " [  1000   1001   1002 ...   1997   1998   1999]",
        " [  2000   2001   2002 ...   2997   2998   2999]",
        " ...",
        " [997000 997001 997002 ... 997997 997998 997999]",
        " [998000 998001 998002 ... 998997 998998 998999]",
        " [999000 999001 999002 ... 999997 999998 999999]]",
    ]


def test_an_axis_without_a_gap_has_no_marker(ckpt):
    assert _preview(_run("get", str(ckpt), "t")) == [
        "[[   0    1    2 ...  497  498  499]",
        " [ 500  501  502 ...  997  998  999]",
        " [1000 1001 1002 ... 1497 1498 1499]",
        " [1500 1501 1502 ... 1997 1998 1999]]",
    ]


def test_get_json_keeps_its_form_for_a_big_leaf(ckpt):
    data = json.loads(_run("get", str(ckpt), "m", "--json"))
    assert data["values"] is None and data["shape"] == [1000, 1000]
    assert data["stats"]["max"] == 999999.0  # 4 MB on disk: read for its stats
