"""The zarr metadata of every array in an orbax OCDBT database, read through tensorstore.

`decoded_metadata` reads them with treetool's own decoder (`_ocdbt_decode`: no tensorstore
import, the few nodes read as byte ranges); when it does not apply (no zstd decoder
installed), `_OcdbtWalk` walks the B+tree of the database's latest version with tensorstore's own dump
(one call per node, node reads in tensorstore's threads); `_ocdbt_read_metadata` is the
key-by-key fallback. Both return `{array name: bytes of its .zarray / zarr.json}`; the item's
directory may be local or in object storage (its kvstore from `_orbax_fs.kvstore`).
"""

from __future__ import annotations

from typing import Any

from treetool._errors import LoadError
from treetool.io._orbax import _fs as fs
from treetool.io._orbax._array import _tensorstore, _ts_error
from treetool.io._orbax._data import inside

__all__ = ["_ZARR_META", "_OcdbtWalk", "_ocdbt_read_metadata", "decoded_metadata"]


_ZARR_META = (b"/.zarray", b"/zarr.json")


def decoded_metadata(item: str) -> dict[str, bytes] | None:
    """array name -> the bytes of its zarr metadata, decoded without tensorstore; None when
    the decoder does not apply (see `_ocdbt_decode.zarr_metadata`)."""
    from treetool.io._orbax._ocdbt_decode import zarr_metadata

    def read_many(ranges: list[tuple[str, int, int]]) -> list[bytes]:
        full = [(fs.join(item, rel), offset, n) for rel, offset, n in ranges]
        for path in {path for path, _, _ in full}:
            if not inside(item, path):  # a link out of the checkpoint
                raise LoadError(f"{path}: a link to outside the checkpoint {item}")
        return fs.read_ranges(full)

    def read_range(rel: str, offset: int, n: int) -> bytes:
        return read_many([(rel, offset, n)])[0]

    size = fs.getsize(fs.join(item, "manifest.ocdbt"))
    return zarr_metadata(item, read_range, size, read_many)


class _OcdbtWalk:
    """A walk of the latest version of an OCDBT database's B+tree, through tensorstore's dump.

    `start` reads the manifest and asks for the root node; tensorstore decodes nodes in its
    own threads, so the caller can do other work before `metadata` collects the result.
    Child nodes are all asked for as soon as their parent is read.
    """

    def __init__(self, ts: Any, base: Any, root: Any, walkable: bool, where: str) -> None:
        self._ts, self._base, self._root, self._walkable = ts, base, root, walkable
        self._where = where

    @classmethod
    def start(cls, item: str) -> _OcdbtWalk:
        ts = _tensorstore(item)

        try:
            base = fs.result(ts.KvStore.open(fs.kvstore(item)), item)
            manifest = fs.result(ts.ocdbt.dump(base), item)
        except (ValueError, RuntimeError) as e:
            raise LoadError(f"{item}: cannot read the OCDBT manifest: {_ts_error(e)}") from None
        versions = manifest.get("versions") or []
        if not versions or manifest.get("version_tree_nodes"):
            # older versions live in version-tree nodes: tensorstore's reads resolve them
            return cls(ts, base, None, False, item)
        root = max(versions, key=lambda v: v["generation_number"])["root"]
        if "location" not in root:
            return cls(ts, base, None, True, item)  # an empty database
        return cls(ts, base, (ts.ocdbt.dump(base, root["location"]), b""), True, item)

    def metadata(self) -> dict[str, bytes] | None:
        """array name -> the bytes of its zarr metadata; None if the tree cannot be walked."""
        if not self._walkable:
            return None
        ts, base = self._ts, self._base
        found: dict[str, bytes] = {}
        indirect: list[tuple[str, Any]] = []
        stack = [self._root] if self._root is not None else []
        while stack:
            pending, prefix = stack.pop()
            node = fs.result(pending, self._where)
            if node["height"] > 0:  # keys below share the prefix plus the entry's common prefix
                for e in reversed(node["entries"]):
                    below = prefix + e.get("subtree_common_prefix", b"")
                    stack.append((ts.ocdbt.dump(base, e["location"]), below))
                continue
            # the zarr metadata entries (the others are chunks of data)
            hits = [
                (k, e) for e in node["entries"] if (k := prefix + e["key"]).endswith(_ZARR_META)
            ]
            for key, e in hits:
                name = key[: key.rindex(b"/")].decode()
                if "inline_value" in e:
                    found[name] = e["inline_value"]
                else:
                    indirect.append((name, ts.ocdbt.dump(base, e["indirect_value"])))
        for name, pending in indirect:
            found[name] = fs.result(pending, self._where)
        return found


def _ocdbt_read_metadata(ts: Any, item: str) -> dict[str, bytes]:
    """array name -> metadata bytes, one tensorstore read per key."""
    ctx = ts.Context({"cache_pool": {"total_bytes_limit": 256 << 20}})
    spec = {"driver": "ocdbt", "base": fs.kvstore(item)}
    kv = fs.result(ts.KvStore.open(spec, context=ctx), item)
    keys = [k for k in fs.result(kv.list(), item) if k.endswith(_ZARR_META)]
    futures = [(k, kv.read(k)) for k in keys]
    return {k[: k.rindex(b"/")].decode(): fs.result(fut, item).value for k, fut in futures}
