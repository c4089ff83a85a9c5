"""The details pane's value preview: a big file-backed leaf shows its real ends, read alone."""

from __future__ import annotations

import numpy as np
from treetool.tui.widgets.details import _preview, compute_parts

from treetool._leaves._arrays import LazyArray
from treetool._tree._model import view


class _CountingFile:
    """A file handle that adds up the bytes read through it."""

    def __init__(self, fh, owner):  # type: ignore[no-untyped-def]
        self._fh, self._owner = fh, owner

    def read(self, n=-1):  # type: ignore[no-untyped-def]
        data = self._fh.read(n)
        self._owner.read_bytes += len(data)
        return data

    def seek(self, *args):  # type: ignore[no-untyped-def]
        return self._fh.seek(*args)

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):  # type: ignore[no-untyped-def]
        return self

    def __exit__(self, *exc) -> None:  # type: ignore[no-untyped-def]
        self._fh.close()


class _Counting(LazyArray):
    """A LazyArray that counts the bytes it reads from its file."""

    __slots__ = ("read_bytes",)

    def _open(self):  # type: ignore[no-untyped-def]
        if not hasattr(self, "read_bytes"):
            self.read_bytes = 0
        return _CountingFile(super()._open(), self)


def test_a_big_leaf_previews_its_first_and_last_entries(tmp_path):
    data = np.arange(1000 * 1000, dtype=np.float32).reshape(1000, 1000)
    (tmp_path / "w.bin").write_bytes(data.tobytes())
    x = _Counting((1000, 1000), "float32", str(tmp_path / "w.bin"), 0)
    text = _preview(x)
    lines = text.splitlines()
    assert lines[-1] == "(the first and last 3 along each axis of 1000x1000)"
    grid = np.array(
        [float(v) for v in " ".join(lines[:-1]).replace("[", " ").replace("]", " ").split()]
    )
    ends = data[np.ix_([0, 1, 2, 997, 998, 999], [0, 1, 2, 997, 998, 999])]
    np.testing.assert_allclose(grid.reshape(6, 6), ends, rtol=1e-3)  # printed to 4 digits
    assert grid[-1] > 999_000  # the array's real last entry, not the end of a first slice
    assert x.read_bytes < 1000 * 4 * 8  # the corners, never the 4 MB array


def test_strings_get_a_preview_and_no_stats():
    parts = compute_parts(view({"u": np.array(["ab", "c"])}).children[0])
    assert parts == {"preview": "['ab' 'c']"}
