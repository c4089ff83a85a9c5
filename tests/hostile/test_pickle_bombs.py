"""Hostile pickles: crashes, bombs and budgets. Every file is built here, in the test run.

Each class of file goes through the real `treetool` command (one error line and exit 2, or a
bounded render; < 10 s, < 1 GiB, no control bytes, no file written) and through the Python API
(`tt.load` / `treetool.io.read` raise `LoadError` and nothing else).
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest
from harness import assert_contained, run_cli

import treetool as tt
import treetool.io as tio
from treetool._errors import LoadError
from treetool.io._safety._budget import MAX_DEPTH, MAX_KEY_DEPTH, Budget

# run_cli forks (then execs at once): with jax imported by an earlier test, CPython warns that
# forking a multithreaded process may deadlock, which does not apply to fork+exec
pytestmark = [
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

P4 = b"\x80\x04"


def _deep_tuple(n: int) -> bytes:
    """Opcodes that push ((((),),),) n levels deep: EMPTY_TUPLE, then TUPLE1 n times."""
    return b")" + b"\x85" * n


def _unicode(s: str) -> bytes:
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b


def _global(module: str, name: str) -> bytes:
    return _unicode(module) + _unicode(name) + b"\x93"


def _long(n: int) -> bytes:
    b = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8b" + struct.pack("<i", len(b)) + b


def _write(tmp_path, name: str, data: bytes):
    f = tmp_path / name
    f.write_bytes(data)
    return f


def _api_raises(f, match: str) -> LoadError:
    with pytest.raises(LoadError, match=match) as e:
        tt.load(f)
    assert type(e.value).__module__.startswith("treetool")
    return e.value


# --- 1. deep tuples and frozensets used as keys and set items ---------------------------------

DEEP_KEYS = {
    "SETITEM": lambda key: P4 + b"}" + key + b"K\x01s.",
    "SETITEMS": lambda key: P4 + b"}(" + key + b"K\x01u.",
    "ADDITEMS": lambda key: P4 + b"\x8f(" + key + b"\x90.",
    "FROZENSET": lambda key: P4 + b"(" + key + b"\x91.",
    "dict()": lambda key: P4 + _global("builtins", "dict") + b"]((" + key + b"K\x01te\x85R.",
}


@pytest.mark.parametrize("how", sorted(DEEP_KEYS))
def test_a_million_deep_key_is_refused_before_it_is_hashed(tmp_path, how):
    # CPython hashes tuples recursively in C: hashing this one would crash the interpreter
    f = _write(tmp_path, "deep.pkl", DEEP_KEYS[how](_deep_tuple(1_000_000)))
    assert f.stat().st_size < 1_000_100
    run = run_cli("summary", "deep.pkl", cwd=tmp_path)
    assert_contained(run)
    assert f"nested deeper than {MAX_KEY_DEPTH} levels" in run.stderr
    assert "deep.pkl" in run.stderr


@pytest.mark.parametrize("how", sorted(DEEP_KEYS))
def test_the_key_depth_limit_trips_exactly_past_it(tmp_path, how):
    ok = _write(tmp_path, "ok.pkl", DEEP_KEYS[how](_deep_tuple(MAX_KEY_DEPTH - 1)))
    tree = tt.load(ok)
    key = next(iter(tree))
    depth = 0
    while key:
        (key,) = key
        depth += 1
    assert depth == MAX_KEY_DEPTH - 1
    bad = _write(tmp_path, "bad.pkl", DEEP_KEYS[how](_deep_tuple(MAX_KEY_DEPTH)))
    _api_raises(bad, f"bad.pkl: dict key or set item nested deeper than {MAX_KEY_DEPTH} levels")


def test_a_deep_key_inside_an_object_npy_is_refused(tmp_path):
    # an object .npy: a header, then a pickle; this one holds {((((...)))): 1}
    buf = io.BytesIO()
    np.save(buf, np.empty(1, object), allow_pickle=True)
    raw = buf.getvalue()
    header_len = 10 + struct.unpack("<H", raw[8:10])[0]
    payload = DEEP_KEYS["SETITEM"](_deep_tuple(1_000_000))
    _write(tmp_path, "deep.npy", raw[:header_len] + payload)
    run = run_cli("ls", "deep.npy", cwd=tmp_path)
    assert_contained(run)
    assert f"nested deeper than {MAX_KEY_DEPTH} levels" in run.stderr
    _api_raises(tmp_path / "deep.npy", f"nested deeper than {MAX_KEY_DEPTH} levels")


def test_a_million_deep_value_is_refused(tmp_path):
    _write(tmp_path, "deep.pkl", P4 + _deep_tuple(1_000_000) + b".")
    run = run_cli("inspect", "--json", "deep.pkl", cwd=tmp_path)
    assert_contained(run)
    assert f"nested deeper than {MAX_DEPTH} levels" in run.stderr


def test_a_key_that_calls_a_global_is_reported_as_blocked(tmp_path):
    f = _write(
        tmp_path, "k.pkl", P4 + b"}" + _global("os", "system") + b"X\x02\x00\x00\x00hi\x85RK\x01s."
    )
    r = tio.read(f)
    assert r.blocked == ["os.system"]
    (key,) = r.tree
    assert isinstance(key, tt.io.Opaque) and key.class_path == "os.system" and key.args == ("hi",)
    run = run_cli("summary", "k.pkl", cwd=tmp_path)
    assert_contained(run, rc=0)
    assert "os.system" in run.stderr and "--trust" in run.stderr


# --- 2. shared references: the expanded size -------------------------------------------------


def _shared_list(n_items: int, n_refs: int) -> bytes:
    """A list of n_items zeros, memoised, referenced n_refs times by the outer list."""
    inner = b"](" + b"K\x00" * n_items + b"e\x94"  # memo 0
    return P4 + inner + b"0(" + b"h\x00" * n_refs + b"l."


@pytest.mark.parametrize("command", [("inspect", "--json"), ("summary",), ("ls",)])
def test_shared_references_trip_the_expanded_budget(tmp_path, command):
    # 200 KB: 1e5 zeros referenced 300 times, 3e7 leaves for every view
    f = _write(tmp_path, "shared.pkl", _shared_list(100_000, 300))
    assert f.stat().st_size < 210_000
    run = run_cli(*command, "shared.pkl", cwd=tmp_path)
    assert_contained(run)
    limit = Budget("", f.stat().st_size).max_expanded
    assert f"expands to more than {limit:,} leaves and edges through shared references" in (
        run.stderr
    )
    assert "`--partial` shows what fits" in run.stderr
    _api_raises(f, "through shared references")


def test_partial_keeps_what_fits_of_a_shared_reference_bomb(tmp_path):
    f = _write(tmp_path, "shared.pkl", _shared_list(1000, 1000))  # 4 KB, 1e6 leaves
    limit = Budget("", f.stat().st_size).max_expanded
    assert limit < 200_000
    r = tio.read(f, partial=True)
    assert "through shared references" in r.error
    assert type(r.tree) is list
    full = limit // 1001  # whole copies of the inner list that fit, with their edges
    assert all(x is r.tree[0] and len(x) == 1000 for x in r.tree[:full])
    assert len(r.tree) == full + 1 and len(r.tree[-1]) == limit - 1001 * full - 1
    assert r.tree[-1] == [0] * len(r.tree[-1])
    run = run_cli("summary", "--partial", "shared.pkl", cwd=tmp_path)
    assert_contained(run, rc=0)
    assert "treetool: warning: " in run.stderr and "shared references" in run.stderr
    rows = [line.split() for line in run.stdout.splitlines()[1:-1]]
    assert len(rows) == full + 1
    assert rows[0][:3] == ["[0]", "list", "1,000"]
    assert rows[-1][:3] == [f"[{full}]", "list", f"{len(r.tree[-1]):,}"]


def test_tuple_keys_shared_across_dicts_trip_the_hashing_budget(tmp_path):
    # one 1e5-item tuple used as the key of 1e5 dicts: CPython would hash it 1e5 times
    key = b"(" + b"K\x00" * 100_000 + b"t\x94"
    _write(tmp_path, "keys.pkl", P4 + key + b"0(" + b"}h\x00K\x01s" * 100_000 + b"l.")
    run = run_cli("summary", "keys.pkl", cwd=tmp_path)
    assert_contained(run)
    assert "hashing tuple keys" in run.stderr
    _api_raises(tmp_path / "keys.pkl", "hashing tuple keys")


def test_legitimate_sharing_loads(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    shared = {"kernel": w, "bias": np.zeros(3, np.float32)}
    tree = {"encoder": shared, "decoder": shared, "layers": [shared] * 50}
    f = tmp_path / "tied.pkl"
    f.write_bytes(pickle.dumps(tree, protocol=4))
    out = tt.load(f)
    assert out["encoder"] is out["decoder"]
    assert len(tt.leaves_with_path(out)) == 2 * 52


# --- 3. an object array of 200,000 references to one 4 KB payload -----------------------------


def _object_refs() -> np.ndarray:
    payload = np.zeros(4096, np.uint8)
    arr = np.empty(200_000, object)
    for i in range(len(arr)):
        arr[i] = payload
    return arr


@pytest.mark.parametrize("name", ["refs.npy", "refs.pkl"])
def test_object_array_of_shared_payloads_builds_no_intermediate(tmp_path, name):
    arr = _object_refs()
    if name.endswith(".npy"):
        np.save(tmp_path / name, arr, allow_pickle=True)
    else:
        (tmp_path / name).write_bytes(pickle.dumps(arr, protocol=4))
    assert (tmp_path / name).stat().st_size < 1_000_000
    run = run_cli("summary", name, cwd=tmp_path)
    assert_contained(run, rc=0, max_rss=400 << 20)  # numpy's shape discovery made > 6 GB
    tree = tt.load(tmp_path / name)
    assert tree.dtype == object and tree.shape == (200_000,)
    assert tree[0] is tree[-1]  # one payload, referenced, not copied
    assert tree[0].shape == (4096,) and tree[0].dtype == np.uint8


# --- 4 and 7. memo gaps and empty sets: the allocation budget ---------------------------------


def test_memo_gaps_trip_the_allocation_budget(tmp_path):
    # 120,000 LONG_BINPUT with growing indices: 600 KB, 3.8 GB of memo slots before
    puts = b"".join(b"r" + struct.pack("<I", 4000 * (i + 1)) for i in range(120_000))
    f = _write(tmp_path, "gaps.pkl", P4 + b"N" + puts + b".")
    assert f.stat().st_size < 610_000
    run = run_cli("inspect", "--json", "gaps.pkl", cwd=tmp_path)
    assert_contained(run, max_rss=300 << 20)
    assert "memo indices skipped" in run.stderr and "gaps.pkl" in run.stderr
    _api_raises(f, "memo indices skipped")


def test_empty_sets_trip_the_allocation_budget(tmp_path):
    f = _write(tmp_path, "sets.pkl", P4 + b"(" + b"\x8f" * 1_000_000 + b"l.")
    run = run_cli("summary", "sets.pkl", cwd=tmp_path)
    assert_contained(run, max_rss=400 << 20)
    assert "empty sets" in run.stderr and "allocate more than" in run.stderr
    _api_raises(f, "empty sets")


def test_copies_of_a_shared_string_are_charged(tmp_path):
    # _codecs.encode of one memoised 1 MB string, 300 times: 300 MB of bytes
    s = b"X" + struct.pack("<I", 1_000_000) + b"a" * 1_000_000 + b"\x94"
    call = b"h\x01h\x00\x85R"  # encode(memo[0])
    body = P4 + s + b"0" + _global("_codecs", "encode") + b"\x94(" + call * 300 + b"l."
    f = _write(tmp_path, "enc.pkl", body)
    run = run_cli("summary", "enc.pkl", cwd=tmp_path)
    assert_contained(run, max_rss=400 << 20)
    assert "allocate more than" in run.stderr
    _api_raises(f, "allocate more than")


# --- issue 16 item 6: a FRAME longer than the file ---------------------------------------------


def test_a_frame_longer_than_the_file_is_refused(tmp_path):
    data = bytearray(pickle.dumps({"a": 1, "b": [2, 3]}, protocol=4))
    assert data[2] == 0x95
    n = struct.unpack("<Q", data[3:11])[0]
    data[3:11] = struct.pack("<Q", n + 1000)
    f = _write(tmp_path, "frame.pkl", bytes(data))
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(bytes(data))
    run = run_cli("ls", "frame.pkl", cwd=tmp_path)
    assert_contained(run)
    assert f"a FRAME of {n + 1000} bytes, {n} left" in run.stderr
    _api_raises(f, "FRAME")
    r = tio.read(f, partial=True)
    assert r.tree == {"a": 1, "b": [2, 3]} and "FRAME" in r.error
    run = run_cli("ls", "--partial", "frame.pkl", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    assert run.stdout.splitlines() == ["['a']\t-\t1", "['b'][0]\t-\t2", "['b'][1]\t-\t3"]
    assert run.stderr.startswith("treetool: warning: ") and "FRAME" in run.stderr


# --- 16. only LoadError ----------------------------------------------------------------------


def _reconstructed_array(shape: bytes, dtype: bytes, data: bytes) -> bytes:
    """numpy's pickle of an ndarray, written by hand: _reconstruct, then BUILD with the state."""
    rec = _global("numpy.core.multiarray", "_reconstruct")
    nd = _global("numpy", "ndarray")
    dt = _global("numpy", "dtype") + _unicode(dtype) + b"\x89\x88\x87R"
    dt += b"(K\x03" + _unicode("<") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"
    return (
        P4
        + rec
        + nd
        + b"K\x00\x85C\x01b\x87R"
        + b"(K\x01"
        + shape
        + dt
        + b"\x89C"
        + bytes([len(data)])
        + data
        + b"tb."
    )


HOSTILE_VALUES = {
    "complex(10**400)": (
        P4 + _global("builtins", "complex") + _long(10**400) + b"\x85R.",
        "complex\\(\\) argument out of range",
    ),
    "itemsize-0 dtype S0": (
        P4 + _global("numpy", "dtype") + _unicode("S0") + b"\x85R.",
        "itemsize 0",
    ),
    "itemsize-0 dtype V0": (
        P4 + _global("numpy", "dtype") + _unicode("V0") + b"\x85R.",
        "itemsize 0",
    ),
    "subarray dtype": (
        P4 + _global("numpy", "dtype") + _unicode("(2,3)f4") + b"\x85R.",
        "not supported",
    ),
    "dtype string numpy cannot parse": (
        P4 + _global("numpy", "dtype") + _unicode("(1,") + b"\x85R.",
        "unknown dtype",
    ),
    "20,000-digit dimension": (
        _reconstructed_array(_long(10**20000) + b"\x85", "f8", b""),
        "bad array shape",
    ),
    "itemsize-0 array with a huge shape": (
        _reconstructed_array(b"J\xff\xff\xff\x7f\x85", "U0", b""),
        "itemsize 0",
    ),
    "lone surrogate to latin-1": (
        P4
        + _global("_codecs", "encode")
        + b"X\x03\x00\x00\x00\xed\xa0\x80"
        + _unicode("latin1")
        + b"\x86R.",
        "beyond latin-1",
    ),
    "lone surrogate to bytes": (
        P4
        + _global("builtins", "bytes")
        + b"X\x03\x00\x00\x00\xed\xa0\x80"
        + _unicode("latin1")
        + b"\x86R.",
        "beyond latin-1",
    ),
    "20,000-digit int in an error message": (
        P4 + _long(10**20000) + b")R.",
        "not callable: an int of 66439 bits",
    ),
    "control: a valid set() call": (
        P4 + _global("builtins", "set") + b"]\x85R.",
        "",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_VALUES))
def test_hostile_values_raise_load_error_only(tmp_path, name):
    data, match = HOSTILE_VALUES[name]
    f = _write(tmp_path, "v.pkl", data)
    if not match:  # a control: the same construction, valid, loads
        assert tt.load(f) == set()
        return
    _api_raises(f, match)
    r = tio.read(f, partial=True)
    assert r.error is not None and "v.pkl" in r.error
    run = run_cli("summary", "v.pkl", cwd=tmp_path)
    assert_contained(run)


def test_a_deep_list_in_an_error_message_is_not_repred(tmp_path):
    # REDUCE on a 200,000-deep list: its repr would raise RecursionError (or take forever);
    # (a million lists are refused sooner, by the allocation budget: 300 bytes each)
    deep = b"]" * 200_000 + b"a" * 199_999
    f = _write(tmp_path, "r.pkl", P4 + _global("os", "system") + deep + b"R.")
    _api_raises(f, "REDUCE arguments are not a tuple: a list of 1 items")
    run = run_cli("ls", "r.pkl", cwd=tmp_path)
    assert_contained(run)


# --- 13. a file does not choose which modules get imported ------------------------------------


def test_a_class_path_does_not_import_a_test_module(tmp_path):
    cls = _global("optax._src.sharding_test", "ShardingTest")
    f = _write(tmp_path, "t.pkl", P4 + b"}" + _unicode("x") + cls + b")\x81s.")
    script = (
        "import os, sys, treetool as tt\n"
        f"tree = tt.load({str(f)!r})\n"
        "print(repr(tree['x']), tt.leaves_with_path(tree))\n"
        "print('optax._src.sharding_test' in sys.modules, os.environ.get('XLA_FLAGS'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "False None"
    assert "optax._src.sharding_test.ShardingTest" in out.stdout


@pytest.mark.parametrize(("chain", "ok"), [(300, True), (500, False)])
def test_a_shared_subtree_met_again_deeper_counts_its_height(tmp_path, chain, ok):
    # X: 600 nested lists, memoised; the tree is [chain of `chain` lists ending in X, X]. The
    # walk meets X at depth 1 first, then again at the bottom of the chain: 601 + chain levels.
    x = b"]" * 600 + b"a" * 599 + b"\x94" + b"0"
    body = x + b"]" + b"]" * chain + b"h\x00" + b"a" * chain + b"a" + b"h\x00a."
    f = _write(tmp_path, "d.pkl", P4 + body)
    if ok:
        tree = tt.load(f)
        assert tree[1] is not None and len(tree) == 2
        node, depth = tree[0], 1
        while node is not tree[1]:
            (node,) = node
            depth += 1
        assert depth == chain + 1
    else:
        _api_raises(f, f"nested deeper than {MAX_DEPTH} levels")


@pytest.mark.parametrize("how", [b"]\x94h\x00a.", b"]2a.", b"]2\x85a."])
def test_a_cycle_through_the_memo_is_refused(tmp_path, how):
    # a list appended to itself (through the memo, or DUP)
    f = _write(tmp_path, "c.pkl", P4 + how)
    _api_raises(f, "cyclic reference")
    run = run_cli("ls", "c.pkl", cwd=tmp_path)
    assert_contained(run)
