"""The readers' limits: shapes, dtypes, JSON nesting and counts, C-order slices."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from treetool import LoadError
from treetool.io._orbax._data import c_order_blocks, check_component
from treetool.io._safety import _limits as _limits
from treetool.io._safety._limits import MAX_DIM, Budget, check_dtype, check_json_text, check_shape


def _depth(x) -> int:
    if isinstance(x, dict):
        return 1 + max((_depth(v) for v in x.values()), default=0)
    if isinstance(x, list):
        return 1 + max((_depth(v) for v in x), default=0)
    return 0


_text = st.text(alphabet='[]{}"\\ab\n', max_size=6)
_json = st.recursive(
    st.none() | st.integers() | _text,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_text, kids, max_size=3),
    max_leaves=40,
)


@given(_json, st.sampled_from([None, 2]), st.sampled_from([1, 5, 4 << 20]))
def test_json_depth_matches_the_parsed_depth(value, indent, chunk):
    """Brackets, quotes and backslashes inside strings never count as nesting, wherever the
    text is cut into the chunks it is measured in."""
    raw = json.dumps(value, indent=indent, ensure_ascii=False).encode()
    depth = _depth(value)
    saved, _limits._JSON_CHUNK = _limits._JSON_CHUNK, chunk
    try:
        for limit in (0, 1, 3):
            if depth > limit and raw.count(b"[") + raw.count(b"{") > limit:
                with pytest.raises(LoadError, match=f"JSON nested more than {limit} levels deep$"):
                    check_json_text(raw, "f", max_depth=limit)
            else:
                check_json_text(raw, "f", max_depth=limit)
    finally:
        _limits._JSON_CHUNK = saved


def test_json_container_budget():
    raw = b"[" + b",".join([b"{}"] * 5000) + b"]"
    with pytest.raises(
        LoadError, match=r"^f: more than 2250 JSON objects and arrays in 15001 bytes "
    ):
        check_json_text(raw, "f")
    check_json_text(raw, "f", bytes_per_container=2)


def test_shapes():
    huge = 2**64 - 1
    assert check_shape([0], "f") == (0,)
    assert check_shape((MAX_DIM, 0, MAX_DIM), "f") == (MAX_DIM, 0, MAX_DIM)
    with pytest.raises(LoadError, match=r"f: dimension 1 is a 4001-bit number, more than 2\*\*48"):
        check_shape([1, 2**4000], "f")
    with pytest.raises(LoadError, match=r"f: dimension 0 is not an int \(bool\)"):
        check_shape([True], "f")
    with pytest.raises(LoadError, match=r"f: shape must be a list of ints, got str"):
        check_shape("12", "f")
    with pytest.raises(LoadError, match=r"more than 2\*\*48"):
        check_shape([huge], "f")


@pytest.mark.parametrize(
    ("dtype", "message"),
    [
        ("V0", "has no size"),
        ("S0", "has no size"),
        ("(2,)f4", "subarray dtype"),
        ("O", "object dtype"),
    ],
)
def test_dtypes(dtype, message):
    with pytest.raises(LoadError, match=message):
        check_dtype(np.dtype(dtype), "f")
    assert check_dtype(np.dtype("<f4"), "f") == np.float32


def test_budget_counts_to_its_limit():
    b = Budget("f", "things", 3)
    b.take(3)
    with pytest.raises(LoadError, match=r"^f: more than 3 things for a file of this size"):
        b.take()


@pytest.mark.parametrize(
    ("shape", "max_elems"), [((4, 3), 6), ((5, 7, 3), 10), ((2, 3, 100), 30), ((7,), 1), ((), 4)]
)
def test_c_order_blocks_cover_the_array_in_order(shape, max_elems):
    arr = np.arange(int(np.prod(shape))).reshape(shape)
    blocks = list(c_order_blocks(shape, max_elems))
    parts = [arr[b].reshape(-1) for b in blocks]
    assert all(p.size <= max_elems for p in parts)
    assert np.array_equal(np.concatenate(parts) if parts else arr.reshape(-1), arr.reshape(-1))


def test_array_names_stay_below_their_directory():
    assert check_component("params.dense.kernel", "ck") == "params.dense.kernel"
    for bad in ["..", "a/../b", "/etc", "a/./b", "", "a\0b"]:
        with pytest.raises(LoadError, match="leaves the checkpoint directory"):
            check_component(bad, "ck")


def test_a_lazy_array_never_allocates_more_than_its_file_holds(tmp_path):
    """A claim past the end of a plain file is refused before any buffer is allocated."""
    from treetool._leaves._arrays import LazyArray

    f = tmp_path / "x.bin"
    f.write_bytes(bytes(64))
    leaf = LazyArray((2**40,), "float32", str(f), 0)  # 4 TiB claimed, 64 bytes held
    with pytest.raises(
        LoadError,
        match=r"x\.bin: array data is truncated: expected 4398046511104 bytes at offset 0, the file has 64$",
    ):
        np.asarray(leaf)
    with pytest.raises(LoadError, match="the file has 64"):
        leaf[2**39]
    assert LazyArray((4, 4), "float32", str(f), 0)[3].tolist() == [0.0] * 4


def test_json_depth_at_and_past_the_limit_and_unbalanced_text():
    """The depth comes from passes that drop innermost pairs when the text is balanced, and
    from the exact running sum otherwise: the same answers either way."""
    at = b"[" * 64 + b'"[[[{{{"' + b"]" * 64
    check_json_text(b"{" + b'"k": [], ' * 100 + b'"x": ' + at + b"}", "f", max_depth=65)
    check_json_text(at, "f")
    with pytest.raises(LoadError, match=r"JSON nested more than 64 levels deep$"):
        check_json_text(b"[" + at + b"]", "f")
    check_json_text(b"]" * 100 + b"[" * 100, "f")  # never deeper than 0: json.loads refuses it
    with pytest.raises(LoadError, match=r"JSON nested more than 64 levels deep$"):
        check_json_text(b"[]" * 100 + b"[" * 65, "f")
    assert not _limits._shallow(b"[" * 65 + b"]" * 65, 64)
    assert _limits._shallow(b"[" * 64 + b"]" * 64 + b"{}" * 50, 64)
