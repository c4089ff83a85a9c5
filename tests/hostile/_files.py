"""Builders of hostile non-pickle files, byte by byte: npy headers, zips, safetensors, msgpack.

Each builder writes exactly what it is told (a lying size, a bad CRC, a flag bit), so a test can
make any damage the readers must survive; numpy and zipfile would refuse to write most of them.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def npy_record(header: str, data: bytes = b"") -> bytes:
    """A `.npy` record with `header` as its literal text (padded like numpy's): version 1.0,
    or 2.0 when the header is longer than 64 KiB."""
    h = header.encode("latin1")
    if len(h) + 11 < 1 << 16:
        h += b" " * (-(len(h) + 11) % 64) + b"\n"
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data
    h += b" " * (-(len(h) + 13) % 64) + b"\n"
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(h)) + h + data


def npy_of(arr: np.ndarray) -> bytes:
    """The `.npy` bytes numpy writes for `arr`."""
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


@dataclass
class Member:
    """One zip member as stored: `data` is what is in the archive (deflated or not)."""

    name: str
    data: bytes
    size: int  # the uncompressed size the headers claim
    crc: int
    method: int = 0  # 0 stored, 8 deflated
    flags: int = 0
    claimed_csize: int | None = None  # a compressed size that lies (None: the true one)


def stored(name: str, payload: bytes) -> Member:
    """A stored member with its true size and CRC."""
    return Member(name, payload, len(payload), zlib.crc32(payload))


def deflated(
    name: str, payload: bytes | None = None, *, chunks: list[bytes] | None = None
) -> Member:
    """A deflated member with its true size and CRC; `chunks` streams a big payload."""
    parts = chunks if chunks is not None else [payload or b""]
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    out, crc, size = [], 0, 0
    for part in parts:
        out.append(comp.compress(part))
        crc = zlib.crc32(part, crc)
        size += len(part)
    out.append(comp.flush())
    return Member(name, b"".join(out), size, crc, method=8)


def zip_bytes(members: list[Member], *, repeat_directory: int = 1) -> bytes:
    """A zip of `members`; `repeat_directory` lists every member that many times in the
    central directory (all pointing at the same local data)."""
    local, central = bytearray(), bytearray()
    for m in members:
        name = m.name.encode()
        offset = len(local)
        csize = len(m.data) if m.claimed_csize is None else m.claimed_csize
        local += b"PK\x03\x04" + struct.pack(
            "<HHHHHIIIHH", 20, m.flags, m.method, 0, 0, m.crc, csize, m.size, len(name), 0
        )
        local += name + m.data
        entry = b"PK\x01\x02" + struct.pack(
            "<HHHHHHIIIHHHHHII",
            20, 20, m.flags, m.method, 0, 0, m.crc, csize, m.size,
            len(name), 0, 0, 0, 0, 0, offset,
        )  # fmt: skip
        central += entry + name
    central = bytes(central) * repeat_directory
    count = len(members) * repeat_directory
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, count, count, len(central), len(local), 0)
    return bytes(local) + central + end


def safetensors_bytes(header: dict | bytes, data: bytes = b"") -> bytes:
    """A safetensors file: 8-byte length, the header (a dict, or raw JSON bytes), the data."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def msgpack_str(s: str) -> bytes:
    b = s.encode()
    assert len(b) < 32
    return bytes([0xA0 | len(b)]) + b


def msgpack_uint(n: int) -> bytes:
    return b"\xcf" + struct.pack(">Q", n) if n > 0x7F else bytes([n])


def msgpack_array_header(n: int) -> bytes:
    return b"\xdd" + struct.pack(">I", n)


def msgpack_ndarray(shape_items: bytes, n_dims: int, dtype: str, payload: bytes) -> bytes:
    """flax's array extension (ext 1: `[shape, dtype name, bytes]`) with a raw shape list."""
    body = b"\x93" + msgpack_array_header(n_dims) + shape_items + msgpack_str(dtype)
    body += b"\xc6" + struct.pack(">I", len(payload)) + payload
    return b"\xc9" + struct.pack(">I", len(body)) + b"\x01" + body


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
