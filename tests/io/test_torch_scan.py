"""The weights_only scan's fast path (torch's own opcode table, no pickletools) against the
full pickletools scan and against torch's `get_globals_in_pkl`, on pickles of every protocol."""

from __future__ import annotations

import collections
import io
import pickle
import pickletools
from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
from typing import Any

import torch._weights_only_unpickler as wou
from hypothesis import given, settings
from hypothesis import strategies as st

from treetool.io._torch._weights_only import _SKIP, _torch_scan, scan

_LEAVES = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
    | st.binary(max_size=300) | st.just(collections.OrderedDict(a=1)) | st.just(complex(1, 2))
    | st.just(collections.Counter("ab")) | st.just(bytearray(b"xy"))
)  # fmt: skip
_VALUES = st.recursive(
    _LEAVES,
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.tuples(kids, kids)
        | st.dictionaries(st.text(max_size=5), kids, max_size=4)
    ),
    max_leaves=12,
)


def _genops_globals(pkl: bytes) -> list[str]:
    names: dict[str, None] = {}
    for op, arg, _ in pickletools.genops(pkl):
        if op.name == "GLOBAL":
            module, _, attr = arg.partition(" ")
            if (module, attr) in NAME_MAPPING:  # python 2 names, as torch maps them
                module, attr = NAME_MAPPING[(module, attr)]
            elif module in IMPORT_MAPPING:
                module = IMPORT_MAPPING[module]
            names[f"{module}.{attr}"] = None
        if op.name == "STOP":
            break
    return list(names)


@settings(max_examples=150, deadline=None)
@given(_VALUES, st.integers(0, 5))
def test_fast_scan_agrees_with_pickletools_and_torch(value: Any, protocol: int) -> None:
    pkl = pickle.dumps(value, protocol=protocol)
    ops = {op.name for op, _, _ in pickletools.genops(pkl)}
    fast = _torch_scan(pkl)
    if ops <= {
        "GLOBAL", "NEWOBJ", "REDUCE", "BUILD", "APPEND", "APPENDS", "SETITEM", "SETITEMS",
        "MARK", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "NONE", "NEWFALSE", "NEWTRUE",
        "EMPTY_TUPLE", "EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET", "BININT", "BININT1", "BININT2",
        "BINFLOAT", "BINUNICODE", "SHORT_BINSTRING", "BINPERSID", "BINGET", "LONG_BINGET",
        "BINPUT", "LONG_BINPUT", "LONG1", "PROTO", "STOP",
    }:  # fmt: skip
        assert fast == _genops_globals(pkl)
        assert set(fast) == wou.get_globals_in_pkl(io.BytesIO(pkl))  # torch's own scan
        assert scan(pkl) == (fast, None)
    else:  # an opcode torch lacks: the full scan names it
        assert fast is None
        names, bad = scan(pkl)
        assert bad in ops and names == _genops_globals(pkl)


def test_skip_table_is_torchs() -> None:
    sizes = {op.code.encode("latin1")[0]: op.name for op in pickletools.opcodes}
    want = {"NEWOBJ": 0, "REDUCE": 0, "BUILD": 0, "APPEND": 0, "APPENDS": 0, "SETITEM": 0,
            "SETITEMS": 0, "MARK": 0, "TUPLE": 0, "TUPLE1": 0, "TUPLE2": 0, "TUPLE3": 0,
            "NONE": 0, "NEWFALSE": 0, "NEWTRUE": 0, "EMPTY_TUPLE": 0, "EMPTY_LIST": 0,
            "EMPTY_DICT": 0, "EMPTY_SET": 0, "BINPERSID": 0, "BININT": 4, "BININT1": 1,
            "BININT2": 2, "BINFLOAT": 8, "BINGET": 1, "LONG_BINGET": 4, "BINPUT": 1,
            "LONG_BINPUT": 4, "PROTO": 1}  # fmt: skip
    assert {sizes[op]: n for op, n in _SKIP.items()} == want


def test_truncated_and_odd_pickles_fall_back() -> None:
    pkl = pickle.dumps(collections.OrderedDict(a=[1, 2.0, "x"]), protocol=2)
    for cut in range(len(pkl) - 1):
        assert _torch_scan(pkl[:cut]) is None  # no STOP: the full scan says what is wrong
        assert scan(pkl[:cut])[1] is not None
    assert _torch_scan(b"c\xff\xfe\nx\n.") is None  # a name that is not utf-8
