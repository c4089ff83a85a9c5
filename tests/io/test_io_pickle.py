"""The safe pickle reader: every protocol, laziness, damaged and hostile input."""

from __future__ import annotations

import collections
import os
import pickle
import struct
import sys
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import treetool as tt
import treetool.io as tio
from treetool import LazyArray, LoadError
from treetool.io.pickle import LAZY_MIN_BYTES, MAX_DEPTH, walk_check

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


def _walk_check_lines(f):
    """Load `f` (expecting a LoadError); the lines `walk_check` ran: the work of the tree check."""
    code, lines = walk_check.__code__, 0

    def local(frame, event, arg):
        nonlocal lines
        lines += event == "line"
        return local

    sys.settrace(lambda frame, event, arg: local if frame.f_code is code else None)
    try:
        with pytest.raises(LoadError) as e:
            tio.read(f)
    finally:
        sys.settrace(None)
    return lines, str(e.value)


def _write(tmp_path, obj, protocol=4, name="x.pkl"):
    f = tmp_path / name
    f.write_bytes(pickle.dumps(obj, protocol=protocol))
    return f


def _same(a, b):
    """Equal values and types, arrays compared by shape, dtype and content."""
    if isinstance(a, LazyArray):
        a = np.asarray(a)
    if isinstance(b, np.ndarray | np.generic):
        return (
            type(a) is type(b)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and np.array_equal(a, b, equal_nan=True)
        )
    if isinstance(b, dict):
        return type(a) is type(b) and list(a) == list(b) and all(_same(a[k], b[k]) for k in b)
    if isinstance(b, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and (a == b or (a != a and b != b))


TREE = {
    "params": {
        "dense": {"kernel": np.arange(12, dtype=np.float32).reshape(3, 4), "bias": np.zeros(4)},
        "big": np.arange(2048, dtype=np.float64).reshape(32, 64),
        "f_order": np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
        "scalar0d": np.array(3.5, np.float32),
        "empty": np.zeros((0, 3), np.int8),
    },
    "step": 7,
    "lr": np.float32(1e-3),
    "names": ["a", "é", b"raw"],
    "opt": (1, 2.5, None, True, 1 + 2j, 2**80),
    "od": collections.OrderedDict(b=1, a=2),
    "dd": collections.defaultdict(list, {"k": [1]}),
    "sets": [{1, 2}, frozenset({3})],
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_matches_pickle(tmp_path, protocol):
    f = _write(tmp_path, TREE, protocol)
    r = tio.read(f)
    assert r.format == "pickle" and r.blocked == [] and r.error is None
    assert _same(r.tree, TREE)
    big = r.tree["params"]["big"]
    if protocol >= 3:  # protocols 0-2 store bytes as latin-1 text: read, not seeked past
        assert isinstance(big, LazyArray)
        assert (big.shape, big.dtype) == ((32, 64), np.dtype("float64"))
    assert r.tree["params"]["f_order"].flags.f_contiguous


def test_leaves_and_paths_match_jax_keystr(tmp_path):
    import jax

    f = _write(tmp_path, TREE)
    got = [(str(p), getattr(x, "shape", None)) for p, x in tt.leaves_with_path(tio.load(f))]
    want = [
        (jax.tree_util.keystr(p), getattr(x, "shape", None))
        for p, x in jax.tree_util.tree_flatten_with_path(TREE)[0]
    ]
    assert got == want


def test_large_payload_is_not_read(tmp_path):
    arr = np.arange(LAZY_MIN_BYTES, dtype=np.uint8)
    f = _write(tmp_path, {"w": arr})
    leaf = tio.load(f)["w"]
    assert isinstance(leaf, LazyArray) and leaf.file == str(f)
    assert f.read_bytes()[leaf.offset : leaf.offset + 8] == arr[:8].tobytes()
    assert np.array_equal(leaf[10:12], arr[10:12])
    eager = tio.load(f, lazy=False)["w"]
    assert type(eager) is np.ndarray and np.array_equal(eager, arr)


def test_tied_arrays_stay_tied(tmp_path):
    w = np.ones(3)
    tree = tio.load(_write(tmp_path, {"a": w, "b": w, "c": [w]}))
    assert tree["a"] is tree["b"] is tree["c"][0]


def test_dtypes_bfloat16_and_big_endian(tmp_path):
    import ml_dtypes

    tree = {"bf": np.arange(4, dtype=ml_dtypes.bfloat16), "be": np.arange(3, dtype=">i4")}
    out = tio.load(_write(tmp_path, tree))
    assert out["bf"].dtype == np.dtype(ml_dtypes.bfloat16) and np.array_equal(out["bf"], tree["bf"])
    assert out["be"].dtype == np.dtype(">i4") and out["be"].tolist() == [0, 1, 2]


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.binary(max_size=5),
)
trees = st.recursive(
    json_leaf
    | st.builds(
        lambda n, t: np.arange(n, dtype=t),
        st.integers(0, 5),
        st.sampled_from(["f4", "i8", "u1", "c8", "?"]),
    ),
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.tuples(kids, kids)
        | st.dictionaries(st.text(max_size=3), kids, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=40)
@given(tree=trees, protocol=st.sampled_from(list(PROTOCOLS)))
def test_random_trees_match_pickle(tmp_path_factory, tree, protocol):
    f = tmp_path_factory.mktemp("p") / "t.pkl"
    f.write_bytes(pickle.dumps(tree, protocol=protocol))
    assert _same(tio.load(f), tree)


# --- damaged input --------------------------------------------------------------------


def test_empty_file(tmp_path):
    f = tmp_path / "empty.pkl"
    f.write_bytes(b"")
    with pytest.raises(LoadError, match=r"empty\.pkl: empty file$"):
        tio.load(f)


def test_every_truncation_is_a_load_error(tmp_path):
    data = pickle.dumps({"w": np.ones((2, 2)), "l": [1, "x"]}, protocol=4)
    f = tmp_path / "t.pkl"
    for n in range(1, len(data)):
        f.write_bytes(data[:n])
        with pytest.raises(LoadError, match=r"t\.pkl: "):
            tio.read(f, format="pickle")


def test_truncated_message_names_the_bytes(tmp_path):
    data = pickle.dumps({"w": np.ones(10_000)}, protocol=4)
    f = tmp_path / "t.pkl"
    f.write_bytes(data[:-200])
    with pytest.raises(
        LoadError, match=r"truncated pickle: BINBYTES8? needs 80000 bytes, \d+ left"
    ):
        tio.load(f)


def test_partial_tree_up_to_the_error(tmp_path):
    data = pickle.dumps({f"k{i}": i for i in range(3000)}, protocol=4)
    f = tmp_path / "t.pkl"
    f.write_bytes(data[: len(data) // 2])
    r = tio.read(f, partial=True)
    assert "truncated" in r.error
    assert isinstance(r.tree, dict) and 1000 <= len(r.tree) < 3000
    assert all(r.tree[k] == int(k[1:]) for k in r.tree)


def test_random_bytes(tmp_path):
    f = tmp_path / "rand.bin"
    f.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(LoadError, match=r"rand\.bin: "):
        tio.load(f)


def test_huge_length_claim(tmp_path):
    f = tmp_path / "huge.pkl"
    f.write_bytes(b"\x80\x04\x8e" + struct.pack("<Q", 10**12) + b"abc.")
    tracemalloc.start()
    try:
        with pytest.raises(LoadError, match=r"BINBYTES8 needs 1000000000000 bytes, 4 left"):
            tio.load(f)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak  # refused from the claim: nothing of its size was allocated


def test_far_memo_index(tmp_path):
    f = tmp_path / "memo.pkl"
    f.write_bytes(b"\x80\x04N" + b"r" + struct.pack("<I", 2**31) + b".")
    with pytest.raises(LoadError, match="memo index 2147483648 is far beyond"):
        tio.load(f)


def test_deep_nesting(tmp_path):
    f = tmp_path / "deep.pkl"
    f.write_bytes(b"\x80\x04N" + b"\x85" * 100_000 + b".")
    lines, msg = _walk_check_lines(f)
    assert f"nested deeper than {MAX_DEPTH} levels" in msg
    # the check stops at the limit: it goes down MAX_DEPTH levels, not the file's 100,000
    assert lines < 40 * MAX_DEPTH, lines


def test_deep_marks(tmp_path):
    f = tmp_path / "marks.pkl"
    f.write_bytes(b"\x80\x04" + b"(" * 100_000 + b"N" + b"t" * 100_000 + b".")
    with pytest.raises(LoadError, match="nested deeper than"):
        tio.load(f)


def test_cycle(tmp_path):
    a: list = []
    a.append(a)
    f = _write(tmp_path, a)
    with pytest.raises(LoadError, match="cyclic reference"):
        tio.load(f)


def test_shared_reference_bomb(tmp_path):
    # each level holds the previous level twice: 2**40 paths in a few hundred bytes
    parts = [b"\x80\x04N\x94"]
    for i in range(40):
        parts.append(b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86\x94")
    f = tmp_path / "bomb.pkl"
    f.write_bytes(b"".join(parts) + b".")
    lines, msg = _walk_check_lines(f)
    assert "expands to more than" in msg
    # each shared level is walked once and its size reused, not walked at every reference
    assert lines < 5_000, lines


def test_wrong_extension_is_detected_by_content(tmp_path):
    f = tmp_path / "weights.safetensors"
    f.write_bytes(pickle.dumps({"w": np.ones(2)}))
    assert tio.detect(f) == "pickle"
    assert tio.load(f)["w"].tolist() == [1.0, 1.0]


def test_unknown_format_message(tmp_path):
    f = tmp_path / "x.bin"
    f.write_bytes(b"\x01\x02\x03\x04garbage")
    with pytest.raises(
        LoadError, match=r"x\.bin: unknown file format \(starts with bytes 01 02 03 04"
    ):
        tio.load(f)
    with pytest.raises(LoadError, match=r"unknown format 'pikle'\. Did you mean 'pickle'"):
        tio.load(f, format="pikle")


def test_missing_file(tmp_path):
    with pytest.raises(LoadError, match=r"nope\.pkl: no such file or directory"):
        tio.load(tmp_path / "nope.pkl")


@pytest.mark.slow
def test_structure_read_does_not_import_jax(tmp_path):
    import subprocess
    import sys

    f = _write(tmp_path, TREE)
    code = (
        "import sys, treetool as tt\n"
        f"t = tt.load({str(f)!r})\n"
        "assert 'jax' not in sys.modules, 'jax imported'\n"
        "print(len(tt.leaves_with_path(t)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == str(len(tt.leaves_with_path(TREE)))


def test_load_error_is_one_line(tmp_path):
    f = tmp_path / "t.pkl"
    f.write_bytes(b"\x80\x04\x8c\x05ab")
    with pytest.raises(LoadError) as e:
        tio.load(f)
    assert "\n" not in str(e.value) and str(e.value).startswith(str(f))
    assert os.path.basename(str(f)) in str(e.value)


def _ops(data: bytes):
    import pickletools

    return list(pickletools.genops(data))


def test_array_header_cache_follows_memo_changes(tmp_path):
    """Arrays whose headers repeat byte for byte are read from a cache of resolved headers;
    a PUT over a memo entry that a header names must empty it, or the second array would be
    read with a stale dtype."""
    a, b, c = (np.arange(4, dtype=np.float32) + i for i in range(3))
    data = pickle.dumps([a, b, c], protocol=4)
    f = tmp_path / "same.pkl"
    f.write_bytes(data)
    got = tio.load(f)
    assert [x.dtype for x in got] == [np.float32] * 3
    assert [x.tolist() for x in got] == [a.tolist(), b.tolist(), c.tolist()]

    # the memo index of the float32 dtype, as the second array's header names it
    ops = _ops(data)
    starts = [i for i, (op, _, _) in enumerate(ops) if op.name == "BINGET"]
    # the fortran flag right after a dtype named by memo (the first array built its dtype)
    flags = [
        i
        for i, (op, _, _) in enumerate(ops)
        if op.name == "NEWFALSE" and ops[i - 1][0].name == "BINGET"
    ]
    dtype_ref = ops[flags[0] - 1]
    # an array starts right after the previous one's BUILD, with a BINGET of _reconstruct;
    # the second array's header is the first one cached, the third's repeats it
    ends = [i for i, (op, _, _) in enumerate(ops) if op.name == "BUILD" and i + 1 in starts]
    third = ops[ends[1] + 1][2]
    # before the third array: push 5, PUT it over the dtype's memo slot, pop it
    patch = b"K\x05q" + bytes([dtype_ref[1]]) + b"0"
    bad = bytearray(data[:third] + patch + data[third:])
    assert bad[2] == 0x95  # one frame around everything: its length grows with the patch
    size = int.from_bytes(bad[3:11], "little") + len(patch)
    bad[3:11] = size.to_bytes(8, "little")
    f2 = tmp_path / "put.pkl"
    f2.write_bytes(bytes(bad))
    with pytest.raises(LoadError, match=r"put\.pkl: expected a dtype, found 5"):
        tio.load(f2)
