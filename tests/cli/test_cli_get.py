"""`treetool get` on a big file-backed leaf reads only what it shows (its corners), and
its stats only with `--stats` (over 64 MB in a local file); leaves up to that get their stats
unasked; small leaves print as before.

Bytes are counted through the reader itself: every read of array data from a file goes through
`LazyArray._open`, wrapped here to count what its file object returns.
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from treetool._leaves._arrays import LazyArray
from treetool.cli import main

ROWS, COLS = 4100, 4096  # float32: 67.2 MB in the file, over the 64 MB stats are read for
MID_ROWS, MID_COLS = 1024, 2048  # float32: 8.4 MB, whose stats `get` computes unasked


class _Counting:
    """A file object that counts the bytes its reads return."""

    def __init__(self, fh: Any, counter: list[int]) -> None:
        self._fh, self._counter = fh, counter

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self._counter[0] += len(data)
        return data

    def readinto(self, buf: Any) -> int:
        n = self._fh.readinto(buf)
        self._counter[0] += n or 0
        return n

    def __enter__(self) -> _Counting:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._fh.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)


@pytest.fixture
def counted(monkeypatch) -> list[int]:
    counter = [0]
    real = LazyArray._open

    def _open(self: LazyArray) -> Any:
        return _Counting(real(self), counter)

    monkeypatch.setattr(LazyArray, "_open", _open)
    return counter


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    """`big` (67.2 MB: zeros but for its first and last rows, 0..4095 and 5000..9095, written sparse),
    `mid` (arange, 8.4 MB) and `small`, in one safetensors file."""
    path = tmp_path_factory.mktemp("get") / "w.safetensors"
    mid = np.arange(MID_ROWS * MID_COLS, dtype=np.float32).reshape(MID_ROWS, MID_COLS)
    save_file({"mid": mid, "small": np.array([1.0, -2.0, 3.0], np.float32)}, str(path))
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
    header["big"] = {
        "dtype": "F32",
        "shape": [ROWS, COLS],
        "data_offsets": [end, end + ROWS * COLS * 4],
    }
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)) + text + raw[8 + n :])
        start = fh.tell()
        fh.write(np.arange(COLS, dtype=np.float32).tobytes())  # the first row
        fh.seek(start + (ROWS - 1) * COLS * 4)
        fh.write((np.arange(COLS, dtype=np.float32) + 5000).tobytes())
    return path


def _get(*args: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["get", *args]) == 0
    return out.getvalue()


def test_get_reads_only_the_corners_of_a_big_file_leaf(ckpt, counted):
    text = _get(str(ckpt), "big")
    assert counted[0] <= 36 * 4 * 16  # 6x6 corners of 4 bytes, with room for read-ahead
    assert counted[0] < ROWS * COLS * 4 // 1000
    lines = text.splitlines()
    assert "stats  not computed: they read all 67.2 MB from the file (pass --stats)" in lines
    assert "first and last 3 along each axis:" in lines
    assert not any(line.startswith(("min", "mean")) for line in lines)
    assert "9.095e+03]]" in text  # the last element, read from the file's end


def test_get_stats_reads_the_leaf_when_asked(ckpt, counted):
    text = _get(str(ckpt), "big", "--stats")
    assert counted[0] >= ROWS * COLS * 4  # every value, for the stats
    lines = text.splitlines()
    assert any(line.split() == ["max", "9095"] for line in lines)
    assert any(line.split() == ["zeros", "16.8M"] for line in lines)
    assert not any("not computed" in line for line in lines)


def test_get_computes_the_stats_of_a_leaf_up_to_64_mb_unasked(ckpt, counted):
    text = _get(str(ckpt), "mid")
    assert MID_ROWS * MID_COLS * 4 <= counted[0] <= 3 * MID_ROWS * MID_COLS * 4  # stats, histogram
    lines = [line.split() for line in text.splitlines()]
    assert ["max", "2.09715e+06"] in lines and ["zeros", "1"] in lines
    assert "not computed" not in text
    assert "first and last 3 along each axis:" in text
    data = json.loads(_get(str(ckpt), "mid", "--json"))
    assert data["stats"]["min"] == 0.0 and data["stats"]["max"] == MID_ROWS * MID_COLS - 1
    assert data["stats"]["size"] == MID_ROWS * MID_COLS and "stats_skipped" not in data


def test_get_of_a_subtree_shares_one_stats_budget(ckpt, counted):
    """`get` of the whole file: `mid` fits the 64 MB (read for its stats), `big` does not."""
    data = json.loads(_get(str(ckpt), "", "--json"))
    by_path = {leaf["path"]: leaf for leaf in data["leaves"]}
    assert sorted(by_path) == ["['big']", "['mid']", "['small']"]
    assert by_path["['big']"]["stats"] is None
    assert by_path["['big']"]["stats_skipped"].startswith("not computed: they read all 67.2 MB")
    assert by_path["['mid']"]["stats"]["max"] == MID_ROWS * MID_COLS - 1
    assert by_path["['small']"]["stats"]["min"] == -2.0
    assert counted[0] < 3 * MID_ROWS * MID_COLS * 4  # big was not read


def test_get_json_says_the_stats_were_skipped(ckpt, counted):
    data = json.loads(_get(str(ckpt), "big", "--json"))
    assert counted[0] <= 36 * 4 * 16
    assert data["stats"] is None and data["values"] is None
    assert (
        data["stats_skipped"] == "not computed: they read all 67.2 MB from the file (pass --stats)"
    )
    assert (data["shape"], data["dtype"], data["nbytes"]) == ([ROWS, COLS], "float32", 67174400)
    full = json.loads(_get(str(ckpt), "big", "--json", "--stats"))
    assert full["stats"]["max"] == 9095.0 and "stats_skipped" not in full


@pytest.mark.slow
def test_get_small_leaf_output_is_unchanged(ckpt):
    cmd = [sys.executable, "-m", "treetool.cli", "get", str(ckpt), "small"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={"COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    lines = [line.rstrip() for line in out.stdout.splitlines()]
    assert lines[:7] == [
        "path    ['small']",
        "type    LazyArray",
        "shape   (3,)",
        "dtype   float32",
        "params  3",
        "bytes   12 B",
        "device  file",
    ]
    assert ["min", "-2"] in [line.split() for line in lines]
    assert lines[-1] == "[ 1. -2.  3.]"
    assert "not computed" not in out.stdout
    data = json.loads(_get(str(ckpt), "small", "--json"))
    assert data["stats"]["min"] == -2.0 and data["values"] == [1.0, -2.0, 3.0]
    assert "stats_skipped" not in data
