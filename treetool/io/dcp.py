"""PyTorch Distributed Checkpoints (`torch.distributed.checkpoint`): a directory of a
`.metadata` pickle and `__R_I.distcp` files, read without torch.

`.metadata` is a pickle of torch's `Metadata`: `state_dict_metadata` (per name a
`TensorStorageMetadata` with its `TensorProperties` (dtype...), `size` and `chunks`
(`ChunkStorageMetadata(offsets, sizes)`), or a `BytesStorageMetadata`), `storage_data`
(`MetadataIndex(fqn, offset)` -> `_StorageInfo(relative_path, offset, length)`) and
`planner_data` (name -> its path in the state dict). It is read by treetool's safe pickle
machine: torch's classes are never imported, they come out as inert `Opaque` records whose
fields are read here. Each chunk's bytes in a `.distcp` file are a `torch.save` blob (a zip),
read by treetool's torch reader when the tensor is read.

Each tensor is one `DCPTensor` leaf: shape and dtype from the metadata, its chunks checked
against the shape (inside it, no overlaps, no gaps) and their byte ranges against the files;
a tensor split in several chunks (FSDP2/DTensor shards) is assembled on read. Non-tensor items
(`BytesStorageMetadata`: a step count, dataloader state) are read by the safe torch reader.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from treetool._errors import LoadError
from treetool._leaves._arrays import LazyArray
from treetool._source import Source, source_for
from treetool.io._formats import Format, Probe, ReadOptions
from treetool.io._loaded import Loaded
from treetool.io._opaque import GlobalRef, Opaque
from treetool.io._safety._limits import check_shape

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FORMAT", "DCPTensor"]

METADATA = ".metadata"
_DCP = "torch.distributed.checkpoint.metadata."
#: torch dtype name -> numpy (ml_dtypes) dtype name
_DTYPES = {
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "long": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "bool": "bool",
    "complex64": "complex64",
    "complex128": "complex128",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
}
#: the most chunks one tensor may have (the overlap check compares pairs)
MAX_CHUNKS = 4096


class _Window(Source):
    """Bytes `[base, base + length)` of another `Source`, as a `Source` of their own."""

    remote = True  # readers keep this source in their leaves (no path of its own)

    def __init__(self, src: Source, base: int, length: int) -> None:
        self.name, self._src, self._base, self._length = src.name, src, base, length

    @property
    def size(self) -> int:
        return self._length

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or offset + n > self._length:
            raise LoadError(f"{self.name}: read past a chunk's end (bytes {offset}-{offset + n})")
        return self._src.read(self._base + offset, n)

    def open(self) -> Any:
        from treetool.io._torch._record_io import _Window as Shifted

        return _Bounded(Shifted(self._src.open(), self._base), self._length)


class _Bounded:
    """A file object that reads nothing past `end` (a chunk's end)."""

    def __init__(self, fh: Any, end: int) -> None:
        self._fh, self._end, self.limit = fh, end, end

    def seek(self, offset: int, whence: int = 0, /) -> int:
        return int(self._fh.seek(offset, whence))

    def tell(self) -> int:
        return int(self._fh.tell())

    def read(self, n: int = -1) -> bytes:
        left = max(0, self._end - self.tell())
        return self._fh.read(left if n is None or n < 0 else min(n, left))

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> _Bounded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Chunk:
    __slots__ = ("length", "offset", "offsets", "sizes", "src")

    def __init__(
        self,
        offsets: tuple[int, ...],
        sizes: tuple[int, ...],
        src: Source,
        offset: int,
        length: int,
    ) -> None:
        self.offsets: tuple[int, ...] = offsets
        self.sizes: tuple[int, ...] = sizes
        self.src = src
        self.offset = offset
        self.length = length

    def array(self, dtype: str, where: str) -> Any:
        """The chunk's values (a torch.save blob of one tensor), read now."""
        import numpy as np

        from treetool.io._torch._archive import read_archive

        tree = read_archive(_Window(self.src, self.offset, self.length), True).tree
        if not isinstance(tree, LazyArray):
            raise LoadError(f"{where}: a chunk's bytes do not hold one tensor")
        arr = np.asarray(tree)
        if arr.shape != self.sizes or arr.dtype.name != dtype:
            raise LoadError(
                f"{where}: a chunk holds {arr.dtype.name}{list(arr.shape)}, the metadata says "
                f"{dtype}{list(self.sizes)}"
            )
        return arr


class DCPTensor(LazyArray):
    """One tensor of a distributed checkpoint: shape and dtype from `.metadata`, its values
    assembled from its chunks (each a `torch.save` blob in a `.distcp` file) when read.

    `chunks` lists `(offsets, sizes, file, byte offset, byte length)` of each chunk.
    """

    __slots__ = ("_chunks", "_where")

    def __init__(
        self, shape: tuple[int, ...], dtype: str, chunks: list[_Chunk], where: str
    ) -> None:
        first = chunks[0] if chunks else None
        super().__init__(
            shape, dtype, first.src.name if first else "", first.offset if first else 0
        )
        self._chunks, self._where = chunks, where

    @property
    def listed_as(self) -> tuple[str, str | None, str]:
        return ("lazy", "DCPTensor", "file")

    @property
    def chunks(self) -> list[tuple[tuple[int, ...], tuple[int, ...], str, int, int]]:
        return [(c.offsets, c.sizes, c.src.name, c.offset, c.length) for c in self._chunks]

    def where(self) -> dict[str, Any]:
        return {**super().where(), "chunks": len(self._chunks)}

    def __repr__(self) -> str:
        dims = ",".join(map(str, self.shape))
        return (
            f"DCPTensor({self.dtype_name}[{dims}], chunks={len(self._chunks)}, file={self.file!r})"
        )

    def read(self) -> np.ndarray:
        import numpy as np

        if len(self._chunks) == 1 and self._chunks[0].sizes == self.shape:
            return self._chunks[0].array(self._dtname, self._where)
        out = np.empty(self.shape, dtype=self.dtype)
        for c in self._chunks:
            index = tuple(slice(o, o + s) for o, s in zip(c.offsets, c.sizes))
            out[index] = c.array(self._dtname, self._where)
        return out

    def iter_chunks(self, max_elems: int = 1 << 20) -> Iterator[np.ndarray]:
        flat = self.read().reshape(-1)
        for i in range(0, flat.size, max_elems):
            yield flat[i : i + max_elems]

    def __getitem__(self, index: Any) -> np.ndarray:
        return self.read()[index]

    def corners(self, edge: int = 3) -> np.ndarray | None:
        if self.ndim > 4 or self.size > 1 << 24:
            return None
        import numpy as np

        arr = self.read()
        for axis, n in enumerate(self.shape):
            if n > 2 * edge:
                arr = np.take(arr, [*range(edge), *range(n - edge, n)], axis=axis)
        return arr


# --- reading the inert records of `.metadata` -----------------------------------------------


def _state(x: Any, cls: str, where: str) -> Any:
    if not (isinstance(x, Opaque) and x.class_path == cls):
        got = x.class_path if isinstance(x, Opaque) else type(x).__name__
        raise LoadError(f"{where}: expected a {cls.rsplit('.', 1)[-1]}, found {got[:80]}")
    return x.state


def _fields(x: Any, cls: str, where: str) -> dict[str, Any]:
    state = _state(x, cls, where)
    if not isinstance(state, dict):
        raise LoadError(f"{where}: a {cls.rsplit('.', 1)[-1]} without fields")
    return state


def _size(x: Any, where: str) -> tuple[int, ...]:
    """A `torch.Size((...))` (or a plain tuple/list of ints)."""
    if isinstance(x, Opaque) and x.class_path == "torch.Size" and len(x.args) == 1:
        x = x.args[0]
    if type(x) not in (tuple, list):
        raise LoadError(f"{where}: a size is not a torch.Size of ints")
    return check_shape(list(x), where)


def _dtype(props: Any, where: str) -> str:
    state = _state(props, _DCP + "TensorProperties", where)
    dt = state[0] if isinstance(state, tuple) and state else None
    if isinstance(state, dict):
        dt = state.get("dtype")
    if not (isinstance(dt, GlobalRef) and dt.module == "torch"):
        raise LoadError(f"{where}: TensorProperties without a torch dtype")
    name = _DTYPES.get(dt.name)
    if name is None:
        raise LoadError(f"{where}: unsupported dtype torch.{dt.name[:40]}")
    return name


def _check_chunks(chunks: list[_Chunk], shape: tuple[int, ...], where: str) -> None:
    """Each chunk inside the shape, no two overlapping, together covering it."""
    if len(chunks) > MAX_CHUNKS:
        raise LoadError(f"{where}: {len(chunks)} chunks, more than {MAX_CHUNKS}")
    total = 0
    for c in chunks:
        if len(c.offsets) != len(shape) or len(c.sizes) != len(shape):
            raise LoadError(
                f"{where}: a chunk of {len(c.sizes)} dimensions for a {len(shape)}-d tensor"
            )
        if any(o + s > d for o, s, d in zip(c.offsets, c.sizes, shape)):
            raise LoadError(
                f"{where}: chunk at {list(c.offsets)} of size {list(c.sizes)} lies outside "
                f"the shape {list(shape)}"
            )
        total += math.prod(c.sizes)
    # sorted by their first offset, a chunk can only overlap the ones that start before it
    # ends along that axis: a sweep, near-linear for the grids sharding makes
    spans = sorted((c for c in chunks if math.prod(c.sizes)), key=lambda c: c.offsets)
    for i, a in enumerate(spans):
        for b in spans[i + 1 :]:
            if a.offsets and b.offsets[0] >= a.offsets[0] + a.sizes[0]:
                break
            if all(
                max(ao, bo) < min(ao + asz, bo + bsz)
                for ao, asz, bo, bsz in zip(a.offsets, a.sizes, b.offsets, b.sizes)
            ):
                raise LoadError(
                    f"{where}: chunks at {list(a.offsets)} and {list(b.offsets)} overlap"
                )
    if total != math.prod(shape):
        raise LoadError(
            f"{where}: the chunks cover {total} of the {math.prod(shape)} elements (a gap)"
        )


def _sniff(probe: Probe) -> bool:
    if probe.remote or not probe.is_dir:
        return False
    meta = os.path.join(probe.path, METADATA)
    if not os.path.isfile(meta):
        return False
    with open(meta, "rb") as fh:
        return fh.read(1) == b"\x80"


def _read(src: Source, opts: ReadOptions) -> Loaded:
    """`treetool.io.read` for a distributed checkpoint's directory."""
    from treetool.io.pickle import read_pickle

    path = src.name
    if not os.path.isdir(path):
        raise LoadError(f"{path}: a distributed checkpoint is a directory")
    meta_path = os.path.join(path, METADATA)
    if not os.path.isfile(meta_path):
        raise LoadError(f"{path}: no {METADATA} file (not a distributed checkpoint)")
    where = meta_path
    meta = _fields(read_pickle(meta_path).tree, _DCP + "Metadata", where)
    sdm, storage = meta.get("state_dict_metadata"), meta.get("storage_data")
    if not isinstance(sdm, dict) or not isinstance(storage, dict):
        raise LoadError(f"{where}: no state_dict_metadata/storage_data dicts")
    files: dict[str, Source] = {}

    def file(rel: Any, at: str) -> Source:
        if type(rel) is not str or os.path.basename(rel) != rel or rel in ("", ".", ".."):
            raise LoadError(f"{at}: a storage file name {rel!r:.80} that is not a plain name")
        if rel not in files:
            full = os.path.join(path, rel)
            if not os.path.isfile(full):
                raise LoadError(f"{at}: its storage file {rel!r} does not exist")
            files[rel] = source_for(full)
        return files[rel]

    # (name, chunk offsets or None for bytes) -> (file, offset, length)
    located: dict[tuple[str, tuple[int, ...] | None], tuple[Source, int, int]] = {}
    for key, info in storage.items():
        k = _fields(key, _DCP + "MetadataIndex", where)
        fqn = k.get("fqn")
        if type(fqn) is not str:
            raise LoadError(f"{where}: a MetadataIndex without a name")
        at = f"{where}: {fqn[:120]!r}"
        off = k.get("offset")
        chunk_at = None if off is None else _size(off, at)
        v = _fields(info, "torch.distributed.checkpoint.filesystem._StorageInfo", at)
        rel, start, length = v.get("relative_path"), v.get("offset"), v.get("length")
        f = file(rel, at)
        if type(start) is not int or type(length) is not int or start < 0 or length < 0:
            raise LoadError(f"{at}: a storage range that is not two non-negative ints")
        if start + length > f.size:
            raise LoadError(
                f"{at}: its bytes {start}-{start + length} lie past the end of {rel!r} "
                f"({f.size} bytes)"
            )
        located[(fqn, chunk_at)] = (f, start, length)
    flat: dict[str, Any] = {}
    n_chunks = n_bytes = 0
    for fqn, entry in sdm.items():
        if type(fqn) is not str:
            raise LoadError(f"{where}: a state_dict name that is not a string")
        at = f"{path}: {fqn[:120]!r}"
        if isinstance(entry, Opaque) and entry.class_path == _DCP + "BytesStorageMetadata":
            loc = located.get((fqn, None))
            if loc is None:
                raise LoadError(f"{at}: no storage for this item")
            flat[fqn] = _bytes_item(*loc, at)
            n_bytes += 1
            continue
        t = _fields(entry, _DCP + "TensorStorageMetadata", at)
        shape = _size(t.get("size"), at)
        dtype = _dtype(t.get("properties"), at)
        raw_chunks = t.get("chunks")
        if type(raw_chunks) is not list:
            raise LoadError(f"{at}: chunks is not a list")
        chunks = []
        for c in raw_chunks:
            cf = _fields(c, _DCP + "ChunkStorageMetadata", at)
            offsets, sizes = _size(cf.get("offsets"), at), _size(cf.get("sizes"), at)
            loc = located.get((fqn, offsets))
            if loc is None:
                raise LoadError(f"{at}: no storage for its chunk at {list(offsets)}")
            chunks.append(_Chunk(offsets, sizes, *loc))
        _check_chunks(chunks, shape, at)
        n_chunks += len(chunks)
        flat[fqn] = DCPTensor(shape, dtype, chunks, at)
    if not opts.lazy:
        flat = {k: (v.read() if isinstance(v, DCPTensor) else v) for k, v in flat.items()}
    tree = _nest(flat, meta.get("planner_data"))
    facts = {
        "dcp": {
            "version": meta.get("version") if type(meta.get("version")) is str else None,
            "files": sorted(files),
            "tensors": len(flat) - n_bytes,
            "chunks": n_chunks,
            "items": n_bytes,
        }
    }
    return Loaded(tree, "dcp", facts=facts)


def _bytes_item(src: Source, start: int, length: int, where: str) -> Any:
    """A non-tensor item: a `torch.save` blob read by the safe torch reader."""
    from treetool.io._torch._archive import read_archive

    return read_archive(_Window(src, start, length), True).tree


def _nest(flat: dict[str, Any], planner: Any) -> Any:
    """The state dict's nesting from `planner_data` (name -> its keys), when every entry is a
    tuple of string keys that nest without clashes; otherwise the flat dict of names.

    Example:
        >>> _nest({"a.x": 1, "b": 2}, {"a.x": ("a", "x"), "b": ("b",)})
        {'a': {'x': 1}, 'b': 2}
        >>> _nest({"a": 1, "a.x": 2}, {"a": ("a",), "a.x": ("a", "x")})
        {'a': 1, 'a.x': 2}
    """
    if not isinstance(planner, dict) or set(planner) != set(flat):
        return dict(flat)
    root: dict[str, Any] = {}
    for name, leaf in flat.items():
        keys = planner[name]
        if type(keys) is not tuple or not keys or not all(type(k) is str for k in keys):
            return dict(flat)
        node = root
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if type(node) is not dict:
                return dict(flat)
        if keys[-1] in node:
            return dict(flat)
        node[keys[-1]] = leaf
    return root


FORMAT = Format("dcp", sniff=_sniff, read=_read, expects=METADATA)
