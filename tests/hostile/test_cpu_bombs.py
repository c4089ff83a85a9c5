"""CPU bombs that byte budgets miss (issue 26): dict keys and set items with colliding hashes,
safetensors names that are colliding list indices, a numpy dtype whose scalar is 2 GiB,
overlapping safetensors tensors and npz members, duplicate npz members, 100,000-digit ints.

Each is a small file; each run goes through the harness (one line and exit 2, or an honest
result; < 10 s, < 1 GB, no control bytes, no file written, no connection, no secret printed).
"""

from __future__ import annotations

import json
import pickle
import struct
import sys
from typing import Any

import numpy as np
import pytest
from _files import npy_of, safetensors_bytes, stored, write, zip_bytes
from harness import assert_contained, run_cli

import treetool as tt
from treetool.io._safety._bigint import HugeInt

pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

MODULUS = sys.hash_info.modulus  # every multiple of it hashes to 0
N = 20_000  # colliding keys: n**2 / 2 = 2e8 comparisons unchecked (15 s for dict keys)


def _long(n: int) -> bytes:
    b = pickle.encode_long(n)
    return (
        b"\x8a" + bytes([len(b)]) + b if len(b) < 256 else b"\x8b" + struct.pack("<i", len(b)) + b
    )


def _colliding(kind: str) -> bytes:
    """A pickle of one dict (or set) of N distinct keys that all hash to 0, in batches of 1000."""
    out = bytearray(b"\x80\x04" + (b"}" if kind == "dict" else b"\x8f"))
    for start in range(0, N, 1000):
        out += b"("
        for i in range(start + 1, min(N, start + 1000) + 1):
            key = _long(i * MODULUS)
            if kind == "tuple-set":
                key += b"\x85"  # (key,): tuples of colliding items collide too
            out += key + (b"K\x00" if kind == "dict" else b"")
        out += b"u" if kind == "dict" else b"\x90"
    return bytes(out + b".")


@pytest.mark.parametrize("kind", ["dict", "set", "tuple-set"])
@pytest.mark.parametrize("command", ["ls", "inspect", "summary"])
def test_colliding_hashes_are_refused(tmp_path: Any, kind: str, command: str) -> None:
    write(tmp_path / "c.pkl", _colliding(kind))
    flags = ["--no-tui"] if command == "inspect" else []
    run = run_cli(command, *flags, "c.pkl", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.startswith(
        "treetool: error: c.pkl: more than 64 distinct dict keys or set items share one hash "
        "(a hash-collision bomb)"
    )


def test_keys_that_repeat_across_dicts_are_not_collisions(tmp_path: Any) -> None:
    """The same big key in 1,000 dicts, and 1,000 distinct big keys: an honest file loads."""
    big = 3 * MODULUS + 5
    tree = {"many": [{big: i, (big, 1): i} for i in range(1000)], "distinct": {}}
    tree["distinct"] = {MODULUS + i: i for i in range(1000)}  # distinct hashes (1, 2, ...)
    p = tmp_path / "ok.pkl"
    p.write_bytes(pickle.dumps(tree, protocol=4))
    loaded = tt.load(str(p))
    assert loaded == tree
    run = run_cli("summary", "ok.pkl", cwd=tmp_path)
    assert_contained(run, rc=0)


def test_safetensors_names_with_colliding_indices_stay_flat(tmp_path: Any) -> None:
    names = [f"['a'][{(i + 1) * MODULUS}]" for i in range(N)]
    header = {
        n: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
        for i, n in enumerate(names)
    }
    write(tmp_path / "c.safetensors", safetensors_bytes(header, bytes(4 * N)))
    run = run_cli("ls", "c.safetensors", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    lines = run.stdout.splitlines()
    assert len(lines) == N
    assert all(line.startswith("[\"['a'][") for line in lines)  # names of a flat dict
    tree = tt.load(str(tmp_path / "c.safetensors"))
    assert type(tree) is dict and sorted(tree) == sorted(names)


def test_a_2_gib_numpy_scalar_dtype_is_refused(tmp_path: Any) -> None:
    """`numpy.core.multiarray.scalar(numpy.dtype('V2147483647'))`, 8 times: 84 s and 21 GB
    of memory before (numpy's zero bytes of one item, allocated per scalar)."""

    def g(mod: bytes, name: bytes) -> bytes:
        return b"c" + mod + b"\n" + name + b"\n"

    spec = b"V2147483647"
    dtype = g(b"numpy", b"dtype") + b"X" + struct.pack("<I", len(spec)) + spec + b"K\x00K\x01\x87R"
    one = g(b"numpy.core.multiarray", b"scalar") + dtype + b"\x85R"
    write(tmp_path / "d.pkl", b"\x80\x02(" + one * 8 + b"l.")
    for args in (["ls", "d.pkl"], ["get", "d.pkl", "[0]"]):
        run = run_cli(*args, cwd=tmp_path)
        assert_contained(run)
        assert run.stderr == (
            "treetool: error: d.pkl: dtype void17179869176 has items of 2147483647 bytes, "
            "more than 1048576 (at byte 69)\n"
        )


def _overlapping_safetensors(n: int) -> bytes:
    header = {
        f"w{i}": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 4000]} for i in range(n)
    }
    return safetensors_bytes(header, bytes(4000))


@pytest.mark.parametrize("command", [["ls"], ["get", "{}", "w5"]])
def test_overlapping_safetensors_tensors_are_refused(tmp_path: Any, command: list[str]) -> None:
    write(tmp_path / "o.safetensors", _overlapping_safetensors(50_000))
    args = [a.format("o.safetensors") for a in command]
    run = run_cli(*(args if len(args) > 1 else [*args, "o.safetensors"]), cwd=tmp_path)
    assert_contained(run)
    assert run.stderr == (
        "treetool: error: o.safetensors: tensors 'w0' (bytes 0-4000) and 'w1' (bytes 0-4000) "
        "overlap\n"
    )


def _overlapping_npz() -> bytes:
    """Two members whose central directory entries point at the same local data."""
    data = zip_bytes(
        [stored("a.npy", npy_of(np.arange(8.0))), stored("b.npy", npy_of(np.arange(8.0)))]
    )
    # the second central entry's local header offset (its last 4 bytes before the name) -> 0
    cd = data.rfind(b"PK\x01\x02")
    at = cd + 42
    return data[:at] + struct.pack("<I", 0) + data[at + 4 :]


def test_npz_members_sharing_bytes_are_refused(tmp_path: Any) -> None:
    write(tmp_path / "o.npz", _overlapping_npz())
    run = run_cli("get", "o.npz", "b", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr == (
        "treetool: error: o.npz: members 'a' (bytes 163-227) and 'b' (bytes 163-227) overlap\n"
    )


def test_npz_duplicate_members_are_refused(tmp_path: Any) -> None:
    write(
        tmp_path / "d.npz",
        zip_bytes([stored("w.npy", npy_of(np.zeros(10)))], repeat_directory=2),
    )
    for args in (["ls", "d.npz"], ["get", "d.npz", "w"]):
        run = run_cli(*args, cwd=tmp_path)
        assert_contained(run)
        assert run.stderr == "treetool: error: d.npz[w.npy]: a second member named 'w'\n"


@pytest.fixture
def huge_ints(tmp_path: Any) -> Any:
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        big, neg = 10**100_000, -(7**90_000)
    finally:
        sys.set_int_max_str_digits(old)
    write(tmp_path / "v.pkl", pickle.dumps({"x": big, "y": neg, "small": 5}, protocol=4))
    write(tmp_path / "k.pkl", pickle.dumps({big: 1}, protocol=4))
    return big, neg


@pytest.mark.parametrize(
    "args",
    [["ls", "v.pkl"], ["inspect", "--no-tui", "v.pkl"], ["get", "v.pkl", "x"], ["ls", "--json", "v.pkl"],
     ["summary", "v.pkl"], ["ls", "k.pkl"], ["inspect", "--no-tui", "k.pkl"], ["diff", "v.pkl", "v.pkl"]],
)  # fmt: skip
def test_a_100000_digit_int_shows_its_digit_count(
    tmp_path: Any, huge_ints: Any, args: list[str]
) -> None:
    run = run_cli(*args, cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=args[0] == "ls" and "--json" not in args)
    if args[0] in ("ls", "inspect", "get") and "--json" not in args:
        assert "int (100001 digits)" in run.stdout
    assert "ValueError" not in run.stdout + run.stderr


def test_a_huge_int_loads_as_a_huge_int_equal_to_its_value(tmp_path: Any, huge_ints: Any) -> None:
    big, neg = huge_ints
    tree = tt.load(str(tmp_path / "v.pkl"))
    assert type(tree["x"]) is HugeInt and tree["x"] == big and int(tree["x"]) == big
    assert repr(tree["x"]) == "int (100001 digits)" and repr(tree["y"]) == "-int (76059 digits)"
    assert tree["y"] == neg and tree["small"] == 5 and type(tree["small"]) is int
    (key,) = tt.load(str(tmp_path / "k.pkl"))
    assert key == big and hash(key) == hash(big)


def test_index_json_limits_locally(tmp_path: Any) -> None:
    deep = b'{"metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b', "weight_map": {}}'
    write(tmp_path / "model.safetensors.index.json", deep)
    run = run_cli("ls", "model.safetensors.index.json", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.startswith("treetool: error: model.safetensors.index.json: sharded index: ")
    wide = {"metadata": {}, "weight_map": {f"t{i}": f"s{i}.safetensors" for i in range(10_001)}}
    write(tmp_path / "model.safetensors.index.json", json.dumps(wide).encode())
    run = run_cli("ls", "model.safetensors.index.json", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr == (
        "treetool: error: model.safetensors.index.json: sharded index names 10001 shards, more "
        "than 10000\n"
    )
