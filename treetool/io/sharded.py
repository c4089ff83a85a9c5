"""Sharded checkpoints read as one tree: `*.safetensors.index.json`, `flax_model.msgpack.index.json`,
`pytorch_model.bin.index.json` (torch `.bin` shards, read without torch).

An index is a JSON object whose `weight_map` names, for every tensor, the shard file (next to
the index) that holds it. treetool reads the index, then the header of each shard (one ranged
read per safetensors shard remotely, shards in parallel), and returns one tree whose leaves are
`LazyArray`s pointing into their shards (`leaf.file` is the shard, `leaf.offset` the byte where
its data starts). safetensors names rebuild the tree as a single safetensors file would; flax
msgpack shards hold `a/b/c` keys, which become nested dicts.

Example:
    >>> import json, os, tempfile, numpy as np, treetool as tt
    >>> d = tempfile.mkdtemp()
    >>> tt.save({"a": np.zeros(2, np.float32)}, os.path.join(d, "m-1.safetensors"))
    >>> tt.save({"b": np.ones(3, np.float32)}, os.path.join(d, "m-2.safetensors"))
    >>> index = {"metadata": {}, "weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors"}}
    >>> with open(os.path.join(d, "m.safetensors.index.json"), "w") as fh:
    ...     json.dump(index, fh)
    >>> tree = tt.load(os.path.join(d, "m.safetensors.index.json"))
    >>> tree["b"].shape, os.path.basename(tree["b"].file)
    ((3,), 'm-2.safetensors')
"""

from __future__ import annotations

import json
import threading
from typing import Any

from treetool._errors import LoadError
from treetool._source import Source
from treetool.io._detect import detect
from treetool.io._formats import Format, Probe, ReadOptions
from treetool.io._keys import tree_from_keystrs
from treetool.io._loaded import Loaded
from treetool.io._safety._limits import check_json_text

__all__ = ["FORMAT", "looks_like_index", "read_index"]

_MAX_INDEX = 64 << 20
#: the deepest JSON an index may hold (its weight_map is at depth 2; metadata a little deeper)
_MAX_INDEX_DEPTH = 32
#: the most tensors one index may name
MAX_INDEX_ENTRIES = 1_000_000
#: the most shard files one index may name (each costs a request remotely)
MAX_SHARDS = 10_000


def looks_like_index(head: bytes) -> bool:
    """A JSON object that starts like a sharded-checkpoint index (`metadata`, `weight_map`)."""
    text = head.lstrip()
    return text[:1] == b"{" and (b'"weight_map"' in text or b'"metadata"' in text)


def read_index(src: Source) -> dict[str, str]:
    """`{tensor name: shard file name}` from an index, validated (names stay next to it)."""
    size = src.size
    if size > _MAX_INDEX:
        raise LoadError(f"{src.name}: index of {size} bytes is larger than {_MAX_INDEX}")
    raw = src.read(0, size)
    check_json_text(raw, f"{src.name}: sharded index", max_depth=_MAX_INDEX_DEPTH)
    try:
        index = json.loads(raw)
    except (ValueError, RecursionError):
        raise LoadError(f"{src.name}: sharded index is not valid JSON") from None
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
        raise LoadError(f"{src.name}: sharded index has no weight_map object")
    entries = len(index["weight_map"])
    if entries > MAX_INDEX_ENTRIES:
        raise LoadError(
            f"{src.name}: sharded index names {entries} tensors, more than {MAX_INDEX_ENTRIES}"
        )
    shards = len(set(map(str, index["weight_map"].values())))
    if shards > MAX_SHARDS:
        raise LoadError(f"{src.name}: sharded index names {shards} shards, more than {MAX_SHARDS}")
    out: dict[str, str] = {}
    for name, shard in index["weight_map"].items():
        if not isinstance(shard, str) or not _relative_name(shard):
            raise LoadError(
                f"{src.name}: weight_map[{name!r:.200}]: expected a shard file name "
                f"next to the index (a relative path inside its folder), found "
                f"{shard!r:.200}"
            )
        out[name] = shard
    return out


def _relative_name(name: str) -> bool:
    """Whether `name` is a relative path inside a folder: segments split by `/`, none empty,
    `.` or `..`; no scheme, `//`, absolute path, backslash, colon or control character.

    Example:
        >>> [_relative_name(n) for n in ("m-1.safetensors", "sub/m-1.safetensors")]
        [True, True]
        >>> [_relative_name(n) for n in ("../x", "/etc/passwd", "//h/x", "http://h/x", "a//b")]
        [False, False, False, False, False]
        >>> [_relative_name(n) for n in ("%2e%2e/x", "a%2f..%2fb", "%252e%252e/x", "m%201.bin")]
        [False, False, False, True]

    A name is checked as written and percent-decoded (again while that changes it, at most
    4 times): a server that decodes paths must not read `%2e%2e/` as `../`.
    """
    for _ in range(5):
        if not 0 < len(name) <= 1024 or not name.isprintable() or any(c in name for c in "\\:"):
            return False
        if not all(0 < len(part) <= 255 and part not in (".", "..") for part in name.split("/")):
            return False
        if "%" not in name:
            return True
        import urllib.parse

        decoded = urllib.parse.unquote(name)
        if decoded == name:
            return True
        name = decoded
    return False


def _check_inside(index: Source, shard: Source, name: str) -> None:
    """Refuse a shard that `join` did not put inside the index's folder on the index's own
    store (same scheme, host and port): a file never makes treetool go elsewhere."""
    if index.remote != shard.remote:
        ok = False
    elif index.remote:
        import urllib.parse

        a, b = urllib.parse.urlsplit(index.name), urllib.parse.urlsplit(shard.name)
        folder = a.path.rsplit("/", 1)[0] + "/" if not a.path.endswith("/") else a.path
        ok = (a.scheme, a.netloc) == (b.scheme, b.netloc) and b.path == folder + name
    else:
        import os

        folder = os.path.dirname(os.path.abspath(index.name))
        ok = os.path.abspath(shard.name) == os.path.join(folder, *name.split("/"))
    if not ok:
        raise LoadError(
            f"{index.name}: shard {name!r:.200} is not a file inside the index's folder"
        )


def _shard_leaves(src: Source, lazy: bool) -> tuple[str, dict[str, Any]]:
    """(kind, `{name: leaf}`) of one shard, by its content."""
    fmt = detect(src.name)
    if fmt == "safetensors":
        from treetool.io.safetensors import read_flat

        return fmt, read_flat(src, lazy)
    if fmt == "msgpack":
        from treetool.io.msgpack import read_msgpack

        tree = read_msgpack(src, lazy)
        flat: dict[str, Any] = {}
        _flatten(tree, "", flat)
        return fmt, flat
    if fmt == "torch":  # a `pytorch_model-0000N-of-0000M.bin` shard: its state_dict
        from treetool.io.torch import read_flat as read_torch

        return fmt, read_torch(src, lazy)
    raise LoadError(f"{src.name}: a shard must be safetensors, flax msgpack or torch, found {fmt}")


def _flatten(tree: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(tree, dict) and tree:
        for k, v in tree.items():
            _flatten(v, f"{prefix}/{k}" if prefix else str(k), out)
    else:
        out[prefix] = tree


def _sniff(probe: Probe) -> bool:
    return looks_like_index(probe.head)


def _read(src: Source, opts: ReadOptions) -> Loaded:
    """`treetool.io.read` for sharded indexes: one tree, leaves pointing into their shards."""
    path, lazy, format = src.name, opts.lazy, "sharded"
    weight_map = read_index(src)
    shards = sorted(set(weight_map.values()))
    if src.remote and hasattr(src, "list_parent"):
        src.list_parent()  # one listing gives every shard's size (no stat per shard)
    results = _map(lambda s: _read_shard(src, s, lazy), shards, parallel=src.remote)
    by_shard = dict(zip(shards, results))
    kinds = {kind for kind, _ in results}
    if len(kinds) > 1:
        raise LoadError(f"{path}: shards of different formats ({', '.join(sorted(kinds))})")
    flat: dict[str, Any] = {}
    for name, shard in weight_map.items():
        leaves = by_shard[shard][1]
        if name not in leaves:
            raise LoadError(
                f"{path}: {name}: the index puts it in {shard}, which has no such tensor"
            )
        flat[name] = leaves[name]
    if kinds == {"msgpack"}:
        return Loaded(_nest(flat, path), format)
    return Loaded(tree_from_keystrs(flat), format)


FORMAT = Format("sharded", sniff=_sniff, read=_read)


def _read_shard(index: Source, shard: str, lazy: bool) -> tuple[str, dict[str, Any]]:
    src = index.join(shard)
    _check_inside(index, src, shard)
    try:
        return _shard_leaves(src, lazy)
    except LoadError as e:
        msg = str(e)
        if msg.startswith(src.name):
            msg = msg[len(src.name) :].lstrip(": ")
        raise LoadError(f"{index.name}: shard {shard}: {msg}") from None


def _map(fn: Any, items: list[str], parallel: bool) -> list[Any]:
    if not parallel or len(items) < 2:
        return [fn(x) for x in items]
    import contextvars

    ctx = contextvars.copy_context()  # the read's shared sources, in every worker

    def run(x: str) -> Any:
        return ctx.copy().run(fn, x)

    # every shard header at once: one round trip for a 16-shard set, not two; on the shard
    # pool, whose threads start without a wait (16 `Thread.start`s of a `ThreadPoolExecutor`
    # cost ~1 ms each on a busy machine, before the last shard's request is sent)
    return _shard_pool().map(run, items)  # (every shard's read ended before a failure is raised)


_shards: Any = None
_shards_lock = threading.Lock()


def _shard_pool() -> Any:
    """The threads that read shard headers (16 at most), made on first use."""
    global _shards
    with _shards_lock:
        if _shards is None:
            from treetool.io._sources._pool import Pool

            _shards = Pool(16)
        return _shards


def _nest(flat: dict[str, Any], path: str) -> dict[str, Any]:
    """`{"a/b/c": leaf}` -> nested dicts (flax's `unflatten_dict(sep="/")`)."""
    root: dict[str, Any] = {}
    for name, leaf in flat.items():
        node = root
        parts = name.split("/")
        for part in parts[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise LoadError(f"{path}: {name}: {part} is both a leaf and a subtree")
            node = nxt
        if parts[-1] in node:
            raise LoadError(f"{path}: {name}: named twice")
        node[parts[-1]] = leaf
    return root
