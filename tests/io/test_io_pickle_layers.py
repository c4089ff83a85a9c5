"""The layers of a nested checkpoint, made in batches: each record's arrays as views of a block.

`run_layers` checks a batch of layers byte by byte, then makes each record's arrays of the
batch from one new block (one numpy copy) and gives the stacks, the memo and the dicts the
opcodes' effect. Each test reads the same bytes with and without the shortcuts
(`_same_outcome`: the same tree, dtypes, byte orders, layouts and values, or the same error)
and compares with `pickle.loads` of our own bytes; small `BLOCK_MAX`/`SPAN_MAX` make the
per-array fallback and many batch ends happen in small files.
"""

from __future__ import annotations

import itertools
import pickle
import pickletools
import struct
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_io_pickle_runs import _same_outcome

import treetool.io as tio
from treetool.io._pickle import _layers
from treetool.io._pickle._machine import _Machine
from treetool.io._pickle._state import _RAW, _State
from treetool.io._safety._budget import Budget


def _agrees(got: Any, want: Any, src: Any) -> None:
    """`got` holds what `pickle.loads` gave (`want`), with the dtypes, byte orders and layouts
    of the tree that was written (`src`)."""
    assert type(got) is type(want) is type(src)
    if isinstance(want, dict):
        assert list(got) == list(want) == list(src)
        for k in want:
            _agrees(got[k], want[k], src[k])
    elif isinstance(want, np.ndarray):
        assert got.shape == want.shape == src.shape
        # (numpy's unpickling makes big-endian arrays native for protocols < 5; the reader
        # keeps the file's byte order: the same values)
        assert got.dtype.str == src.dtype.str
        assert (got.dtype.kind, got.dtype.itemsize) == (want.dtype.kind, want.dtype.itemsize)
        assert got.flags.f_contiguous == src.flags.f_contiguous
        assert got.flags.c_contiguous == src.flags.c_contiguous
        assert np.array_equal(got, want) and got.tobytes("A") == src.tobytes("A")
    else:
        assert got == want == src


def _leaves(x: Any) -> list[np.ndarray]:
    if isinstance(x, dict):
        return [a for v in x.values() for a in _leaves(v)]
    if isinstance(x, list | tuple):
        return [a for v in x for a in _leaves(v)]
    return [x] if isinstance(x, np.ndarray) else []


def _check_leaves(tree: Any, general: Any) -> None:
    """Every array is as writeable as the opcodes make it (a block's rows: read-only, as the
    arrays the reader makes from the file's bytes), and no two share a byte (writing one never
    changes another)."""
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    seen: set[int] = set()
    for a, b in zip(_leaves(tree), _leaves(general), strict=True):
        assert a.flags.writeable == b.flags.writeable
        if a.nbytes and id(a) not in seen:  # (a layer the file shares: its arrays once)
            seen.add(id(a))
            start = a.__array_interface__["data"][0]
            spans[id(a.base)].append((start, start + a.nbytes))
    for got in spans.values():
        got.sort()
        for (_, end), (start, _) in itertools.pairwise(got):
            assert end <= start


def _both(path: Path, lazy: bool = True) -> tuple[Any, Any]:
    """The trees read with and without the shortcuts (the same, `_same_outcome` says)."""
    _same_outcome(path)
    old = _State.fast_arrays
    try:
        trees = []
        for fast in (True, False):
            _State.fast_arrays = fast
            trees.append(tio.read(path, lazy=lazy).tree)
    finally:
        _State.fast_arrays = old
    _check_leaves(*trees)
    return trees[0], trees[1]


# -- random runs of layers, broken now and then ---------------------------------------------

_DTYPES = ["<f4", ">f4", "<f8", "|i1", "<i2", ">i8", "|b1", "<c8", "<f2"]


@st.composite
def _member(draw: st.DrawFn) -> tuple[str, tuple[int, ...], bool]:
    dt = draw(st.sampled_from(_DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=3)))
    fortran = len(shape) >= 2 and draw(st.integers(0, 4)) == 0
    return dt, shape, fortran


def _array(dt: str, shape: tuple[int, ...], fortran: bool, seed: int) -> np.ndarray:
    size = int(np.prod(shape))
    a = ((np.arange(size) + 7 * seed) % 100).astype(dt).reshape(shape)
    return np.asfortranarray(a) if fortran else a


# how a layer of the run differs from the others, now and then
_BREAKS = st.sampled_from(
    ["dtype", "shape", "byteorder", "fortran", "missing", "extra", "scalar", "intkey", "shared"]
)


@st.composite
def _runs(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(
        st.lists(
            st.sampled_from(["b", "w", "kernel", "bias", "s"]), min_size=1, max_size=4, unique=True
        )
    )
    members = {k: draw(_member()) for k in keys}
    n = draw(st.integers(2, 40))
    breaks = draw(st.dictionaries(st.integers(0, n - 1), _BREAKS, max_size=4))
    tree: dict[Any, Any] = {}
    for i in range(n):
        layer: dict[Any, Any] = {k: _array(*m, seed=i) for k, m in members.items()}
        how = breaks.get(i)
        k0 = keys[0]
        dt, shape, fortran = members[k0]
        if how == "dtype":
            layer[k0] = _array("<i4" if dt != "<i4" else "<f4", shape, fortran, i)
        elif how == "shape":
            layer[k0] = _array(dt, (*shape, 2), False, i)
        elif how == "byteorder" and np.dtype(dt).itemsize > 1:
            layer[k0] = layer[k0].astype(np.dtype(dt).newbyteorder())
        elif how == "fortran" and len(shape) >= 2:
            layer[k0] = (
                np.asfortranarray(layer[k0]) if not fortran else np.ascontiguousarray(layer[k0])
            )
        elif how == "missing":
            del layer[k0]
        elif how == "extra":
            layer["extra"] = _array("<f4", (3,), False, i)
        elif how == "scalar":
            layer["step"] = i
        elif how == "intkey":
            layer[7] = _array(dt, shape, False, i)
        elif how == "shared" and i:
            layer = tree[f"l{i - 1}"]
        tree[f"l{i}"] = layer
    return tree


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    tree=_runs(),
    protocol=st.sampled_from([4, 5]),
    limits=st.sampled_from([(1 << 16, 1 << 20), (16, 1 << 20), (1 << 16, 200), (8, 64)]),
    lazy=st.booleans(),
)
def test_random_runs_of_layers_read_as_the_opcodes_and_pickle_read_them(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tree: Any,
    protocol: int,
    limits: Any,
    lazy: bool,
) -> None:
    monkeypatch.setattr(_layers, "BLOCK_MAX", limits[0])
    monkeypatch.setattr(_layers, "SPAN_MAX", limits[1])
    data = pickle.dumps(tree, protocol=protocol)
    f = tmp_path / "layers.pkl"
    f.write_bytes(data)
    got, _ = _both(f)
    _agrees(got, pickle.loads(data), tree)
    if not lazy:
        eager, _ = _both(f, lazy=False)
        _agrees(eager, pickle.loads(data), tree)


# -- what the batches make ------------------------------------------------------------------


def _nested(n: int) -> dict[str, Any]:
    return {
        f"l{i}": {"b": np.full(8, i, np.float32), "w": np.full((8, 8), i, "<f8")} for i in range(n)
    }


def test_a_record_s_arrays_are_rows_of_one_block_holding_exactly_their_bytes(
    tmp_path: Path,
) -> None:
    f = tmp_path / "nested.pkl"
    f.write_bytes(pickle.dumps(_nested(300), protocol=4))
    got, _ = _both(f)
    ws = [got[f"l{i}"]["w"] for i in range(300)]
    assert all(w.dtype.str == "<f8" and w.shape == (8, 8) and w.flags.c_contiguous for w in ws)
    assert [float(w[7, 7]) for w in ws] == [float(i) for i in range(300)]
    for w in ws:
        assert not w.flags.writeable
        with pytest.raises(ValueError):
            w.flags.writeable = True
    # the first layers (and those after a FRAME inside a record) are read by the machine:
    # views of their bytes; the others are rows of blocks
    rows = [w for w in ws if isinstance(w.base, np.ndarray) and w.base.flags.owndata]
    assert len(rows) >= 290
    blocks = {id(w.base): w.base for w in rows}
    assert 2 <= len(blocks) <= 3  # (a batch ends at a FRAME inside a record)
    # the blocks hold the arrays' bytes and nothing else: no more memory than the file's data
    assert sum(b.nbytes for b in blocks.values()) == sum(w.nbytes for w in rows)
    assert all(b.dtype == np.uint8 and not b.flags.writeable for b in blocks.values())


def _with_fetch(data: bytes, idx: int) -> bytes:
    """`data` (a dict) with its STOP replaced by `LONG_BINGET idx, TUPLE2, STOP`:
    the tree and memo entry `idx`."""
    assert data.endswith(b".")
    return data[:-1] + b"j" + struct.pack("<I", idx) + b"\x86."


def _memo_index(data: bytes, want: bytes) -> int:
    """The memo index of the bytes `want` as the opcodes memoise them."""
    old = _State.fast_arrays
    _State.fast_arrays = False
    try:
        m = _Machine(data, "f.pkl", True, False, Budget("f.pkl", len(data)), set())
        m.run()
    finally:
        _State.fast_arrays = old
    (idx,) = [i for i, x in enumerate(m.memo) if type(x) is bytes and x == want]
    return idx


def test_a_file_that_fetches_an_array_s_bytes_gets_them(tmp_path: Path) -> None:
    tree = _nested(60)
    data = pickle.dumps(tree, protocol=4)
    raw = tree["l40"]["w"].tobytes()
    idx = _memo_index(data, raw)
    m = _Machine(data, "f.pkl", True, False, Budget("f.pkl", len(data)), set())
    m.run()
    assert m.memo[idx] is _RAW  # the batch made no bytes object for it
    for fetch in (idx, idx + 1):  # the bytes, and the array's state (made from them)
        f = tmp_path / f"fetch{fetch}.pkl"
        more = _with_fetch(data, fetch)
        f.write_bytes(more)
        got = _same_outcome(f)[1]
        want = pickle.loads(more)
        _agrees(got[0], want[0], tree)
        if fetch == idx:
            assert got[1] == want[1] == raw and type(got[1]) is bytes
        else:
            assert got[1][0] == 1 and got[1][1] == (8, 8) and got[1][4] == raw


def test_a_put_over_an_array_keeps_the_bytes_fetched_after_it(tmp_path: Path) -> None:
    # LONG_BINPUT over the slot of l40's kernel, then a fetch of its bytes and of its state:
    # the placeholders are made from the array before its slot changes
    tree = _nested(60)
    data = pickle.dumps(tree, protocol=4)
    raw = tree["l40"]["w"].tobytes()
    idx = _memo_index(data, raw)
    tail = b"r" + struct.pack("<I", idx - 2)  # the stack top (the tree) over the array's slot
    tail += b"j" + struct.pack("<I", idx) + b"j" + struct.pack("<I", idx + 1) + b"\x87."
    f = tmp_path / "put.pkl"
    more = data[:-1] + tail
    f.write_bytes(more)
    got = _same_outcome(f)[1]
    want = pickle.loads(more)
    assert got[1] == want[1] == raw
    assert got[2][4] == raw and got[2][1] == (8, 8)


def test_a_frame_inside_a_record_ends_the_batch_where_it_is(tmp_path: Path) -> None:
    # the FRAMEs pickle starts every 64 KiB fall anywhere: every layer still reads the same
    data = pickle.dumps(_nested(2000), protocol=4)
    frames = [at for op, _, at in pickletools.genops(data) if op.name == "FRAME"]
    assert len(frames) > 3
    f = tmp_path / "framed.pkl"
    f.write_bytes(data)
    got, _ = _both(f)
    assert [float(got[f"l{i}"]["b"][3]) for i in range(2000)] == [float(i) for i in range(2000)]


def test_a_batch_cut_anywhere_fails_as_the_opcodes_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_layers, "SPAN_MAX", 300)
    data = pickle.dumps(_nested(12), protocol=4)
    f = tmp_path / "cut.pkl"
    start = data.index(b"\x8c\x02l6")
    for end in range(start, start + 700, 7):
        f.write_bytes(data[:end])
        got = _same_outcome(f)
        assert got[0] == "raised" and "truncated pickle" in got[2], (end, got)
        kept = _same_outcome(f, partial=True)
        assert kept[0] == "tree"


@pytest.mark.parametrize("block_max", [1 << 16, 4])
def test_fortran_and_big_arrays_of_a_layer_are_made_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_max: int
) -> None:
    monkeypatch.setattr(_layers, "BLOCK_MAX", block_max)
    tree = {
        f"l{i}": {
            "b": np.full(3, i, np.float32),
            "w": np.asfortranarray(np.arange(6, dtype=np.float32).reshape(3, 2) + i),
        }
        for i in range(50)
    }
    data = pickle.dumps(tree, protocol=4)
    f = tmp_path / "fortran.pkl"
    f.write_bytes(data)
    got, _ = _both(f)
    _agrees(got, pickle.loads(data), tree)
    assert all(got[f"l{i}"]["w"].flags.f_contiguous for i in range(50))
    m = _Machine(data, "f.pkl", True, False, Budget("f.pkl", len(data)), set())
    m.run()
    # the kernels (Fortran order) keep their own bytes in the memo; the biases are rows of
    # blocks (placeholders) unless they are bigger than a block's arrays may be
    n_raw = sum(x is _RAW for x in m.memo)
    assert n_raw == (0 if block_max == 4 else 50 - 3)  # (l0 to l2: read by the machine)


def test_a_batch_spanning_many_bytes_copies_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a layer longer than twice a batch's span (many arrays, or big ones): each array made on
    # its own from its bytes, no copy of the batch's bytes for blocks
    monkeypatch.setattr(_layers, "SPAN_MAX", 100)
    tree = _nested(30)
    data = pickle.dumps(tree, protocol=4)
    f = tmp_path / "wide.pkl"
    f.write_bytes(data)
    got, _ = _both(f)
    _agrees(got, pickle.loads(data), tree)
    m = _Machine(data, "f.pkl", True, False, Budget("f.pkl", len(data)), set())
    m.run()
    assert not any(x is _RAW for x in m.memo)
    assert all(type(got[f"l{i}"]["w"].base) is bytes for i in range(1, 30))
