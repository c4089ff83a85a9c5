"""The pickle reader's shortcuts for checkpoints of many arrays keep what the file says.

The reader keeps no state tuple per array (made from the memo when the file asks for it), and
skips walking arrays item by item when it made no array of dtype object.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

import treetool.io as tio
from treetool._errors import LoadError


def _state_slots(data: bytes) -> list[int]:
    # memo index of each ndarray state tuple (the MEMOIZE right after a TUPLE)
    import pickletools

    out, n, prev = [], 0, ""
    for op, _, _ in pickletools.genops(data):
        if op.name == "MEMOIZE":
            if prev == "TUPLE":
                out.append(n)
            n += 1
        prev = op.name
    return out


def test_an_array_state_the_file_refers_to_again_is_made_as_pickle_makes_it(
    tmp_path: Path,
) -> None:
    # the reader keeps no state tuple per array; a file that fetches one from the memo (or
    # overwrites a slot it is made from) still gets what pickle.load gives
    f32 = np.float32
    fortran = np.asfortranarray(np.arange(6, dtype=f32).reshape(2, 3))
    arrays = [np.full(1, 1, f32), np.full((2, 3), 2, f32), np.full(1, 3, f32), fortran]
    base = pickle.dumps(arrays, protocol=4)
    assert base.endswith(b"e.")
    slots = _state_slots(base)[1:]  # the first is the dtype's state
    assert len(slots) == 4
    get = b"".join(b"j" + i.to_bytes(4, "little") for i in slots)
    # the last state again, after slot (state - 1) (its raw bytes) was overwritten by a PUT
    overwrite = b"N" + b"r" + (slots[3] - 1).to_bytes(4, "little") + b"0"
    data = base[:-2] + get + overwrite + b"j" + slots[3].to_bytes(4, "little") + b"e."
    f = tmp_path / "states.pkl"
    f.write_bytes(data)
    want = pickle.loads(data)  # our own bytes: safe to run
    got = tio.read(f).tree
    assert len(got) == len(want) == 9
    for g, w in zip(got[:4], want[:4], strict=True):
        assert type(g) is np.ndarray and g.dtype == w.dtype and g.tolist() == w.tolist()
    assert got[3].flags.f_contiguous and not got[3].flags.c_contiguous
    for g, w in zip(got[4:], want[4:], strict=True):
        assert type(g) is tuple and len(g) == 5 and g == w  # (1, shape, dtype, fortran, raw)
        assert type(g[4]) is bytes
    assert got[5][1] == (2, 3) and got[7][3] is True and got[8] == got[7]


def test_object_arrays_are_still_walked_for_the_budget_and_blocked_globals(
    tmp_path: Path,
) -> None:
    # a dict of plain arrays and one object array: 300 references to one list of 1000 zeros
    shared = [0] * 1000
    obj = np.empty(300, object)
    for i in range(300):
        obj[i] = shared
    tree = {f"w{i}": np.full(2, i, np.float32) for i in range(50)} | {"obj": obj}
    f = tmp_path / "obj.pkl"
    f.write_bytes(pickle.dumps(tree, protocol=4))
    with pytest.raises(LoadError, match="through shared references"):
        tio.read(f)
    # and a global inside an object array is reported as not run
    blocked = np.empty(2, object)
    blocked[0], blocked[1] = os.system, 1
    g = tmp_path / "glob.pkl"
    g.write_bytes(pickle.dumps({"w": np.ones(3, np.float32), "b": blocked}, protocol=4))
    r = tio.read(g)
    assert r.blocked == [f"{os.system.__module__}.system"]
    assert r.tree["b"].dtype == object and r.tree["w"].tolist() == [1.0, 1.0, 1.0]
