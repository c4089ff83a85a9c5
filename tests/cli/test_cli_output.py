"""What `treetool get` and `inspect` print: corners with `...` at each gap (as numpy's
summarised print has), and file metadata values longer than a line folded to one line."""

from __future__ import annotations

import io
import json
import struct
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


_LONG = json.dumps({f"layers.{i}.weight": f".layers[{i}].weight" for i in range(300)})


@pytest.fixture(scope="module")
def with_metadata(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("meta") / "m.safetensors"
    meta = {"format": "pt", "treetool_paths": _LONG, "note": "two\nlines"}
    # written by hand: safetensors' writer orders the metadata keys by a hash
    header = {"__metadata__": meta, "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(8))
    return path


def test_a_long_metadata_value_is_one_line_with_its_length(with_metadata):
    assert len(_LONG) == 12_980
    lines = _run("inspect", str(with_metadata), "--no-tui").splitlines()
    cut = json.dumps(_LONG)[: 80 - len("… (12,980 chars)")]
    assert lines[0] == (
        f'metadata: {{"format": "pt", "treetool_paths": {cut}… (12,980 chars), '
        '"note": "two\\nlines"}'
    )
    assert len(lines[0]) < 160
    assert lines[1] == "dict[1]  2 params · 8 B" and len(lines) == 3  # then the tree


def test_json_keeps_the_metadata_whole(with_metadata):
    data = json.loads(_run("ls", str(with_metadata), "--json"))
    assert data["metadata"] == {"format": "pt", "treetool_paths": _LONG, "note": "two\nlines"}


def test_short_metadata_prints_as_before(tmp_path):
    path = tmp_path / "s.safetensors"
    save_file({"w": np.zeros(2, np.float32)}, str(path), metadata={"format": "pt"})
    assert _run("inspect", str(path), "--no-tui").splitlines()[0] == 'metadata: {"format": "pt"}'


def test_get_of_a_long_string_leaf_says_its_length(tmp_path):
    import pickle

    path = tmp_path / "s.pkl"
    path.write_bytes(pickle.dumps({"s": "x" * 10_000}))
    text = "".join(_run("get", str(path), "s").split())  # as one line, whatever its wrapping
    assert text.endswith("'" + "x" * 1983 + "…(10,002chars)")  # 2,000 in all
