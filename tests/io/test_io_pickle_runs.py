"""Runs of numpy arrays read in one loop give what the opcode-by-opcode path gives.

The pickle reader reads a dict's or a list's arrays in one loop while each record (a key, the
BINGET of `_reconstruct`, a header seen before, the data, MEMOIZE TUPLE MEMOIZE BUILD) is more
of the same, and falls back to the opcodes at the first record that is anything else.
`_State.fast_arrays = False` turns every array shortcut off: each test reads the same bytes
both ways and wants the same tree, or the same error, byte offset included.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import treetool.io as tio
from treetool._errors import LoadError
from treetool._leaves._arrays import LazyArray
from treetool.io._opaque import GlobalRef, Opaque
from treetool.io._pickle._state import _RAW, _STATE_C, _STATE_F, _State


def _outcome(path: Path, fast: bool, partial: bool = False) -> tuple[Any, ...]:
    """('tree', tree, error) or ('raised', class name, message) of one read."""
    old = _State.fast_arrays
    _State.fast_arrays = fast
    try:
        loaded = tio.read(path, partial=partial)
    except LoadError as e:
        return ("raised", type(e).__name__, str(e))
    finally:
        _State.fast_arrays = old
    return ("tree", loaded.tree, loaded.error)


def _same(a: Any, b: Any, where: str = "") -> None:
    """`a` and `b` are the same tree: types, keys in order, array bytes, dtypes and layout."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, dict):
        assert len(a) == len(b), where
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            _same(ka, kb, f"{where} key")
            _same(va, vb, f"{where}[{ka!r}]")
    elif isinstance(a, set | frozenset):  # of objects without equality: by repr
        assert sorted(map(repr, a)) == sorted(map(repr, b)), where
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.dtype.str == b.dtype.str, where
        assert a.shape == b.shape, where
        assert a.flags.f_contiguous == b.flags.f_contiguous, where
        assert a.flags.c_contiguous == b.flags.c_contiguous, where
        if a.dtype.hasobject:
            assert a.tolist() == b.tolist(), where
        else:
            assert a.tobytes(order="A") == b.tobytes(order="A"), where
    elif isinstance(a, LazyArray):
        assert (a.shape, a.dtype.str, a.offset, a.fortran_order, a.file) == (
            b.shape,
            b.dtype.str,
            b.offset,
            b.fortran_order,
            b.file,
        ), where
    elif isinstance(a, Opaque):  # a global that is not run, and what the file gave it
        for name in Opaque.__slots__:
            _same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    elif isinstance(a, GlobalRef):
        assert (a.class_path, a.tag) == (b.class_path, b.tag), where
    elif type(a).__module__.startswith("treetool."):  # PendingDtype... in a partial tree
        for name in type(a).__slots__:
            _same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    else:
        assert a == b, where


def _same_outcome(path: Path, partial: bool = False) -> tuple[Any, ...]:
    fast, general = _outcome(path, True, partial), _outcome(path, False, partial)
    assert fast[0] == general[0], (fast, general)
    if fast[0] == "raised":
        assert fast == general
    else:
        _same(fast[1], general[1])
        assert fast[2] == general[2]
    return fast


# -- random trees of small arrays -----------------------------------------------------------

_DTYPES = ["<f4", "<f8", "<f2", "|i1", "<u2", "<i8", "|b1", "<c8", ">f4", ">i2", ">f8", "O"]


@st.composite
def _arrays(draw: st.DrawFn) -> np.ndarray:
    dt = np.dtype(draw(st.sampled_from(_DTYPES)))
    if draw(st.integers(0, 19)) == 0:  # now and then one that stays in the file (>= 4096 B)
        shape: tuple[int, ...] = (draw(st.sampled_from([1030, 2100])),)
    else:
        shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    size = int(np.prod(shape))
    if dt.kind == "O":
        a = np.empty(shape, object)
        a.reshape(-1)[:] = list(range(size))
    else:
        a = np.arange(size).astype(dt).reshape(shape)
    return np.asfortranarray(a) if len(shape) >= 2 and draw(st.booleans()) else a


_KEYS = st.one_of(
    st.sampled_from(["w", "b", "kernel", "bias", "scale"]),  # repeated: BINGET from the memo
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=6),
)

_TREES = st.recursive(
    _arrays(),
    lambda kids: st.one_of(
        st.dictionaries(_KEYS, kids, max_size=6),
        st.lists(kids, max_size=6),
    ),
    max_leaves=24,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tree=_TREES, protocol=st.sampled_from([2, 4, 5]))
def test_random_trees_of_arrays_read_the_same_with_and_without_the_shortcuts(
    tmp_path: Path, tree: Any, protocol: int
) -> None:
    f = tmp_path / "t.pkl"
    data = pickle.dumps(tree, protocol=protocol)
    f.write_bytes(data)
    got = _same_outcome(f)
    want = pickle.loads(data)  # our own bytes: safe to run
    if got[0] == "tree":
        _agrees_with_pickle(got[1], want)


def _agrees_with_pickle(got: Any, want: Any) -> None:
    if isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            _agrees_with_pickle(got[k], want[k])
    elif isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _agrees_with_pickle(g, w)
    else:
        # numpy's own unpickling gives native byte order for protocols < 5; the reader keeps
        # the file's (the same values)
        assert got.shape == want.shape
        assert (got.dtype.kind, got.dtype.itemsize) == (want.dtype.kind, want.dtype.itemsize)
        assert np.array_equal(np.asarray(got), want)


def test_a_dict_of_arrays_takes_the_run_and_makes_no_state_tuples(tmp_path: Path) -> None:
    # the shortcut is taken (no (1, shape, dtype, fortran, raw) tuple in the memo after the
    # first array of each header), and the tree is the general path's
    from treetool.io._pickle._machine import _Machine
    from treetool.io._safety._budget import Budget

    tree = {f"k{i}": np.full(2, i, np.float32) for i in range(300)}
    tree |= {f"f{i}": np.asfortranarray(np.full((2, 3), i, "<f8")) for i in range(50)}
    # pickle writes a big-endian dtype again for each array (no memo): the opcode path
    tree |= {f"b{i}": np.full(2, i, ">i4") for i in range(10)}
    data = pickle.dumps(tree, protocol=4)
    m = _Machine(data, "f.pkl", True, False, Budget("f.pkl", len(data)), set())
    got = m.run()
    # all but the first array of each header: it names its header first
    assert sum(1 for v in m.memo if v is _STATE_C) == 299
    assert sum(1 for v in m.memo if v is _STATE_F) == 49
    f = tmp_path / "d.pkl"
    f.write_bytes(data)
    _same_outcome(f)
    assert list(got) == list(tree)
    assert got["f7"].flags.f_contiguous and got["f7"].dtype.str == "<f8"
    assert got["f7"].tolist() == [[7.0] * 3] * 2
    assert got["b9"].dtype.str == ">i4" and got["b9"].tolist() == [9, 9]
    assert got["k299"].tolist() == [299.0, 299.0]


# -- records that start like the others and then lie ------------------------------------------


def _dict_file() -> tuple[bytes, int]:
    """A dict of 40 same-shaped arrays, and the offset of the record of key 'k20'."""
    data = pickle.dumps({f"k{i}": np.full(2, i, np.float32) for i in range(40)}, protocol=4)
    at = data.index(b"\x8c\x03k20\x94")
    return data, at


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    f = tmp_path / name
    f.write_bytes(data)
    return f


def _record_layout(data: bytes, at: int) -> dict[str, int]:
    # \x8c n key \x94 h idx <header ...  dtype BINGET ... C n> data \x94t\x94b
    q = at + 2 + data[at + 1]
    hdr = q + 3
    cpos = data.index(b"C\x08", hdr)
    return {
        "keylen": at + 1,
        "memoize": q,
        "binget": q + 1,
        "idx": q + 2,
        "dtype_idx": cpos - 2,  # BINGET dtype, NEWFALSE, C n
        "nbytes": cpos + 1,
        "trailer": cpos + 2 + 8,
    }


_LIES = [
    ("keylen", 0x06),
    ("keylen", 0x02),
    ("keylen", 0xFF),
    ("memoize", 0x30),
    ("binget", 0x6A),
    ("idx", 0x07),  # the ndarray global, not _reconstruct
    ("idx", 0x01),  # the first key
    ("idx", 0xFE),  # beyond the memo
    ("dtype_idx", 0x01),  # a string where the dtype was
    ("dtype_idx", 0xF0),  # beyond the memo
    ("nbytes", 0x04),
    ("nbytes", 0x0C),
    ("nbytes", 0x00),
    ("trailer", 0x2E),
    ("trailer", 0x62),
]


@pytest.mark.parametrize(("field", "byte"), _LIES)
def test_a_record_that_lies_fails_or_reads_as_the_opcodes_do(
    tmp_path: Path, field: str, byte: int
) -> None:
    data, at = _dict_file()
    pos = _record_layout(data, at)[field]
    assert data[pos] != byte
    bad = data[:pos] + bytes([byte]) + data[pos + 1 :]
    got = _same_outcome(_write(tmp_path, "lie.pkl", bad))
    if got[0] == "raised":
        assert got[2].startswith(str(tmp_path / "lie.pkl") + ": ")
    _same_outcome(_write(tmp_path, "lie.pkl", bad), partial=True)


def test_a_key_that_is_not_utf8_fails_at_the_same_byte(tmp_path: Path) -> None:
    data, at = _dict_file()
    bad = data[: at + 2] + b"\xff\xfe\xfd" + data[at + 5 :]
    got = _same_outcome(_write(tmp_path, "utf8.pkl", bad))
    assert got == (
        "raised",
        "LoadError",
        f"{tmp_path / 'utf8.pkl'}: bad UTF-8 string (at byte {at + 1})",
    )


def test_a_file_cut_anywhere_in_a_run_fails_the_same_way(tmp_path: Path) -> None:
    data, at = _dict_file()
    f = tmp_path / "cut.pkl"
    for end in range(at - 3, at + 90):  # two records, and the bytes around them
        f.write_bytes(data[:end])
        got = _same_outcome(f)
        assert got[0] == "raised" and "truncated pickle" in got[2], (end, got)
        kept = _same_outcome(f, partial=True)
        assert kept[0] == "tree" and "truncated" in kept[2]


def test_a_list_of_arrays_whose_record_lies(tmp_path: Path) -> None:
    data = pickle.dumps([np.full(3, i, np.int16) for i in range(30)], protocol=4)
    rec = data.index(b"\x94t\x94b", data.index(b"\x94t\x94b") + 4) + 4  # the third array
    assert data[rec] == 0x68
    f = tmp_path / "list.pkl"
    for pos, byte in ((rec + 1, 0x01), (rec + 1, 0xFE), (rec, 0x4E), (rec + 5, 0x05)):
        f.write_bytes(data[:pos] + bytes([byte]) + data[pos + 1 :])
        _same_outcome(f)
    f.write_bytes(data)
    assert [a.tolist() for a in _same_outcome(f)[1]] == [[i] * 3 for i in range(30)]


def _memo_slots(data: bytes) -> tuple[int, int]:
    """The memo slots of the string 'w' and of the first array (the MEMOIZE after REDUCE)."""
    import pickletools

    n, prev, w, arr = 0, None, -1, -1
    for op, arg, _ in pickletools.genops(data):
        if op.name == "MEMOIZE":
            if prev == ("SHORT_BINUNICODE", "w"):
                w = n
            elif prev == ("REDUCE", None) and arr < 0:
                arr = n
            n += 1
        prev = (op.name, arg)
    return w, arr


def test_a_key_from_the_memo_that_is_not_a_string(tmp_path: Path) -> None:
    # nested dicts fetch repeated keys from the memo (BINGET); one that fetches an array
    # instead (a dict key that is unhashable) fails as the opcodes fail
    tree = {f"l{i}": {"b": np.zeros(2, np.float32), "w": np.ones(2, np.float32)} for i in range(9)}
    data = pickle.dumps(tree, protocol=4)
    f = tmp_path / "nested.pkl"
    f.write_bytes(data)
    got = _same_outcome(f)
    assert got[1]["l8"]["w"].tolist() == [1.0, 1.0] and list(got[1]["l8"]) == ["b", "w"]
    w_slot, arr_slot = _memo_slots(data)
    assert w_slot > 0 and arr_slot > 0
    binget_w = b"h" + bytes([w_slot]) + b"h"  # BINGET 'w', BINGET _reconstruct
    assert data.count(binget_w) == 8
    later = data.index(binget_w, data.index(b"\x8c\x02l5\x94"))
    for slot in (arr_slot, 0xFE):
        f.write_bytes(data[: later + 1] + bytes([slot]) + data[later + 2 :])
        got = _same_outcome(f)
        assert got[0] == "raised", got


def test_a_tuple_key_from_the_memo_is_marked_shared_as_the_opcodes_mark_it(
    tmp_path: Path,
) -> None:
    # a key fetched from the memo that is a container (here a tuple) is a shared reference
    # for the tree's checks: the run leaves such a record to the opcodes
    from treetool.io._pickle._machine import _Machine
    from treetool.io._safety._budget import Budget

    k = ("a", 1)
    tree = {f"l{i}": {"b": np.zeros(2, np.float32), k: np.ones(2, np.float32)} for i in range(9)}
    data = pickle.dumps(tree, protocol=4)
    shared = []
    for fast in (True, False):
        old = _State.fast_arrays
        _State.fast_arrays = fast
        try:
            m = _Machine(data, "f.pkl", True, False, Budget("f.pkl", len(data)), set())
            got = m.run()
        finally:
            _State.fast_arrays = old
        assert got["l8"][k].tolist() == [1.0, 1.0]
        shared.append(len(m.shared))
    assert shared[0] == shared[1] == 1  # the one tuple, fetched 8 times
    f = tmp_path / "tuple-keys.pkl"
    f.write_bytes(data)
    _same_outcome(f)


def test_a_header_change_on_a_key_from_the_memo_is_not_missed(tmp_path: Path) -> None:
    # in "y": p0-p2 have one header (the run compares whole records from p2 on); "w" comes
    # from the memo with another header seen before (int32, the same size); p3 is float32
    f32, i32 = np.float32, np.int32
    x = {"q": np.full(2, 0, f32), "w": np.full(2, 0, i32), "v": np.full(2, 0, i32)}
    y = {f"p{i}": np.full(2, i, f32) for i in range(3)}
    y |= {"w": np.full(2, 7, i32), "p3": np.full(2, 3, f32)}
    data = pickle.dumps({"x": x, "y": y}, protocol=4)
    assert data.count(b"\x8c\x01w\x94") == 1  # the second "w" is a BINGET
    f = tmp_path / "switch.pkl"
    f.write_bytes(data)
    got = _same_outcome(f)[1]["y"]
    assert [(k, v.dtype.name, v.tolist()) for k, v in got.items()] == [
        ("p0", "float32", [0.0, 0.0]),
        ("p1", "float32", [1.0, 1.0]),
        ("p2", "float32", [2.0, 2.0]),
        ("w", "int32", [7, 7]),
        ("p3", "float32", [3.0, 3.0]),
    ]


# -- the run goes on from one layer of a nested checkpoint to the next ----------------------


def _layers_file(n: int = 6) -> tuple[bytes, int]:
    """`{"l{i}": {"b": f32[3], "w": f32[2,2]}}` and the offset of the SETITEMS that ends l2."""
    tree = {
        f"l{i}": {"b": np.full(3, i, np.float32), "w": np.full((2, 2), i, np.float32)}
        for i in range(n)
    }
    data = pickle.dumps(tree, protocol=4)
    at = data.index(b"u\x8c\x02l3\x94}\x94(")
    return data, at


def test_a_nested_checkpoint_is_read_in_one_run_across_its_layers(tmp_path: Path) -> None:
    from treetool.io._pickle._machine import _Machine
    from treetool.io._safety._budget import Budget

    data, _ = _layers_file(40)
    f = tmp_path / "nested.pkl"
    f.write_bytes(data)
    got = _same_outcome(f)[1]
    assert list(got) == [f"l{i}" for i in range(40)]
    assert [(k, v.shape, v.dtype.name) for k, v in got["l39"].items()] == [
        ("b", (3,), "float32"),
        ("w", (2, 2), "float32"),
    ]
    assert got["l39"]["w"].tolist() == [[39.0, 39.0], [39.0, 39.0]]
    # the memo is the opcodes' memo, entry by entry (arrays compared by their bytes)
    memos = []
    for fast in (True, False):
        old = _State.fast_arrays
        _State.fast_arrays = fast
        try:
            m = _Machine(data, "f.pkl", True, False, Budget("f.pkl", len(data)), set())
            m.run()
        finally:
            _State.fast_arrays = old
        # an array's bytes the layers left as a placeholder: the bytes, as a fetch makes them
        raws = [i for i, x in enumerate(m.memo) if x is _RAW]
        assert bool(raws) == fast
        for i in raws:
            assert m.memo_special(i) == m.memo[i - 2].tobytes()
        memos.append([x.tobytes() if isinstance(x, np.ndarray) else x for x in m.memo])
    assert len(memos[0]) == len(memos[1])
    for i, (a, b) in enumerate(zip(*memos, strict=True)):
        if a is _STATE_C or a is _STATE_F:  # an array's state, made only if it is fetched
            assert type(b) is tuple and b[0] == 1, i
            continue
        assert type(a) is type(b), i
        if isinstance(a, dict):
            assert list(a) == list(b), i
        else:
            assert a == b or repr(a) == repr(b), i


@pytest.mark.parametrize(
    "layer",
    [
        {"b": np.zeros(3, np.float32), "step": 5, "w": np.ones((2, 2), np.float32)},  # a scalar
        {"w": np.ones((2, 2), np.float32)},  # one record
        {},  # no records: EMPTY_DICT then the next key
        {"b": np.zeros(3, np.float64), "w": np.ones((2, 2), np.float32)},  # a new header
        {3: np.zeros(3, np.float32)},  # a key that is not a string
        [np.zeros(3, np.float32)],  # a list, not a dict
        np.zeros(3, np.float32),  # an array, no dict
    ],
)
def test_a_layer_that_is_something_else_reads_as_the_opcodes_do(tmp_path: Path, layer: Any) -> None:
    tree: dict[Any, Any] = {
        f"l{i}": {"b": np.full(3, i, np.float32), "w": np.full((2, 2), i, np.float32)}
        for i in range(6)
    }
    tree["l3"] = layer
    tree["l4"] = tree["l1"]  # a layer shared through the memo (BINGET, not EMPTY_DICT)
    f = tmp_path / "odd.pkl"
    data = pickle.dumps(tree, protocol=4)
    f.write_bytes(data)
    got = _same_outcome(f)
    assert _plain(got[1]) == _plain(pickle.loads(data))


def _plain(x: Any) -> Any:
    """A tree with each array as (shape, dtype name, values): comparable with `==`."""
    if isinstance(x, dict):
        return [(k, _plain(v)) for k, v in x.items()]
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return (x.shape, x.dtype.name, x.tolist())
    return x


def test_a_layer_cut_or_changed_anywhere_reads_as_the_opcodes_do(
    tmp_path: Path,
) -> None:
    data, at = _layers_file()
    f = tmp_path / "t.pkl"
    layer = data.index(b"u\x8c\x02l4") - at  # the bytes of one layer
    for end in range(at - 2, at + layer + 12):
        f.write_bytes(data[:end])
        got = _same_outcome(f)
        assert got[0] == "raised" and "truncated pickle" in got[2], (end, got)
    for pos in range(at - 1, at + layer + 12):
        for byte in (0x00, 0x28, 0x75, 0x7D, 0x8C, 0x94, 0xFF, data[pos] ^ 1):
            f.write_bytes(data[:pos] + bytes([byte]) + data[pos + 1 :])
            _same_outcome(f)


def test_the_walk_counts_layers_of_leaves_as_it_counts_any_container() -> None:
    # walk_check counts a dict of leaves in place (not pushed): the same expanded size and
    # depth as a walk of it, shared layers counted at every reference, limits as before
    from treetool.io._pickle._ops import walk_check
    from treetool.io._safety._budget import Budget, BudgetError

    x = np.zeros(2, np.float32)
    layers = {f"l{i}": {"b": x, "w": x, "n": 3} for i in range(10)}
    shared = {"b": x}
    tree = {"layers": layers, "s1": shared, "s2": shared, "odd": {"a": [x]}}
    # 4 + 10 + 30 (the layers) + 1 + 1 (the shared dict, twice) + 1 + 1 (the list)
    assert walk_check(tree, Budget("f", 0), {id(shared)}, False).expanded == 48
    assert walk_check(tree, Budget("f", 0), None, False).expanded == 48
    with pytest.raises(BudgetError, match="nested deeper than 2 levels"):
        walk_check({"a": layers}, Budget("f", 0, max_depth=2), set(), False)
    walk_check({"a": layers}, Budget("f", 0, max_depth=3), set(), False)


def test_the_walk_counts_all_layers_at_once_only_when_each_is_a_dict_of_leaves() -> None:
    # walk_check counts a container whose children are all dicts of leaves in one step; a
    # child with a global in it, a container in it, or handed out twice is walked as before
    from treetool.io._pickle._ops import walk_check
    from treetool.io._safety._budget import Budget

    x = np.zeros(2, np.float32)
    layers = {f"l{i}": {"b": x, "w": x} for i in range(5)}
    assert walk_check({"t": layers}, Budget("f", 0), set(), False).expanded == 1 + 5 + 10
    layers["l3"]["g"] = GlobalRef("os", "system")
    r = walk_check({"t": layers}, Budget("f", 0), set(), False)
    assert (r.blocked, r.expanded) == (["os.system"], 1 + 5 + 11)
    del layers["l3"]["g"]
    layers["l1"]["n"] = [x, x, x]  # a list in one layer: walked into
    assert walk_check({"t": layers}, Budget("f", 0), set(), False).expanded == 1 + 5 + 11 + 3
    del layers["l1"]["n"]
    # l2 handed out twice: counted at both references (2 + 5 + 4 x 2 + 2 + 2)
    tree = {"a": layers, "b": layers["l2"]}
    assert walk_check(tree, Budget("f", 0), {id(layers["l2"])}, False).expanded == 19
    assert walk_check([layers["l0"], layers["l1"]], Budget("f", 0), set(), False).expanded == 6


def test_frames_between_layers_are_read_as_the_opcodes_read_them(tmp_path: Path) -> None:
    # pickle starts a FRAME every 64 KiB: before a record, a layer's key, or inside a record
    import pickletools
    import struct

    data, _ = _layers_file(3000)
    frames = [at for op, _, at in pickletools.genops(data) if op.name == "FRAME"][1:]
    assert len(frames) >= 3
    assert {data[at - 1] for at in frames} & {0x62, 0x75}  # after a record or a layer's end
    f = tmp_path / "framed.pkl"
    f.write_bytes(data)
    got = _same_outcome(f)[1]
    assert list(got)[-1] == "l2999" and got["l2999"]["w"].tolist() == [[2999.0] * 2] * 2
    for at in frames[:3]:  # a FRAME longer than the rest of the file: the same error
        bad = data[: at + 1] + struct.pack("<Q", len(data)) + data[at + 9 :]
        f.write_bytes(bad)
        got = _same_outcome(f)
        assert got[0] == "raised" and "a FRAME of" in got[2], got
        kept = _same_outcome(f, partial=True)
        assert kept[0] == "tree" and "a FRAME of" in kept[2]
