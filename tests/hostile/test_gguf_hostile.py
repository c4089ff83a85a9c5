"""Hostile GGUF files, built here byte by byte: each ends as one `LoadError` line (in-process)
and, for the bombs, one `treetool: error:` line within the harness's time and memory bounds."""

from __future__ import annotations

import struct

import pytest
from harness import assert_contained, run_cli

import treetool.io as tio
from treetool import LoadError

HUGE = 2**64 - 1

pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


def _s(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def _gguf(kvs: bytes = b"", n_kv: int = 0, infos: bytes = b"", n_t: int = 0, data: bytes = b"",
          version: int = 3, magic: bytes = b"GGUF") -> bytes:  # fmt: skip
    head = magic + struct.pack("<IQQ", version, n_t, n_kv) + kvs + infos
    return head + b"\0" * (-len(head) % 32) + data


def _kv_u32(key: bytes, value: int) -> bytes:
    return _s(key) + struct.pack("<II", 4, value)


def _info(name: bytes, dims: list[int], gtype: int, offset: int) -> bytes:
    return _s(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, gtype, offset)


CASES = {
    "huge_counts": (
        _gguf(n_kv=HUGE, n_t=HUGE),
        r"GGUF header claims 18446744073709551615 key/values and 18446744073709551615 "
        r"tensors, more than its \d+ bytes can hold",
    ),
    "huge_string": (
        _gguf(struct.pack("<Q", 2**62), n_kv=1, data=b"\0" * 32),
        r"GGUF key 0 claims a string of 4611686018427387904 bytes, the file has \d+ left",
    ),
    "huge_array": (
        _gguf(_s(b"a") + struct.pack("<IIQ", 9, 8, 2**60), n_kv=1),
        r"GGUF key 'a' claims 1152921504606846976 items of at least 8 bytes",
    ),
    "nested_arrays": (
        _gguf(
            _s(b"a") + struct.pack("<II", 9, 9) + struct.pack("<QI", 1, 9) * 20 + b"\0" * 64, n_kv=1
        ),
        r"key 'a': arrays nested more than 8 deep",
    ),
    "bad_magic": (_gguf(magic=b"GGUG"), None),
    "bad_version": (_gguf(version=99), r"GGUF version 99 is not supported"),
    "truncated": (
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _s(b"general.name") + struct.pack("<I", 8))[:-2],
        r"truncated GGUF file",
    ),
    "offset_past_end": (
        _gguf(infos=_info(b"w", [4], 0, 2**40), n_t=1, data=b"\0" * 16),
        r"tensor 'w': data ends at byte \d+, the file has \d+",
    ),
    "unknown_ggml_type": (
        _gguf(infos=_info(b"w", [4], 200, 0), n_t=1, data=b"\0" * 16),
        r"tensor 'w': unknown ggml type 200",
    ),
    "huge_dims": (
        _gguf(infos=_info(b"w", [HUGE, HUGE], 0, 0), n_t=1),
        r"tensor 'w': dimension \d is 18446744073709551615, more than 2\*\*48",
    ),
    "bad_block_rows": (
        _gguf(infos=_info(b"w", [33], 8, 0), n_t=1, data=b"\0" * 64),
        r"tensor 'w': Q8_0 needs rows of a multiple of 32, got 33",
    ),
    "bad_alignment": (
        _gguf(_kv_u32(b"general.alignment", 3), n_kv=1),
        r"general.alignment 3 is not a power of two",
    ),
    "unknown_value_type": (
        _gguf(_s(b"k") + struct.pack("<I", 77) + b"\0" * 8, n_kv=1),
        r"key 'k': unknown GGUF value type 77",
    ),
    "duplicate_tensor": (
        _gguf(infos=_info(b"w", [1], 0, 0) * 2, n_t=2, data=b"\0" * 4),
        r"tensor 'w': the name is given twice",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_load_error(tmp_path, name):
    data, pattern = CASES[name]
    p = tmp_path / "m.gguf"
    p.write_bytes(data)
    if pattern is None:  # not GGUF at all: not detected as one; read as one, refused
        with pytest.raises(LoadError, match="unknown file format"):
            tio.read(str(p))
        pattern = "not a GGUF file"
    with pytest.raises(LoadError, match=pattern) as info:
        tio.read(str(p), format="gguf")
    assert "\n" not in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["huge_counts", "huge_array", "offset_past_end"])
def test_cli_contained(tmp_path, name):
    data, _ = CASES[name]
    (tmp_path / "m.gguf").write_bytes(data)
    run = run_cli("ls", "m.gguf", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.startswith("treetool: error: m.gguf: ")
