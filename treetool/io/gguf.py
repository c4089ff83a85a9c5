"""GGUF files (llama.cpp, Ollama, LM Studio): the header only; every tensor stays in the file.

Layout (little-endian): magic `GGUF`, u32 version (2 or 3), u64 tensor count, u64 key/value
count; the key/values (a string key, a u32 value type, the value: numbers, bool, string = u64
length + bytes, array = u32 element type + u64 count + elements); the tensor infos (a string
name, u32 n_dims, n_dims u64 dims in ggml order, fastest first, u32 ggml type, u64 offset);
padding up to `general.alignment` (default 32); the tensor data, each tensor at its offset from
there. Read by treetool's own code: gguf-py is not imported.

Every count and length is checked against the bytes left in the file before anything is
allocated for it. Tensors of plain types become `LazyArray` leaves (shape in numpy order: the
dims reversed, as gguf-py does); block-quantized ones become `GGMLArray` leaves: their logical
shape, ggml type, bits per weight and bytes on disk, dequantized on read where treetool knows
the type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; values equal to `gguf.quants.dequantize`). Names
(`blk.0.attn_q.weight`) are the keys of a flat dict, as safetensors names are. A split set
(`NAME-00001-of-00003.gguf`...) is read as one tree from any of its files.

Example:
    >>> import struct, tempfile, os, numpy as np
    >>> def s(t): return struct.pack("<Q", len(t)) + t
    >>> kv = s(b"general.architecture") + struct.pack("<I", 8) + s(b"llama")
    >>> info = s(b"w") + struct.pack("<IQQIQ", 2, 3, 2, 0, 0)
    >>> head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + kv + info
    >>> data = head + b"\\0" * (-len(head) % 32) + np.arange(6, dtype="<f4").tobytes()
    >>> p = os.path.join(tempfile.mkdtemp(), "m.gguf")
    >>> with open(p, "wb") as fh:
    ...     _ = fh.write(data)
    >>> from treetool._source import source_for
    >>> loaded = FORMAT.read(source_for(p), ReadOptions())
    >>> loaded.tree["w"].shape, loaded.metadata["general.architecture"]
    ((2, 3), 'llama')
    >>> np.asarray(loaded.tree["w"])[1].tolist()
    [3.0, 4.0, 5.0]
"""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from treetool._errors import LoadError
from treetool._leaves._arrays import LazyArray
from treetool._source import Source, source_for
from treetool.io._formats import Format, Probe, ReadOptions
from treetool.io._keys import tree_from_keystrs
from treetool.io._loaded import Loaded
from treetool.io._safety._limits import Budget, check_shape

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FORMAT", "GGML_TYPES", "GGMLArray", "read_header"]

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
#: an array in the metadata longer than this is shown summarised (`Loaded.metadata`)
SHOWN_ARRAY = 64
#: deepest nesting of arrays in a metadata value
MAX_ARRAY_DEPTH = 8

#: ggml type id -> (name, elements per block, bytes per block, numpy dtype of a plain type)
GGML_TYPES: dict[int, tuple[str, int, int, str | None]] = {
    0: ("F32", 1, 4, "float32"),
    1: ("F16", 1, 2, "float16"),
    2: ("Q4_0", 32, 18, None),
    3: ("Q4_1", 32, 20, None),
    6: ("Q5_0", 32, 22, None),
    7: ("Q5_1", 32, 24, None),
    8: ("Q8_0", 32, 34, None),
    9: ("Q8_1", 32, 40, None),
    10: ("Q2_K", 256, 84, None),
    11: ("Q3_K", 256, 110, None),
    12: ("Q4_K", 256, 144, None),
    13: ("Q5_K", 256, 176, None),
    14: ("Q6_K", 256, 210, None),
    15: ("Q8_K", 256, 292, None),
    16: ("IQ2_XXS", 256, 66, None),
    17: ("IQ2_XS", 256, 74, None),
    18: ("IQ3_XXS", 256, 98, None),
    19: ("IQ1_S", 256, 50, None),
    20: ("IQ4_NL", 32, 18, None),
    21: ("IQ3_S", 256, 110, None),
    22: ("IQ2_S", 256, 82, None),
    23: ("IQ4_XS", 256, 136, None),
    24: ("I8", 1, 1, "int8"),
    25: ("I16", 1, 2, "int16"),
    26: ("I32", 1, 4, "int32"),
    27: ("I64", 1, 8, "int64"),
    28: ("F64", 1, 8, "float64"),
    29: ("IQ1_M", 256, 56, None),
    30: ("BF16", 1, 2, "bfloat16"),
    34: ("TQ1_0", 256, 54, None),
    35: ("TQ2_0", 256, 66, None),
    39: ("MXFP4", 32, 17, None),
    40: ("NVFP4", 64, 36, None),
    41: ("Q1_0", 128, 18, None),
}

# value type id -> (name, struct code of a fixed-size value, or "" for string/array)
_VALUE_TYPES: dict[int, tuple[str, str]] = {
    0: ("uint8", "B"),
    1: ("int8", "b"),
    2: ("uint16", "H"),
    3: ("int16", "h"),
    4: ("uint32", "I"),
    5: ("int32", "i"),
    6: ("float32", "f"),
    7: ("bool", "?"),
    8: ("string", ""),
    9: ("array", ""),
    10: ("uint64", "Q"),
    11: ("int64", "q"),
    12: ("float64", "d"),
}
_STRING, _ARRAY = 8, 9
#: the fewest bytes one array element of a type takes (string: its length; array: type+count)
_MIN_BYTES = {t: (struct.calcsize("<" + c) if c else (8 if t == _STRING else 12))
              for t, (_, c) in _VALUE_TYPES.items()}  # fmt: skip
#: the fewest bytes a tensor info takes (empty name, no dims)
_MIN_INFO = 8 + 4 + 4 + 8
#: the fewest bytes a key/value takes (empty key, a u8)
_MIN_KV = 8 + 4 + 1
_CHUNK = 1 << 20
#: the block-quantized types `GGMLArray` dequantizes
DEQUANTIZED = frozenset({"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"})
_U64 = struct.Struct("<Q")


class _Cursor:
    """Sequential reads of a `Source` in chunks; every read checked against the file's end."""

    def __init__(self, src: Source) -> None:
        self.src, self.size, self.name = src, src.size, src.name
        self.pos = 0
        self._buf = b""
        self._at = 0  # file offset of _buf[0]

    def left(self) -> int:
        return self.size - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n > self.size - self.pos:
            raise LoadError(
                f"{self.name}: truncated GGUF file: {what} needs {n} bytes at offset {self.pos}, "
                f"the file has {self.size - self.pos} left"
            )
        end = self.pos + n
        if end > self._at + len(self._buf):
            keep = self._buf[self.pos - self._at :]
            more = max(n - len(keep), _CHUNK)
            got = self.src.read(
                self._at + len(self._buf), min(more, self.size - self._at - len(self._buf))
            )
            self._buf, self._at = keep + got, self.pos
            if end > self._at + len(self._buf):
                raise LoadError(f"{self.name}: truncated GGUF file at offset {self.pos}")
        out = self._buf[self.pos - self._at : end - self._at]
        self.pos = end
        return out

    def unpack(self, code: str, what: str) -> Any:
        fmt = "<" + code
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def count(self, per_item: int, what: str) -> int:
        """A u64 count of items of at least `per_item` bytes each, checked against the bytes left."""
        n = self.unpack("Q", what)
        if n * per_item > self.left():
            raise LoadError(
                f"{self.name}: GGUF {what} claims {n} items of at least {per_item} bytes, "
                f"the file has {self.left()} bytes left"
            )
        return n

    def string(self, what: str) -> str:
        at = self.pos - self._at
        if at + 8 <= len(self._buf):  # the length is in the buffer: no checks of take()
            n = _U64.unpack_from(self._buf, at)[0]
            self.pos += 8
            if at + 8 + n <= len(self._buf):  # and the text too
                self.pos += n
                return self._buf[at + 8 : at + 8 + n].decode("utf-8", errors="replace")
        else:
            n = self.unpack("Q", what)
        if n > self.left():
            raise LoadError(
                f"{self.name}: GGUF {what} claims a string of {n} bytes, "
                f"the file has {self.left()} left"
            )
        return self.take(n, what).decode("utf-8", errors="replace")


def _value(cur: _Cursor, vtype: int, what: str, budget: Budget, depth: int = 0) -> Any:
    entry = _VALUE_TYPES.get(vtype)
    if entry is None:
        raise LoadError(f"{cur.name}: {what}: unknown GGUF value type {vtype}")
    code = entry[1]
    if code:
        return cur.unpack(code, what)
    if vtype == _STRING:
        return cur.string(what)
    if depth >= MAX_ARRAY_DEPTH:
        raise LoadError(f"{cur.name}: {what}: arrays nested more than {MAX_ARRAY_DEPTH} deep")
    etype = cur.unpack("I", what)
    if etype not in _VALUE_TYPES:
        raise LoadError(f"{cur.name}: {what}: unknown GGUF array element type {etype}")
    n = cur.count(_MIN_BYTES[etype], what)
    budget.take(n)
    ecode = _VALUE_TYPES[etype][1]
    if ecode:  # fixed-size elements: one unpack of the whole array
        raw = cur.take(n * struct.calcsize("<" + ecode), what)
        return list(struct.unpack(f"<{n}{ecode}", raw))
    if etype == _STRING:  # a vocabulary: one loop, no dispatch per string
        return [cur.string(what) for _ in range(n)]
    return [_value(cur, etype, what, budget, depth + 1) for _ in range(n)]


def read_header(src: Source) -> dict[str, Any]:
    """The parsed header of one GGUF file: `version`, `metadata` (every key/value, arrays
    whole), `tensors` (name -> (numpy shape, ggml type id, absolute offset, bytes)),
    `alignment`, `data_offset`."""
    cur = _Cursor(src)
    name = cur.name
    if cur.size < 4 or cur.take(4, "the magic") != MAGIC:
        raise LoadError(f"{name}: not a GGUF file (no GGUF magic)")
    version = cur.unpack("I", "the version")
    if version not in VERSIONS:
        raise LoadError(f"{name}: GGUF version {version} is not supported (only 2 and 3)")
    n_tensors = cur.unpack("Q", "the tensor count")
    n_kv = cur.unpack("Q", "the key/value count")
    if n_kv * _MIN_KV + n_tensors * _MIN_INFO > cur.left():
        raise LoadError(
            f"{name}: GGUF header claims {n_kv} key/values and {n_tensors} tensors, "
            f"more than its {cur.left()} bytes can hold"
        )
    budget = Budget(name, "metadata values", 1000 + cur.size)
    meta: dict[str, Any] = {}
    for i in range(n_kv):
        key = cur.string(f"key {i}")
        shown = key if len(key) <= 120 else key[:117] + "..."
        vtype = cur.unpack("I", f"key {shown!r}")
        meta[key] = _value(cur, vtype, f"key {shown!r}", budget)
    alignment = meta.get("general.alignment", DEFAULT_ALIGNMENT)
    if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1):
        raise LoadError(f"{name}: general.alignment {alignment!r:.40} is not a power of two")
    infos = []
    for i in range(n_tensors):
        tname = cur.string(f"tensor {i}'s name")
        shown = tname if len(tname) <= 120 else tname[:117] + "..."
        where = f"{name}: tensor {shown!r}"
        n_dims = cur.unpack("I", f"tensor {shown!r}")
        if n_dims * 8 > cur.left():
            raise LoadError(f"{where}: {n_dims} dimensions, more than the file holds")
        dims = list(struct.unpack(f"<{n_dims}Q", cur.take(8 * n_dims, f"tensor {shown!r}")))
        gtype = cur.unpack("I", f"tensor {shown!r}")
        offset = cur.unpack("Q", f"tensor {shown!r}")
        infos.append((tname, where, dims, gtype, offset))
    data_offset = cur.pos + (-cur.pos % alignment)
    tensors: dict[str, tuple[tuple[int, ...], int, int, int]] = {}
    for tname, where, dims, gtype, offset in infos:
        if tname in tensors:
            raise LoadError(f"{where}: the name is given twice")
        shape = check_shape(dims[::-1], where)
        entry = GGML_TYPES.get(gtype)
        if entry is None:
            raise LoadError(f"{where}: unknown ggml type {gtype}")
        tyname, block, tsize, _ = entry
        n = math.prod(shape)
        if shape and shape[-1] % block:
            raise LoadError(
                f"{where}: {tyname} needs rows of a multiple of {block}, got {shape[-1]}"
            )
        nbytes = n // block * tsize
        start = data_offset + offset
        if start + nbytes > cur.size:
            raise LoadError(f"{where}: data ends at byte {start + nbytes}, the file has {cur.size}")
        tensors[tname] = (shape, gtype, start, nbytes)
    return {
        "version": version,
        "metadata": meta,
        "tensors": tensors,
        "alignment": alignment,
        "data_offset": data_offset,
    }


class GGMLArray(LazyArray):
    """A block-quantized ggml tensor: its logical shape, ggml type and bytes in the file.

    `dtype` is float32 (what dequantizing gives); `nbytes` and `disk_nbytes` are the bytes on
    disk; `np.asarray` dequantizes (`DEQUANTIZED`), a row block at a time for `iter_chunks`.
    """

    __slots__ = ("block", "disk_nbytes", "ggml_type", "type_size")

    def __init__(
        self, shape: tuple[int, ...], ggml_type: int, file: str, offset: int, source: Any = None
    ) -> None:
        super().__init__(shape, "float32", file, offset, source=source)
        name, self.block, self.type_size, _ = GGML_TYPES[ggml_type]
        self.ggml_type = name
        self.disk_nbytes = math.prod(self.shape) // self.block * self.type_size

    @property
    def listed_as(self) -> tuple[str, str | None, str]:
        return ("lazy", "GGMLArray", "file")

    @property
    def nbytes(self) -> int:
        return self.disk_nbytes

    @property
    def bits_per_weight(self) -> float:
        """Bits on disk per logical element (Q8_0: 8.5, Q4_K: 4.5).

        Example:
            >>> GGMLArray((4, 256), 12, "m.gguf", 0).bits_per_weight
            4.5
        """
        return 8 * self.type_size / self.block

    def __repr__(self) -> str:
        dims = ",".join(map(str, self.shape))
        return f"GGMLArray({self.ggml_type}[{dims}], file={self.file!r}, offset={self.offset})"

    def where(self) -> dict[str, Any]:
        return {
            **super().where(),
            "ggml_type": self.ggml_type,
            "bits_per_weight": self.bits_per_weight,
        }

    def _dequantize(self, raw: bytes) -> np.ndarray:
        """Blocks of raw bytes to float32 values, as gguf-py's `dequantize_blocks` computes
        them (the same operations in the same order: equal bit for bit)."""
        import numpy as np

        blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, self.type_size)
        t, half = self.ggml_type, self.block // 2
        if t not in DEQUANTIZED:
            raise LoadError(
                f"{self.file}: dequantizing ggml type {t} is not supported yet "
                f"({self.disk_nbytes} bytes at offset {self.offset})"
            )
        d = blocks[:, :2].view("<f2").astype(np.float32)
        if t == "Q8_0":
            return (d * blocks[:, 2:].view(np.int8).astype(np.float32)).reshape(-1)
        m = blocks[:, 2:4].view("<f2").astype(np.float32)  # the min (Q4_1, Q5_1)
        start = {"Q4_0": 2, "Q4_1": 4, "Q5_0": 6, "Q5_1": 8}[t]
        nibbles = blocks[:, start:].reshape(-1, 1, half) >> np.array([0, 4], np.uint8).reshape(
            1, 2, 1
        )
        low = (nibbles & np.uint8(0x0F)).reshape(-1, self.block)
        if t == "Q4_0":
            out = d * (low.view(np.int8) - np.int8(8)).astype(np.float32)
        elif t == "Q4_1":
            out = (d * low.astype(np.float32)) + m
        else:
            qh = blocks[:, start - 4 : start].view("<u4").reshape(-1, 1) >> np.arange(
                32, dtype=np.uint32
            ).reshape(1, 32)
            high = (qh & np.uint32(0x01)).astype(np.uint8)
            q = low | (high << np.uint8(4))
            if t == "Q5_0":
                out = d * (q.astype(np.int8) - np.int8(16)).astype(np.float32)
            else:
                out = (d * q.astype(np.float32)) + m
        return out.reshape(-1)

    def iter_chunks(self, max_elems: int = 1 << 20) -> Iterator[np.ndarray]:
        """Dequantized elements in file order, whole blocks at a time."""
        total_blocks = self.size // self.block
        per = max(1, max_elems // self.block)
        with self._open() as fh:
            done = 0
            while done < total_blocks:
                n = min(per, total_blocks - done)
                yield self._dequantize(self._read(fh, done * self.type_size, n * self.type_size))
                done += n

    def read(self) -> np.ndarray:
        import numpy as np

        if self.ggml_type not in DEQUANTIZED:
            self._dequantize(b"")  # the one-line error
        parts = list(self.iter_chunks())
        flat = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        return flat.reshape(self.shape)

    def __getitem__(self, index: Any) -> np.ndarray:
        return self.read()[index]

    def corners(self, edge: int = 3) -> np.ndarray | None:
        if self.ndim > 4 or self.ggml_type not in DEQUANTIZED or self.size > 1 << 24:
            return None
        import numpy as np

        arr = self.read()
        for axis, n in enumerate(self.shape):
            if n > 2 * edge:
                arr = np.take(arr, [*range(edge), *range(n - edge, n)], axis=axis)
        return arr


def _shown(value: Any) -> Any:
    """A metadata value as `Loaded.metadata` shows it: a long array summarised."""
    if isinstance(value, list) and len(value) > SHOWN_ARRAY:
        kind = type(value[0]).__name__ if value else "?"
        head = ", ".join(repr(v)[:40] for v in value[:8])
        return f"[{len(value):,} {kind} values: {head}, ...]"
    return value


def _sniff(probe: Probe) -> bool:
    head = probe.head
    return len(head) >= 8 and head[:4] == MAGIC and struct.unpack("<I", head[4:8])[0] in VERSIONS


#: llama.cpp's split files: `NAME-00001-of-00003.gguf` (gguf-py's `SHARD_NAME_FORMAT`)
_SPLIT_NAME = re.compile(r"(.*)-(\d{5})-of-(\d{5})\.gguf")
#: the most files of one split model
MAX_SPLITS = 10_000


def _splits(src: Source, header: dict[str, Any]) -> list[tuple[Source, dict[str, Any]]]:
    """The file and its header, or every file of its split set (`split.count` > 1 and a
    name `NAME-0000i-of-0000N.gguf`), in order, each header checked to be that part."""
    meta = header["metadata"]
    count, no = meta.get("split.count"), meta.get("split.no")
    m = _SPLIT_NAME.fullmatch(os.path.basename(src.name))
    if src.remote or type(count) is not int or count <= 1 or m is None or type(no) is not int:
        return [(src, header)]
    if count > MAX_SPLITS or int(m.group(3)) != count or int(m.group(2)) != no + 1:
        raise LoadError(
            f"{src.name}: split.no {no} of split.count {count} does not match the file name"
        )
    folder = os.path.dirname(src.name)
    parts = []
    for i in range(count):
        if i == no:
            parts.append((src, header))
            continue
        name = os.path.join(folder, f"{m.group(1)}-{i + 1:05d}-of-{count:05d}.gguf")
        if not os.path.isfile(name):
            raise LoadError(
                f"{src.name}: part {i + 1} of {count} of the split set is missing: {name}"
            )
        part = source_for(name)
        h = read_header(part)
        if h["metadata"].get("split.no") != i or h["metadata"].get("split.count") != count:
            raise LoadError(f"{name}: its split.no/split.count do not say part {i + 1} of {count}")
        parts.append((part, h))
    return parts


def _read_file(src: Source, opts: ReadOptions) -> Loaded:
    """`treetool.io.read` for GGUF files (a split set read from any of its files)."""
    parts = _splits(src, read_header(src))
    header = parts[0][1]
    flat: dict[str, Any] = {}
    for part, h in parts:
        remote = part if part.remote else None
        for tname, (shape, gtype, start, _nbytes) in h["tensors"].items():
            if tname in flat:
                raise LoadError(f"{part.name}: tensor {tname[:120]!r} is also in another part")
            np_dtype = GGML_TYPES[gtype][3]
            if np_dtype is not None:
                flat[tname] = LazyArray(shape, np_dtype, part.name, start, source=remote)
            else:
                flat[tname] = GGMLArray(shape, gtype, part.name, start, source=remote)
    if not opts.lazy:
        flat = {
            k: (v.read().copy() if type(v) is LazyArray or v.ggml_type in DEQUANTIZED else v)
            for k, v in flat.items()
        }
    meta = {k: _shown(v) for k, v in header["metadata"].items()}
    facts = {
        "gguf": {
            "version": header["version"],
            "tensors": len(flat),
            "files": len(parts),
            "alignment": header["alignment"],
            "data_offset": header["data_offset"],
        }
    }
    return Loaded(tree_from_keystrs(flat), "gguf", metadata=meta, facts=facts)


FORMAT = Format("gguf", sniff=_sniff, read=_read_file)
