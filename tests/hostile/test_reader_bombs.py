"""Hostile safetensors, msgpack, npy/npz and equinox files: each is built here, small, and must
end as one `treetool: error:` line (exit 2) within the harness's time, memory and file bounds.

Issue 15, items 5 (file-chosen shapes), 7 (amplification), 8 (npz object members) and 16
(`tt.load` raises only `LoadError`) for the formats that are not pickle or orbax.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from _files import (
    Member,
    deflated,
    msgpack_array_header,
    msgpack_ndarray,
    msgpack_str,
    msgpack_uint,
    npy_of,
    npy_record,
    safetensors_bytes,
    stored,
    write,
    zip_bytes,
)
from harness import assert_contained, run_cli

import treetool as tt
import treetool.io as tio
from treetool import LoadError
from treetool.io._safety._limits import MAX_NDIM

HUGE = 2**64 - 1

# when jax's runtime was started earlier in the session, jax warns on every fork (the harness
# forks, then execs at once, to run the command)
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

# --- 5. products of file-chosen shapes --------------------------------------------------------


def test_safetensors_100k_huge_dims_then_zero(tmp_path):
    shape = [HUGE] * 100_000 + [0]
    header = {"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}
    write(tmp_path / "dims.safetensors", safetensors_bytes(header))
    run = run_cli("ls", "dims.safetensors", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr == (
        "treetool: error: dims.safetensors: tensor 'w': 100001 dimensions, more than 64\n"
    )


def test_msgpack_100k_huge_dims_then_zero(tmp_path):
    dims = b"".join(msgpack_uint(HUGE) for _ in range(100_000)) + msgpack_uint(0)
    data = b"\x81" + msgpack_str("w") + msgpack_ndarray(dims, 100_001, "float32", b"")
    write(tmp_path / "dims.msgpack", data)
    run = run_cli("ls", "dims.msgpack", cwd=tmp_path)
    assert_contained(run)
    assert "100001 dimensions, more than 64" in run.stderr


def test_npy_40k_huge_dims_then_zero(tmp_path):
    shape = ", ".join([str(HUGE)] * 40_000 + ["0"])
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({shape},), }}"
    write(tmp_path / "dims.npy", npy_record(header))
    run = run_cli("ls", "dims.npy", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr == (
        "treetool: error: dims.npy: .npy header: 40001 dimensions, more than 64\n"
    )


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ([HUGE, 0], r"dimension 0 is 18446744073709551615, more than 2\*\*48"),
        ([2**40, 2**40], r"shape \[1099511627776, 1099511627776\] has more than 2\*\*48 elements"),
        ([1] * (MAX_NDIM + 1), r"65 dimensions, more than 64"),
        ([3, -1], r"dimension 1 is negative \(-1\)"),
        ([2, 2.5], r"dimension 1 is not an int \(float\)"),
    ],
)
def test_each_reader_checks_every_dimension(tmp_path, shape, message):
    header = {"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}
    f = write(tmp_path / "s.safetensors", safetensors_bytes(header))
    with pytest.raises(LoadError, match=r"s\.safetensors: tensor 'w': " + message):
        tt.load(f)
    dims = ", ".join(map(repr, shape)) + ("," if len(shape) == 1 else "")
    f = write(
        tmp_path / "s.npy",
        npy_record(f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({dims}), }}"),
    )
    with pytest.raises(LoadError, match=r"s\.npy: \.npy header: " + message):
        tt.load(f)


def test_zero_sized_arrays_still_load(tmp_path):
    header = {"w": {"dtype": "F32", "shape": [0, 3], "data_offsets": [0, 0]}}
    f = write(tmp_path / "z.safetensors", safetensors_bytes(header))
    assert tt.load(f)["w"].shape == (0, 3)
    np.save(tmp_path / "z.npy", np.zeros((5, 0), np.int8))
    assert tt.load(tmp_path / "z.npy").shape == (5, 0)


# --- 7. amplification: object and size budgets ------------------------------------------------


def test_msgpack_of_empty_maps(tmp_path):
    n = 2_000_000  # 2 MB of 0x80: two million dicts without a budget
    data = b"\x81" + msgpack_str("a") + msgpack_array_header(n) + b"\x80" * n
    write(tmp_path / "maps.msgpack", data)
    run = run_cli("ls", "maps.msgpack", cwd=tmp_path)
    assert_contained(run, max_rss=300 << 20)
    assert run.stderr == (
        "treetool: error: maps.msgpack: more than 162500 msgpack maps and arrays for a file of "
        "this size (a decompression or nesting bomb?)\n"
    )


def test_safetensors_header_of_empty_lists(tmp_path):
    body = b",".join([b"[]"] * 700_000)  # 2.1 MB of header, 700,000 lists
    write(tmp_path / "h.safetensors", safetensors_bytes(b'{"a": [' + body + b"]}"))
    run = run_cli("ls", "h.safetensors", cwd=tmp_path)
    assert_contained(run, max_rss=300 << 20)
    assert (
        "safetensors header: more than 132250 JSON objects and arrays in 2100008 bytes"
        in run.stderr
    )


def test_safetensors_header_nested_deep(tmp_path):
    pad = b'"pad": "' + b"[" * 200_000 + b'", '  # brackets in strings are not nesting
    header = b"{" + pad + b'"a": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    write(tmp_path / "d.safetensors", safetensors_bytes(header))
    run = run_cli("ls", "d.safetensors", cwd=tmp_path)
    assert_contained(run)
    assert "safetensors header: JSON nested more than 64 levels deep" in run.stderr


def test_npz_directory_of_40k_members(tmp_path):
    """40,000 central-directory entries (51 bytes each) for one member: refused from the zip's
    end record, before zipfile builds an object per entry."""
    one = stored("a.npy", npy_of(np.zeros(1, np.float32)))
    write(tmp_path / "many.npz", zip_bytes([one], repeat_directory=40_000))
    run = run_cli("ls", "many.npz", cwd=tmp_path)
    assert_contained(run, max_rss=300 << 20)
    assert "more than 32877" in run.stderr and "zip members for a file of this size" in run.stderr


def test_npz_of_many_real_members_still_loads(tmp_path):
    arrays = {f"a{i}": np.full(1, i, np.float32) for i in range(3000)}
    np.savez_compressed(tmp_path / "many.npz", **arrays)
    tree = tt.load(tmp_path / "many.npz")
    assert len(tree) == 3000 and float(np.asarray(tree["a2999"])[0]) == 2999.0


# --- 8. npz object members --------------------------------------------------------------------

_OBJECT_HEADER = "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"
_PICKLE_NONE = b"\x80\x04N."  # a complete pickle in 4 bytes
_NOISE = np.random.default_rng(0).bytes(5000)  # does not compress


def test_npz_object_member_deflating_to_100mb_is_refused_before_copying(tmp_path):
    head = npy_record(_OBJECT_HEADER, _PICKLE_NONE)
    zeros = bytes(1 << 20)
    member = deflated("obj.npy", chunks=[head] + [zeros] * 100)  # 100 MiB from ~100 KiB
    write(tmp_path / "bomb.npz", zip_bytes([member]))
    assert (tmp_path / "bomb.npz").stat().st_size < 200_000
    run = run_cli("ls", "bomb.npz", cwd=tmp_path)
    assert_contained(run, max_rss=300 << 20)
    assert (
        "bomb.npz[obj.npy]: object array member expands to 104857732 bytes, more than 67108864"
        in run.stderr
    )


def test_npz_object_member_with_bad_crc_leaves_no_file(tmp_path):
    member = deflated("obj.npy", npy_record(_OBJECT_HEADER, _PICKLE_NONE + b"\0" * 5000))
    member.crc ^= 1
    write(tmp_path / "crc.npz", zip_bytes([member]))
    run = run_cli("ls", "crc.npz", cwd=tmp_path)
    assert_contained(run)  # includes: no new file under the run's TMPDIR or HOME
    assert (
        run.stderr
        == "treetool: error: crc.npz[obj.npy]: damaged member: Bad CRC-32 for file 'obj.npy'\n"
    )


def test_npz_object_member_still_reads_safely(tmp_path):
    member = deflated("obj.npy", npy_record(_OBJECT_HEADER, _PICKLE_NONE))
    write(tmp_path / "ok.npz", zip_bytes([member]))
    r = tio.read(tmp_path / "ok.npz")
    assert r.tree == {"obj": None} and r.blocked == []


# --- 16. tt.load raises only LoadError ----------------------------------------------------------


def _npz(member: Member) -> bytes:
    return zip_bytes([member])


def _flagged(bit: int) -> bytes:
    m = deflated("w.npy", npy_of(np.arange(100, dtype=np.float32)))
    m.flags |= bit
    return _npz(m)


def _truncated_stream(payload: bytes, name: str = "w.npy") -> bytes:
    m = deflated(name, payload)
    m.claimed_csize = len(m.data)
    m.data = m.data[: len(m.data) // 2]  # the file ends inside the deflate stream
    return _npz(m)


def _garbage_stream() -> bytes:
    m = deflated("w.npy", npy_of(np.arange(1000, dtype=np.float32)))
    m.data = m.data[:2] + b"\xff" * 40 + m.data[42:]
    return _npz(m)


def _npy(descr: str, shape: str, data: bytes = b"") -> bytes:
    return npy_record(f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': {shape}, }}", data)


#: (what escaped before, file name, bytes, the one line now)
ESCAPED = [
    ("OverflowError", "c.npy", _npy("<f4", "(1" + "0" * 400 + "+1j,)"), r"malformed \.npy header"),
    ("ValueError", "d.npy", _npy("<f4", "(" + "9" * 20_000 + ",)"), r"malformed \.npy header"),
    ("ValueError", "v.npy", _npy("|V0", "(1099511627776,)"), r"dtype \|V0 has no size"),
    ("ValueError", "s.npy", _npy("(2,)f4", "(2,)", b"\0" * 16), r"subarray dtype"),
    ("ValueError", "t.npy", _npy("(10000000000000,)f4", "(2,)"), r"unsupported dtype"),
    ("SyntaxError", "x.npy", _npy("(2,", "(2,)"), r"unsupported dtype '\(2,'"),
    ("zlib.error", "z.npz", _garbage_stream(), r"z\.npz\[w\.npy\]: damaged member: Error -3"),
    (
        "EOFError",
        "e.npz",
        _truncated_stream(npy_record(_OBJECT_HEADER, _PICKLE_NONE + _NOISE), "o.npy"),
        r"e\.npz\[o\.npy\]: damaged member: the file ends inside its compressed data$",
    ),
    ("NotImplementedError", "n.npz", _flagged(0x40), r"damaged member: strong encryption"),
    ("RuntimeError", "r.npz", _flagged(0x1), r"damaged member: File .* is encrypted"),
]


@pytest.mark.parametrize(
    ("escaped", "name", "data", "message"), ESCAPED, ids=[f"{e[0]}-{e[1]}" for e in ESCAPED]
)
def test_damage_is_one_load_error(tmp_path, escaped, name, data, message):
    f = write(tmp_path / name, data)
    with pytest.raises(LoadError, match=message) as info:
        tt.load(f)
    assert type(info.value) is LoadError
    assert str(info.value).startswith(str(f)) and "\n" not in str(info.value)


def test_damaged_data_read_later_is_one_load_error(tmp_path):
    """The header decompresses, the data does not: reading the leaf raises LoadError too."""
    f = write(
        tmp_path / "late.npz", _truncated_stream(npy_of(np.random.default_rng(0).random(1000)))
    )
    leaf = tt.load(f)["w"]
    with pytest.raises(LoadError, match=r"late\.npz\[w\.npy\]: damaged member: the file ends"):
        np.asarray(leaf)


def test_recursion_deep_safetensors_names_stay_flat_keys(tmp_path):
    """A 100,000-level key path is kept as one flat name, not rebuilt by recursion."""
    name = "['a']" * 100_000
    header = {name: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    f = write(tmp_path / "deep.safetensors", safetensors_bytes(header, b"\0" * 4))
    tree = tt.load(f)
    assert list(tree) == [name] and tree[name].shape == (1,)


def test_equinox_file_of_bad_records(tmp_path):
    good = npy_of(np.zeros(2, np.float32))
    bad = _npy("<f4", "(" + ", ".join(["4294967296"] * 3) + ")")
    f = write(tmp_path / "m.eqx", good + bad)
    with pytest.raises(
        LoadError,
        match=r"m\.eqx: \.npy header: shape \[4294967296, 4294967296, 4294967296\] has more than 2\*\*48 elements",
    ):
        tt.load(f, format="equinox")


def test_truncated_deflate_stream_check_is_real():
    # the damaged streams above really are damaged for zlib itself
    m = deflated("w.npy", b"x" * 1000)
    assert zlib.decompress(m.data, -15) == b"x" * 1000
    with pytest.raises(zlib.error):
        zlib.decompress(m.data[:2] + b"\xff" * 40 + m.data[42:], -15)
    assert struct.unpack("<I", _flagged(0x40)[6:8] + b"\0\0")[0] & 0x40


def test_partial_keeps_the_members_before_the_damage(tmp_path):
    bad = deflated("c.npy", npy_of(np.arange(1000, dtype=np.float32)))
    bad.data = bad.data[:2] + b"\xff" * 40 + bad.data[42:]
    good = [stored(f"{k}.npy", npy_of(np.full(2, i, np.int8))) for i, k in enumerate("ab")]
    f = write(tmp_path / "p.npz", zip_bytes([*good, bad]))
    with pytest.raises(LoadError, match=r"p\.npz\[c\.npy\]: damaged member"):
        tio.read(f)
    r = tio.read(f, partial=True)
    assert list(r.tree) == ["a", "b"] and np.asarray(r.tree["b"]).tolist() == [1, 1]
    assert r.error is not None and r.error.endswith(
        "p.npz[c.npy]: damaged member: Error -3 while decompressing data: invalid code lengths set"
    )
    run = run_cli("ls", "--partial", "p.npz", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    assert run.stdout == "['a']\t[2]\tint8\n['b']\t[2]\tint8\n"
    assert run.stderr.startswith("treetool: warning: p.npz[c.npy]: damaged member")


def test_partial_keeps_the_equinox_records_before_the_damage(tmp_path):
    good = npy_of(np.zeros(2, np.float32)) + npy_of(np.ones(3, np.int32))
    f = write(tmp_path / "m.eqx", good + _npy("<f4", "(" + "9" * 20_000 + ",)"))
    r = tio.read(f, format="equinox", partial=True)
    assert [x.shape for x in r.tree] == [(2,), (3,)]
    assert r.error is not None and "malformed .npy header" in r.error


def test_real_dense_headers_stay_within_the_budgets(tmp_path):
    """Files written by the real libraries, as dense as they come, load: 20,000 one-element
    tensors in safetensors, 20,000 one-element arrays in flax msgpack."""
    from flax import serialization
    from safetensors.numpy import save_file

    arrays = {f"a{i}": np.full(1, i, np.float32) for i in range(20_000)}
    save_file(arrays, tmp_path / "dense.safetensors")
    tree = tt.load(tmp_path / "dense.safetensors")
    assert len(tree) == 20_000 and np.asarray(tree["a19999"]).tolist() == [19999.0]
    (tmp_path / "dense.msgpack").write_bytes(serialization.to_bytes(arrays))
    tree = tt.load(tmp_path / "dense.msgpack")
    assert len(tree) == 20_000 and np.asarray(tree["a123"]).tolist() == [123.0]
