"""The zip directory of a torch zip checkpoint, read by ranged reads through a `Source`.

torch's writer (`caffe2/serialize/inline_container.cc`) stores every record (method 0) with
its data aligned to `.storage_alignment` by padding in the LOCAL header's extra field; the
central directory's extra field differs, so a record's data offset is taken from its local
header. A deflated record (a repacked file) is read through a bounded inflater (`_record_io`).

Everything here is checked against the file: the end record, the zip64 records, every entry's
sizes and offsets (inside the file, records not overlapping), names (UTF-8, no NUL), the
member count (against the file's size). Damage is one `LoadError` line naming the file.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
import zlib
from dataclasses import dataclass

from treetool._errors import LoadError
from treetool._source import Source
from treetool.io._safety._limits import check_zip_directory

__all__ = [
    "Record",
    "ZipDir",
    "inflate",
    "local_data_offset",
    "read_zip_dir",
]

_EOCD = b"PK\x05\x06"
_EOCD64_LOC = b"PK\x06\x07"
_EOCD64 = b"PK\x06\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_TAIL = 64 << 10  # one read at the end: the end record and, usually, the whole directory
#: deflate cannot expand data more than ~1032 times: a record claiming more is a zip bomb
_MAX_RATIO = 1032
_LOCAL_SLACK = 128  # local header bytes read past the name: the extra field (alignment padding)


@dataclass
class Record:
    """One zip entry: its name, method, sizes, local header offset and data offset."""

    name: str
    method: int
    csize: int
    size: int
    header: int
    data: int = -1  # the data's offset, from the local header (-1 until read)
    #: where the record must end: the next record's local header, or the central directory
    limit: int = -1
    after: str = ""  # what lies at `limit`: the next record's name ("" for the directory)


@dataclass
class ZipDir:
    """The records of a zip file, by name, in directory order."""

    src: Source
    records: dict[str, Record]
    tail: tuple[int, bytes] = (0, b"")  # (offset, bytes) of the file's end, read already

    def read_at(self, offset: int, n: int) -> bytes:
        """`src.read`, served from the end of the file already read where it lies there."""
        return _read_at(self.src, self.tail, offset, n)

    def read(self, rec: Record, limit: int) -> bytes:
        """The bytes of a record (inflated if deflated), refusing more than `limit` bytes."""
        where = f"{self.src.name}[{rec.name}]"
        if rec.size > limit:
            raise LoadError(f"{where}: record of {rec.size} bytes, more than the {limit} allowed")
        at = local_data_offset(self.src, rec, self.tail)
        if rec.method == 0:
            return self.read_at(at, rec.size) if rec.size else b""
        return inflate(self.read_at(at, rec.csize), rec.size, where)


def _u16(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<H", b, at)[0])


def _u32(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<I", b, at)[0])


def _u64(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<Q", b, at)[0])


def read_zip_dir(src: Source, *, tail: bytes | None = None) -> ZipDir:
    """The zip directory of `src` (one read at the end, plus the local headers' reads).

    Example:
        >>> import io, os, tempfile, zipfile
        >>> p = os.path.join(tempfile.mkdtemp(), "a.zip")
        >>> with zipfile.ZipFile(p, "w") as z:
        ...     z.writestr("m/data.pkl", b"x")
        >>> from treetool._source import source_for
        >>> d = read_zip_dir(source_for(p))
        >>> list(d.records), d.read(d.records["m/data.pkl"], 10)
        (['m/data.pkl'], b'x')
    """
    name, size = src.name, src.size
    key = _cache_key(src, size)
    got = _CACHE.get(key)
    if got is not None:
        return got
    zd = _read_zip_dir(src, name, size, tail)
    with _CACHE_LOCK:
        while len(_CACHE) >= _CACHED:  # the oldest go: detection and the read after it share one
            _CACHE.pop(next(iter(_CACHE)), None)
        _CACHE[key] = zd
    return zd


#: the last directories read (detection reads one, then the reader; the shards of a set are
#: read in parallel): (name, size, mtime or source) -> it
_CACHE: dict[tuple, ZipDir] = {}
_CACHED = 32
_CACHE_LOCK = threading.Lock()


def _cache_key(src: Source, size: int) -> tuple:
    if src.remote:
        return (src.name, size, id(src))
    try:
        return (src.name, size, os.stat(src.name).st_mtime_ns)
    except OSError:
        return (src.name, size, None)


def _read_zip_dir(src: Source, name: str, size: int, tail: bytes | None) -> ZipDir:
    if tail is None:
        n = min(size, _TAIL)
        tail = src.read(size - n, n)
    base = size - len(tail)
    at = tail.rfind(_EOCD)
    if at < 0 or at + 22 > len(tail):
        raise LoadError(f"{name}: not a zip file: no end of central directory record")
    count, cd_size, cd_off = _u16(tail, at + 10), _u32(tail, at + 12), _u32(tail, at + 16)
    if 0xFFFF in (count,) or 0xFFFFFFFF in (cd_size, cd_off):
        loc = at - 20
        if loc < 0 or tail[loc : loc + 4] != _EOCD64_LOC:
            raise LoadError(f"{name}: zip64 end record locator missing")
        e64 = _u64(tail, loc + 8)
        rec = tail[e64 - base : e64 - base + 56] if e64 >= base else src.read(e64, 56)
        if len(rec) < 56 or rec[:4] != _EOCD64:
            raise LoadError(f"{name}: bad zip64 end of central directory record")
        count, cd_size, cd_off = _u64(rec, 32), _u64(rec, 40), _u64(rec, 48)
    check_zip_directory(name, size, count, cd_size)
    if cd_off + cd_size > size:
        raise LoadError(f"{name}: the zip directory lies outside the file ({cd_off}+{cd_size})")
    cd = tail[cd_off - base : cd_off - base + cd_size] if cd_off >= base else None
    if cd is None:
        cd = src.read(cd_off, cd_size)
    records = _central(cd, count, name, size)
    _bound(records, cd_off)
    _locate(src, records, size, (base, tail))
    return ZipDir(src, records, (base, tail))


def _read_at(src: Source, tail: tuple[int, bytes], offset: int, n: int) -> bytes:
    base, data = tail
    if base <= offset and offset + n <= base + len(data):
        return data[offset - base : offset - base + n]
    return src.read(offset, n)


def _central(cd: bytes, count: int, name: str, size: int) -> dict[str, Record]:
    out: dict[str, Record] = {}
    pos = 0
    for _ in range(count):
        if cd[pos : pos + 4] != _CENTRAL or pos + 46 > len(cd):
            raise LoadError(f"{name}: bad zip central directory entry at byte {pos}")
        flags, method = _u16(cd, pos + 8), _u16(cd, pos + 10)
        csize, usize = _u32(cd, pos + 20), _u32(cd, pos + 24)
        nlen, xlen, clen = _u16(cd, pos + 28), _u16(cd, pos + 30), _u16(cd, pos + 32)
        header = _u32(cd, pos + 42)
        raw = cd[pos + 46 : pos + 46 + nlen]
        extra = cd[pos + 46 + nlen : pos + 46 + nlen + xlen]
        usize, csize, header = _zip64(extra, usize, csize, header)
        pos += 46 + nlen + xlen + clen
        if pos > len(cd):
            raise LoadError(f"{name}: truncated zip central directory")
        try:
            rname = raw.decode("utf-8" if flags & 0x800 else "cp437")
        except UnicodeDecodeError:
            raise LoadError(f"{name}: a zip entry name is not valid UTF-8") from None
        if "\x00" in rname or not rname:
            raise LoadError(f"{name}: a zip entry has an empty name or a NUL in it")
        if method not in (0, 8):
            raise LoadError(f"{name}[{rname}]: unsupported zip compression method {method}")
        if flags & 0x1:
            raise LoadError(f"{name}[{rname}]: encrypted zip entries are not supported")
        if method == 0 and csize != usize:
            raise LoadError(f"{name}[{rname}]: a stored record whose sizes differ")
        if method == 8 and usize > csize * _MAX_RATIO + 1024:
            raise LoadError(
                f"{name}[{rname}]: record claims {usize} bytes from {csize} compressed "
                "(a zip bomb?)"
            )
        if header + 30 + csize > size:
            raise LoadError(f"{name}[{rname}]: record lies outside the file")
        if rname in out:
            raise LoadError(f"{name}: the zip names {rname!r} twice")
        out[rname] = Record(rname, method, csize, usize, header)
    return out


def _zip64(extra: bytes, usize: int, csize: int, header: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, n = _u16(extra, pos), _u16(extra, pos + 2)
        body = extra[pos + 4 : pos + 4 + n]
        if tag == 1:
            i = 0
            vals = []
            for v in (usize, csize, header):
                if v == 0xFFFFFFFF and i + 8 <= len(body):
                    vals.append(_u64(body, i))
                    i += 8
                else:
                    vals.append(v)
            return vals[0], vals[1], vals[2]
        pos += 4 + n
    return usize, csize, header


def _bound(records: dict[str, Record], cd_off: int) -> None:
    """Each record's `limit`: the next record's local header (by offset), or the directory."""
    recs = sorted(records.values(), key=lambda r: r.header)
    for r, nxt in itertools.zip_longest(recs, recs[1:]):
        r.limit, r.after = (nxt.header, nxt.name) if nxt is not None else (cd_off, "")


def _extent(src: Source, rec: Record, data: int) -> None:
    """Refuse a record whose data (found from its local header) runs past the file, into the
    next record or into the central directory: the same check for a local and a remote file."""
    where = f"{src.name}[{rec.name}]"
    if data + rec.csize > src.size:
        raise LoadError(f"{where}: record data lies outside the file")
    if 0 <= rec.limit < data + rec.csize:
        if rec.after:
            raise LoadError(f"{src.name}: zip records {rec.name!r} and {rec.after!r} overlap")
        raise LoadError(f"{where}: record data runs into the zip directory")


def _locate(src: Source, records: dict[str, Record], size: int, tail: tuple[int, bytes]) -> None:
    """Each record's data offset from its local header; records may not overlap.

    Remotely, a storage record's (`.../data/<key>`) local header is read when its data is
    first read (`RecordSource`): listing a file costs no request per tensor.
    """
    recs = list(records.values())
    if src.remote:
        spans = sorted(
            (r.header, r.header + 30 + len(r.name.encode()) + r.csize, r.name) for r in recs
        )
        _no_overlap(src, spans)
        recs = [r for r in recs if "/data/" not in r.name]
    ranges = [
        (r.header, min(30 + len(r.name.encode()) + _LOCAL_SLACK, size - r.header)) for r in recs
    ]
    if src.remote:  # the end of the file is read already; the rest: near ones merged
        far = [r for r in ranges if not _in(tail, r)]
        got = dict(zip(far, src.read_many(far)))
        blobs = [got[r] if r in got else _read_at(src, tail, *r) for r in ranges]
    else:  # unbuffered: a buffered read would read 8 KiB around every local header
        with open(src.name, "rb", buffering=0) as fh:
            blobs = [os.pread(fh.fileno(), n, off) for off, n in ranges]
    for r, b in zip(recs, blobs):
        where = f"{src.name}[{r.name}]"
        if b[:4] != _LOCAL or len(b) < 30:
            raise LoadError(f"{where}: bad zip local header at byte {r.header}")
        nlen, xlen = _u16(b, 26), _u16(b, 28)
        _extent(src, r, r.header + 30 + nlen + xlen)
        r.data = r.header + 30 + nlen + xlen
    if not src.remote:
        _no_overlap(src, sorted((r.header, r.data + r.csize, r.name) for r in recs))


def _no_overlap(src: Source, spans: list[tuple[int, int, str]]) -> None:
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        if start < end:
            raise LoadError(f"{src.name}: zip records {first!r} and {second!r} overlap")


def _in(tail: tuple[int, bytes], r: tuple[int, int]) -> bool:
    return tail[0] <= r[0] and r[0] + r[1] <= tail[0] + len(tail[1])


def local_data_offset(src: Source, rec: Record, tail: tuple[int, bytes] = (0, b"")) -> int:
    """The record's data offset, from its local header (read now if not read yet)."""
    if rec.data < 0:
        n = min(30 + len(rec.name.encode()) + _LOCAL_SLACK, src.size - rec.header)
        b = _read_at(src, tail, rec.header, n)
        where = f"{src.name}[{rec.name}]"
        if b[:4] != _LOCAL or len(b) < 30:
            raise LoadError(f"{where}: bad zip local header at byte {rec.header}")
        data = rec.header + 30 + _u16(b, 26) + _u16(b, 28)
        _extent(src, rec, data)
        rec.data = data
    return rec.data


def inflate(data: bytes, size: int, where: str) -> bytes:
    """Inflate raw deflate `data` to exactly `size` bytes, never more."""
    d = zlib.decompressobj(-15)
    try:
        out = d.decompress(data, size + 1)
    except zlib.error as e:
        raise LoadError(f"{where}: damaged deflated record: {e}") from None
    if len(out) != size:
        raise LoadError(f"{where}: deflated record inflates to {len(out)} bytes, not {size}")
    return out
