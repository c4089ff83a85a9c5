"""flax msgpack files (`flax.serialization.to_bytes`), read without flax and without the payloads.

treetool walks the msgpack bytes itself: maps, arrays and scalars become dicts, lists and
Python values; flax's array extension (ext type 1: `(shape, dtype name, raw bytes)`) becomes
a `LazyArray` pointing at the raw bytes in the file. Arrays that flax split into chunks
(`__msgpack_chunked_array__`, over 1 GiB) become one `LazyArray` that streams the chunks.
"""

from __future__ import annotations

import io
import math
import struct
from typing import IO, TYPE_CHECKING, Any

from treetool._errors import LoadError
from treetool._leaves._arrays import LazyArray
from treetool._leaves._dtypes import ITEMSIZES, loaded_numpy
from treetool._source import Source, source_for
from treetool.io._formats import Format, Probe, ReadOptions
from treetool.io._loaded import Loaded
from treetool.io._pickle._numpy_rebuild import HostScalar, in_listing
from treetool.io._safety._limits import (
    MAX_DIM,
    MAX_ELEMENTS,
    MAX_NDIM,
    Budget,
    check_dtype,
    check_shape,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FORMAT", "looks_like_flax_msgpack", "read_msgpack"]

MAX_DEPTH = 1000
_EXT_NDARRAY, _EXT_COMPLEX, _EXT_SCALAR = 1, 2, 3


def looks_like_flax_msgpack(head: bytes) -> bool:
    """A msgpack map whose first key is a string (flax state dicts are maps of str keys)."""
    if not head:
        return False
    b = head[0]
    if b == 0x80:
        return len(head) == 1
    if 0x81 <= b <= 0x8F:
        key = head[1:2]
    elif b == 0xDE:
        key = head[3:4]
    elif b == 0xDF:
        key = head[5:6]
    else:
        return False
    return bool(key) and (0xA0 <= key[0] <= 0xBF or key[0] in (0xD9, 0xDA, 0xDB))


#: what a map key may be: scalars, which hash and sort as dict keys do in a pytree
_KEY_TYPES = (str, bytes, int, float, bool, type(None))

#: the longest string a file may hold (strings are read whole, locally and remotely: keys and
#: names are far shorter)
MAX_STR = 16 << 20
#: the most bytes of a numpy scalar extension (read whole: one number, 32 bytes at most)
MAX_SCALAR = 64


class _Budgets:
    """What a file of `size` bytes may build: containers, map entries and array items.

    Each is at least a byte of the file and at most ~100 bytes of memory; the limits keep the
    memory within a few times the file's size (a flax state dict is far below them: its keys
    and array headers take tens of bytes per entry).
    """

    __slots__ = ("containers", "entries", "items")

    def __init__(self, path: str, size: int) -> None:
        self.containers = Budget(path, "msgpack maps and arrays", 100_000 + size // 32)
        self.entries = Budget(path, "msgpack map entries", 100_000 + size // 16)
        self.items = Budget(path, "msgpack array items", 1_000_000 + size // 2)


class _Reader:
    def __init__(
        self, data: Any, path: str, lazy: bool, end: int, budgets: _Budgets | None = None
    ) -> None:
        self.data = data
        self.path = path
        self.lazy = lazy
        self.end = end
        self.budgets = budgets if budgets is not None else _Budgets(path, end)

    def fail(self, msg: str, at: int) -> LoadError:
        return LoadError(f"{self.path}: {msg} (at byte {at})")

    def need(self, pos: int, n: int, what: str) -> None:
        if n < 0 or pos + n > self.end:
            raise self.fail(
                f"truncated msgpack: {what} needs {n} bytes, {max(self.end - pos, 0)} left", pos
            )

    def _int(self, pos: int, fmt: str, n: int, what: str) -> int:
        self.need(pos, n, what)
        try:
            return struct.unpack_from(fmt, self.data, pos)[0]
        except TypeError:  # a remote file's block reader: unpack a slice
            return struct.unpack_from(fmt, self.data[pos : pos + n])[0]

    def scalar(self, pos: int) -> tuple[str, Any, int]:
        """Decode one item header at pos: ('value', v, next) or ('map'|'array', n, next)."""
        d = self.data
        self.need(pos, 1, "item")
        b = d[pos]
        pos += 1
        if b <= 0x7F:
            return "value", b, pos
        if b >= 0xE0:
            return "value", b - 0x100, pos
        if 0x80 <= b <= 0x8F:
            return "map", b & 0x0F, pos
        if 0x90 <= b <= 0x9F:
            return "array", b & 0x0F, pos
        if 0xA0 <= b <= 0xBF:
            n = b & 0x1F
            return "value", self.text(pos, n), pos + n
        if b == 0xC0:
            return "value", None, pos
        if b == 0xC2:
            return "value", False, pos
        if b == 0xC3:
            return "value", True, pos
        if b in (0xC4, 0xC5, 0xC6):
            w = {0xC4: 1, 0xC5: 2, 0xC6: 4}[b]
            n = self._int(pos, {1: ">B", 2: ">H", 4: ">I"}[w], w, "bin")
            pos += w
            self.need(pos, n, "bin")
            return "bin", (pos, n), pos + n
        if b in (0xC7, 0xC8, 0xC9) or 0xD4 <= b <= 0xD8:
            if b >= 0xD4:
                n, w = 1 << (b - 0xD4), 0
            else:
                w = {0xC7: 1, 0xC8: 2, 0xC9: 4}[b]
                n = self._int(pos, {1: ">B", 2: ">H", 4: ">I"}[w], w, "ext")
            pos += w
            code = self._int(pos, ">b", 1, "ext")
            pos += 1
            self.need(pos, n, "ext")
            return "value", self.ext(code, pos, n), pos + n
        if b == 0xCA:
            return "value", self._int(pos, ">f", 4, "float32"), pos + 4
        if b == 0xCB:
            return "value", self._int(pos, ">d", 8, "float64"), pos + 8
        ints = {0xCC: (">B", 1), 0xCD: (">H", 2), 0xCE: (">I", 4), 0xCF: (">Q", 8),
                0xD0: (">b", 1), 0xD1: (">h", 2), 0xD2: (">i", 4), 0xD3: (">q", 8)}  # fmt: skip
        if b in ints:
            fmt, w = ints[b]
            return "value", self._int(pos, fmt, w, "int"), pos + w
        if b in (0xD9, 0xDA, 0xDB):
            w = {0xD9: 1, 0xDA: 2, 0xDB: 4}[b]
            n = self._int(pos, {1: ">B", 2: ">H", 4: ">I"}[w], w, "str")
            pos += w
            return "value", self.text(pos, n), pos + n
        if b in (0xDC, 0xDD):
            w = 2 if b == 0xDC else 4
            n = self._int(pos, ">H" if w == 2 else ">I", w, "array")
            return "array", n, pos + w
        if b in (0xDE, 0xDF):
            w = 2 if b == 0xDE else 4
            n = self._int(pos, ">H" if w == 2 else ">I", w, "map")
            return "map", n, pos + w
        raise self.fail(f"not msgpack: reserved byte 0x{b:02x}", pos - 1)

    def text(self, pos: int, n: int) -> str:
        self.need(pos, n, "str")
        if n > MAX_STR:  # a string is read whole: refused before the read is issued
            raise self.fail(f"a string of {n} bytes, more than {MAX_STR}", pos)
        try:
            return bytes(self.data[pos : pos + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("bad UTF-8 string", pos) from None

    def value(self, pos: int, limit_depth: int = MAX_DEPTH) -> tuple[Any, int]:
        """Decode a whole item (iteratively) starting at pos."""
        root: list[Any] = []
        # frames: [container, remaining, pending_key_or_marker]
        stack: list[list[Any]] = [[root, 1, None, "array"]]
        while stack:
            top = stack[-1]
            if top[1] == 0:
                stack.pop()
                done = top[0]
                if (
                    top[3] == "map"
                    and isinstance(done, dict)
                    and done.get("__msgpack_chunked_array__") is True
                ):
                    done = self.chunked(done)
                if stack:
                    self.put(stack[-1], done)
                continue
            kind, v, pos = self.scalar(pos)
            if kind == "bin":
                start, n = v
                v = bytes(self.data[start : start + n])
                kind = "value"
            if kind == "value":
                self.put(top, v)
                continue
            if len(stack) > limit_depth:
                raise self.fail(f"nested deeper than {limit_depth} levels", pos)
            if v > self.end - pos:
                raise self.fail(f"truncated msgpack: {kind} of {v} items", pos)
            budgets = self.budgets
            budgets.containers.take()
            (budgets.entries if kind == "map" else budgets.items).take(v)
            stack.append([{} if kind == "map" else [], v * (2 if kind == "map" else 1), None, kind])
        return root[0], pos

    def put(self, frame: list[Any], v: Any) -> None:
        c = frame[0]
        frame[1] -= 1
        if isinstance(c, list):
            c.append(v)
        elif frame[2] is None and frame[1] % 2 == 1:
            if not isinstance(v, _KEY_TYPES):
                # an array (ext) or container as a key: a pytree's dict keys must sort
                raise LoadError(
                    f"{self.path}: a msgpack map key is a {type(v).__name__}; keys must be "
                    "strings, numbers, booleans or nil"
                )
            frame[2] = (v,)
        else:
            c[frame[2][0]] = v
            frame[2] = None

    def ext(self, code: int, pos: int, n: int) -> Any:
        sub = _Reader(self.data, self.path, self.lazy, pos + n, self.budgets)
        if code in (_EXT_NDARRAY, _EXT_SCALAR):
            kind, cnt, p = sub.scalar(pos)
            if kind != "array" or cnt != 3:
                raise self.fail("bad flax array extension", pos)
            kind, ndim, _ = sub.scalar(p)
            if kind == "array" and ndim > MAX_NDIM:  # refused before its items are decoded
                raise LoadError(
                    f"{self.path}: array at byte {pos}: {ndim} dimensions, more than {MAX_NDIM}"
                )
            shape, p = sub.value(p, 2)
            kind, dname, p = sub.scalar(p)
            kind2, blob, p = sub.scalar(p)
            if not isinstance(shape, list):
                raise self.fail("bad array shape: not a list", pos)
            if len(shape) > MAX_NDIM or not all(
                type(s) is int and 0 <= s <= MAX_DIM for s in shape
            ):
                check_shape(shape, f"{self.path}: array at byte {pos}")  # raises, saying why
            if not isinstance(dname, str) or kind2 != "bin":
                raise self.fail("bad flax array extension", pos)
            # a standard dtype stays a name (numpy makes it when the data is read)
            # (and a numpy scalar when listing: `HostScalar`)
            itemsize = ITEMSIZES.get(dname) if code != _EXT_SCALAR or in_listing() else None
            dtype: Any = dname
            if itemsize is None:
                dtype = _dtype(dname, self, pos)
                itemsize = dtype.itemsize
            start, nb = blob
            if math.prod(shape) > MAX_ELEMENTS:
                check_shape(shape, f"{self.path}: array at byte {pos}")
            if nb != math.prod(shape) * itemsize:
                raise self.fail(f"array payload of {nb} bytes does not match {dname}{shape}", pos)
            if code == _EXT_SCALAR:  # a numpy scalar, packed as a 0-d array
                if nb > MAX_SCALAR:  # read whole: refused before the read is issued
                    raise self.fail(f"a numpy scalar of {nb} bytes, more than {MAX_SCALAR}", pos)
                if not shape and isinstance(dtype, str):  # listing: no numpy
                    return HostScalar(dname, bytes(self.data[start : start + nb]))
                import numpy as np

                if isinstance(dtype, str):
                    dtype = _dtype(dname, self, pos)

                return np.frombuffer(bytes(self.data[start : start + nb]), dtype=dtype).reshape(
                    shape
                )[()]
            leaf = LazyArray(tuple(shape), dtype, self.path, start)
            return leaf if self.lazy else leaf.read().copy()
        if code == _EXT_COMPLEX:
            v, _ = sub.value(pos, 2)
            if isinstance(v, list) and len(v) == 2 and all(isinstance(x, int | float) for x in v):
                try:
                    return complex(v[0], v[1])
                except OverflowError:
                    raise self.fail("complex number out of range", pos) from None
            raise self.fail("bad complex extension", pos)
        raise self.fail(f"unknown msgpack extension type {code}", pos)

    def chunked(self, d: dict) -> Any:
        shape, chunks = d.get("shape"), d.get("chunks")
        if isinstance(shape, dict):  # flax stores tuples as {"0": ..., "1": ...}
            if len(shape) > MAX_NDIM:
                raise LoadError(f"{self.path}: chunked array has {len(shape)} dimensions")
            shape = [shape.get(str(i)) for i in range(len(shape))]
        if not isinstance(shape, list):
            raise LoadError(f"{self.path}: bad chunked array shape")
        shape = list(check_shape(shape, f"{self.path}: chunked array"))
        if not isinstance(chunks, dict) or not all(
            type(k) is str and k.isdigit() and len(k) < 20 for k in chunks
        ):
            raise LoadError(f"{self.path}: bad chunked array")
        parts = [chunks[k] for k in sorted(chunks, key=int)]
        if not parts or not all(isinstance(p, LazyArray) for p in parts):
            np = loaded_numpy()  # lazy=False: numpy arrays (numpy is imported)
            if np is not None and parts and all(isinstance(p, np.ndarray) for p in parts):
                return np.concatenate([p.reshape(-1) for p in parts]).reshape(shape)
            raise LoadError(f"{self.path}: bad chunked array")
        dtype = parts[0].dtype_arg
        spans = [(p.offset, p.nbytes) for p in parts]
        if sum(n for _, n in spans) != math.prod(shape) * parts[0].itemsize:
            raise LoadError(f"{self.path}: chunked array size does not match its shape {shape}")
        path = self.path
        return LazyArray(
            tuple(shape),
            dtype,
            path,
            spans[0][0],
            opener=lambda: _Spans(path, spans),
            seekable=False,
        )


class _Spans:
    """A read-only stream over several byte ranges of one file, in order."""

    def __init__(self, path: str, spans: list[tuple[int, int]]) -> None:
        self._fh: IO[bytes] = source_for(path).open()
        self._spans = list(spans)
        self._i = 0
        self._left = spans[0][1] if spans else 0
        if spans:
            self._fh.seek(spans[0][0])

    def read(self, n: int = -1) -> bytes:
        out = bytearray()
        while (n < 0 or len(out) < n) and self._i < len(self._spans):
            if self._left == 0:
                self._i += 1
                if self._i < len(self._spans):
                    self._fh.seek(self._spans[self._i][0])
                    self._left = self._spans[self._i][1]
                continue
            want = self._left if n < 0 else min(self._left, n - len(out))
            got = self._fh.read(want)
            if not got:
                break
            out += got
            self._left -= len(got)
        return bytes(out)

    def close(self) -> None:
        self._fh.close()

    def seek(self, offset: int, whence: int = 0, /) -> int:
        raise io.UnsupportedOperation("a one-way stream: read it from the start")

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a stream over a part of a file has no descriptor")

    def __enter__(self) -> _Spans:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_dtype_cache: dict[str, np.dtype] = {}


def _dtype(name: str, r: _Reader, pos: int) -> np.dtype:
    dt = _dtype_cache.get(name)
    if dt is None:
        dt = _dtype_cache[name] = _new_dtype(name, r, pos)
    return dt


def _new_dtype(name: str, r: _Reader, pos: int) -> np.dtype:
    import numpy as np

    if len(name) > 32:
        raise r.fail("bad dtype name", pos)
    try:
        dt = np.dtype(name)
    except Exception:  # TypeError, and SyntaxError / ValueError for odd strings
        import ml_dtypes

        t = getattr(ml_dtypes, name, None)
        if not isinstance(t, type):
            raise r.fail(f"unknown dtype {name!r}", pos) from None
        dt = np.dtype(t)
    if dt.hasobject or dt.fields is not None:
        raise r.fail(f"unsupported dtype {name!r}", pos)
    return check_dtype(dt, f"{r.path}: array at byte {pos}")


def _sniff(probe: Probe) -> bool:
    return looks_like_flax_msgpack(probe.head)


def read_msgpack(src: Source, lazy: bool = True) -> Any:
    """The tree of a flax msgpack file (`flax.serialization.to_bytes`)."""
    path = src.name
    if src.size == 0:
        raise LoadError(f"{path}: empty file")
    mm = src.buffer()
    try:
        r = _Reader(mm, path, lazy, len(mm))
        tree, _ = r.value(0)
    finally:
        mm.close()
    return tree


def _read_file(src: Source, opts: ReadOptions) -> Loaded:
    """`treetool.io.read` for flax msgpack files."""
    return Loaded(read_msgpack(src, opts.lazy), "msgpack")


FORMAT = Format("msgpack", sniff=_sniff, read=_read_file)
