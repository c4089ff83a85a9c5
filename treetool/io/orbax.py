"""orbax checkpoint directories, from their metadata files only (no array data is read).

- the tree and the shapes come from the item's `_METADATA` (`tree_metadata`: key path, value
  type and write shape of every leaf);
- the dtypes from each array's zarr metadata (`.zarray` / `zarr.json`): plain files, or entries
  of the OCDBT database, read in one batch through tensorstore's kvstore (not through orbax,
  which opens every array: minutes for 100,000 arrays);
- the shardings from `_sharding`.

A directory written by `CheckpointManager` loads its latest step (`run@1200` or `step=` picks
another); a step directory with several items loads `{item: tree}`, JSON items (`JsonSave`) as
their small trees; a single item named `default` loads as its tree. Leaves are
`OrbaxArray` (a `LazyArray` that reads through tensorstore and carries `.sharding`).
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import re
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from .._arrays import LazyArray
from .._errors import LoadError
from ._opaque import GlobalRef

__all__ = ["OrbaxArray", "is_orbax_dir", "read", "run_steps"]

_ARRAY_TYPES = frozenset({"jax.Array", "np.ndarray", "scalar"})


class OrbaxArray(LazyArray):
    """An array of an orbax checkpoint: shape and dtype from metadata, data read on demand.

    `sharding` is the sharding orbax recorded (a dict such as `{"sharding_type":
    "NamedSharding", "partition_spec": ["x"], ...}`), or None. Reading goes through
    tensorstore (zarr arrays, in an OCDBT database or in plain files).
    """

    __slots__ = ("_driver", "_item", "_ocdbt", "param", "sharding")

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        item: str,
        param: str,
        driver: str,
        ocdbt: bool,
        sharding: Any,
    ) -> None:
        # shape (a tuple of ints) and dtype were checked by the reader: no conversions here
        self.shape, self.dtype, self.file, self.offset = shape, dtype, f"{item}/{param}", 0
        self.fortran_order, self._opener, self._seekable = False, None, False
        self._item = item
        self._driver = driver
        self._ocdbt = ocdbt
        self.param = param
        self.sharding = sharding

    def __repr__(self) -> str:
        return super().__repr__().replace("LazyArray(", "OrbaxArray(", 1)

    def spec(self) -> dict[str, Any]:
        """The tensorstore spec of this array."""
        if self._ocdbt:
            kv = {"driver": "ocdbt", "base": f"file://{self._item}/", "path": f"{self.param}/"}
        else:
            kv = {"driver": "file", "path": f"{self._item}/{self.param}/"}
        return {"driver": self._driver, "kvstore": kv}

    def _open(self) -> IO[bytes]:
        import tensorstore as ts

        arr = ts.open(self.spec(), open=True, read=True).result().read().result()
        return io.BytesIO(np.ascontiguousarray(arr).tobytes())

    def iter_chunks(self, max_elems: int = 1 << 20) -> Iterator[np.ndarray]:
        """The elements in C order, 1-D chunks of whole rows, each read on its own.

        Diffs and stats of big arrays (two steps of a run) hold one chunk at a time, not the
        array. A row bigger than `max_elems` is read whole.
        """
        if not self.shape or self.size == 0:
            if self.size:
                yield np.asarray(self.read()).reshape(-1)
            return
        import tensorstore as ts

        store = ts.open(self.spec(), open=True, read=True).result()
        row = math.prod(self.shape[1:])
        rows = max(1, max_elems // max(row, 1))
        for start in range(0, self.shape[0], rows):
            part = store[start : min(start + rows, self.shape[0])].read().result()
            yield np.ascontiguousarray(part, dtype=self.dtype).reshape(-1)


def _is_item(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "_METADATA"))


_PREFIXED_STEP = re.compile(r"[A-Za-z][\w.-]{0,63}_(\d{1,18})")


def _steps(path: str) -> list[str]:
    """Step directories: `1200`, `0001200`, or `PREFIX_1200` (orbax's `step_prefix`, which
    must hold `_CHECKPOINT_METADATA`)."""
    try:
        names = os.listdir(path)
    except OSError:
        return []
    out = []
    for n in names:
        full = os.path.join(path, n)
        if n.isdigit() and len(n) <= 18:
            if os.path.isdir(full):
                out.append(n)
        elif _PREFIXED_STEP.fullmatch(n) and os.path.isfile(
            os.path.join(full, "_CHECKPOINT_METADATA")
        ):
            out.append(n)
    return out


def _step_number(name: str) -> int:
    return int(name.rpartition("_")[2])


def _is_json_item(path: str) -> bool:
    """An item saved with `ocp.args.JsonSave`: a directory holding the JSON file `metadata`."""
    return os.path.isfile(os.path.join(path, "metadata")) and not _is_item(path)


def _items(step_dir: str) -> list[str]:
    """The items of a step directory: array items (`_METADATA`) and JSON items."""
    out = []
    for n in os.listdir(step_dir):
        sub = os.path.join(step_dir, n)
        if _is_item(sub) or _is_json_item(sub):
            out.append(n)
    return sorted(out)


def _other_dirs(step_dir: str, items: list[str]) -> list[str]:
    """Directories of a step that are not items treetool reads (shown, never dropped)."""
    try:
        names = os.listdir(step_dir)
    except OSError:
        return []
    return sorted(
        n
        for n in names
        if n not in items and not n.startswith(".") and os.path.isdir(os.path.join(step_dir, n))
    )


def run_steps(path: str) -> list[int]:
    """The steps of a CheckpointManager run directory, in increasing order ([] if not a run).

    Example:
        >>> import tempfile
        >>> run_steps(tempfile.mkdtemp())
        []
    """
    if os.path.isfile(os.path.join(path, "_CHECKPOINT_METADATA")) or _is_item(path):
        return []
    return sorted({_step_number(s) for s in _steps(path)})


def is_orbax_dir(path: str) -> bool:
    """An item (`_METADATA`), a step directory, or a CheckpointManager root."""
    if _is_item(path):
        return True
    if os.path.isfile(os.path.join(path, "_CHECKPOINT_METADATA")) and _items(path):
        return True
    return any(
        _is_item(os.path.join(path, s)) or _items(os.path.join(path, s)) for s in _steps(path)
    )


def read(
    path: str,
    *,
    trust: bool = False,
    lazy: bool = True,
    like: Any = None,
    partial: bool = False,
    format: str = "orbax",
    step: int | None = None,
) -> Any:
    """`treetool.io.read` for orbax checkpoint directories.

    A CheckpointManager run reads its latest step, or `step`; `Loaded.step` and
    `Loaded.steps` say which step was read and which there are.
    """
    from . import Loaded

    if not os.path.isdir(path):
        raise LoadError(f"{path}: an orbax checkpoint is a directory")
    steps = run_steps(path)
    if step is not None and step not in steps:
        have = ", ".join(map(str, steps)) if steps else "none: it is not a CheckpointManager run"
        raise LoadError(f"{path}: no step {step}; its steps: {have}")
    if _is_item(path):
        return Loaded(_read_item(path, lazy), format)
    chosen = None
    if steps:
        chosen = step if step is not None else steps[-1]
        path = _step_dir(path, chosen)
        if _is_item(path):
            return Loaded(_read_item(path, lazy), format, step=chosen, steps=steps)
    items = _items(path)
    if not items:
        raise LoadError(f"{path}: no orbax items (directories with _METADATA) found")
    if items == ["default"] and not _other_dirs(path, items):
        tree = _read_any(os.path.join(path, "default"), lazy)
    else:
        tree = {name: _read_any(os.path.join(path, name), lazy) for name in items}
        for name in _other_dirs(path, items):  # shown as what they are, never dropped
            tree[name] = GlobalRef("orbax", f"unreadable item {name}", tag="orbax")
    return Loaded(tree, format, step=chosen, steps=steps or None)


def _step_dir(path: str, step: int) -> str:
    """The directory of `step` (`1200`, zero-padded `0001200`, or prefixed `ckpt_1200`)."""
    for name in sorted(_steps(path)):
        if _step_number(name) == step:
            return os.path.join(path, name)
    raise LoadError(f"{path}: no step {step}")


_MAX_JSON_ITEM = 64 << 20


def _read_any(item: str, lazy: bool) -> Any:
    """An array item, or a JSON item as its small tree of dicts, lists and scalars."""
    if _is_item(item):
        return _read_item(item, lazy)
    path = os.path.join(item, "metadata")
    if os.path.getsize(path) > _MAX_JSON_ITEM:
        raise LoadError(f"{path}: JSON item of {os.path.getsize(path)} bytes, more than 64 MiB")
    return _load_json(path)


def _load_json(path: str) -> Any:
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read())
    except (ValueError, RecursionError):
        raise LoadError(f"{path}: not valid JSON") from None


def _read_item(item: str, lazy: bool) -> Any:
    # an OCDBT database's B+tree is decoded in tensorstore's threads while _METADATA is parsed
    walk = _OcdbtWalk.start(item) if os.path.isfile(os.path.join(item, "manifest.ocdbt")) else None
    meta = _load_json(os.path.join(item, "_METADATA"))
    tm = meta.get("tree_metadata") if isinstance(meta, dict) else None
    if not isinstance(tm, dict):
        raise LoadError(f"{item}/_METADATA: no tree_metadata")
    ocdbt = bool(meta.get("use_ocdbt", False)) or os.path.isdir(
        os.path.join(item, "ocdbt.process_0")
    )
    zarr_of = _zarr_lookup(item, ocdbt, walk)
    item_abs = os.path.abspath(item)
    facts: dict[int, Any] = {}
    shardings = _shardings(item)
    strings = _strings(item)
    root: Any = None
    for key, entry in tm.items():
        km = entry.get("key_metadata") if type(entry) is dict else None
        vm = entry.get("value_metadata") if type(entry) is dict else None
        if type(km) is not list or type(vm) is not dict:
            raise LoadError(f"{item}/_METADATA: bad entry {key!r}")
        try:
            if len(km) == 1:  # most entries: no list to build
                param = str(km[0]["key"])
                keys: Any = ((param, km[0].get("key_type")),)
            else:
                keys = [(str(k["key"]), k.get("key_type")) for k in km]
                param = ".".join([k for k, _ in keys])
        except (TypeError, KeyError, AttributeError):
            raise LoadError(f"{item}/_METADATA: bad key metadata in {key!r}") from None
        vt = vm.get("value_type")
        if vt in _ARRAY_TYPES:
            zmeta = zarr_of(param)
            known = facts.get(id(zmeta))  # arrays of one shape and dtype share their facts
            sharding = shardings.get(param)
            if known is not None and lazy:
                shape, dtype, driver, _ = known
                leaf: Any = OrbaxArray(shape, dtype, item_abs, param, driver, ocdbt, sharding)
            else:
                leaf = _array(item_abs, ocdbt, param, zmeta, sharding, lazy, facts)
        elif vt == "None" or vm.get("skip_deserialize"):
            leaf = None
        elif vt == "string" and param in strings:
            leaf = strings[param]
        else:
            leaf = GlobalRef("orbax", str(vt), tag="orbax")
        if len(keys) == 1 and type(root) is _Map:  # a flat entry of a dict: most of them
            root[param] = leaf
        else:
            root = _insert(root, keys, leaf, item)
    return _convert(root, item) if root is not None else {}


def _array(
    item: str, ocdbt: bool, param: str, zmeta: Any, sharding: Any, lazy: bool, facts: dict
) -> Any:
    if zmeta is None:
        raise LoadError(f"{item}: no zarr metadata for array {param!r}")
    known = facts.get(id(zmeta))  # arrays of one shape and dtype share one parsed metadata dict
    if known is None:
        shape = zmeta.get("shape")
        if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
            raise LoadError(f"{item}: bad shape for {param!r}")
        dtype = _dtype(zmeta.get("dtype", zmeta.get("data_type")), item, param)
        driver = "zarr3" if zmeta.get("zarr_format") == 3 else "zarr"
        known = facts[id(zmeta)] = (tuple(shape), dtype, driver, zmeta)
    shape, dtype, driver, _ = known
    leaf = OrbaxArray(shape, dtype, item, param, driver, ocdbt, sharding)
    return leaf if lazy else leaf.read().copy()


def _dtype(name: Any, item: str, param: str) -> np.dtype:
    if isinstance(name, str) and len(name) <= 32:
        try:
            return np.dtype(name)
        except TypeError:
            import ml_dtypes

            t = getattr(ml_dtypes, name, None)
            if isinstance(t, type):
                return np.dtype(t)
    raise LoadError(f"{item}: unsupported dtype {name!r} for {param!r}")


def _tensorstore(item: str) -> Any:
    try:
        import tensorstore
    except ImportError:
        raise LoadError(
            f"{item}: reading an orbax OCDBT checkpoint needs tensorstore (pip install tensorstore)"
        ) from None
    return tensorstore


def _zarr_lookup(item: str, ocdbt: bool, walk: _OcdbtWalk | None) -> Any:
    """param -> its parsed `.zarray` / `zarr.json` (None if missing), from the OCDBT database
    (all read at once) or from the files of each array."""
    if ocdbt:
        return _ocdbt_metadata(item, walk).get

    def from_files(param: str) -> Any:
        for name in (".zarray", "zarr.json"):
            f = os.path.join(item, param, name)
            if os.path.isfile(f):
                return _load_json(f)
        return None

    return from_files


def _ocdbt_metadata(item: str, walk: _OcdbtWalk | None = None) -> dict[str, Any]:
    """The zarr metadata (`.zarray` / `zarr.json`) of every array in an OCDBT checkpoint.

    The B+tree is read node by node with tensorstore's own dump of the database (one call
    per node, small values come inline); key-by-key reads cost ~100 us each at 1e5 keys,
    whatever the cache, so they are only the fallback for databases the dump cannot walk.
    """
    ts = _tensorstore(item)
    try:
        found = (walk or _OcdbtWalk.start(item)).metadata()
        if found is None:
            found = _ocdbt_read_metadata(ts, item)
    except (ValueError, RuntimeError, KeyError, TypeError) as e:
        raise LoadError(
            f"{item}: cannot read the OCDBT metadata: {str(e).splitlines()[0]}"
        ) from None
    # arrays of one shape and dtype share their metadata text: each text is parsed once
    parsed = {value: json.loads(value) for value in set(found.values())}
    return {name: parsed[value] for name, value in found.items()}


_ZARR_META = (b"/.zarray", b"/zarr.json")


class _OcdbtWalk:
    """A walk of the latest version of an OCDBT database's B+tree, through tensorstore's dump.

    `start` reads the manifest and asks for the root node; tensorstore decodes nodes in its
    own threads, so the caller can do other work before `metadata` collects the result.
    Child nodes are all asked for as soon as their parent is read.
    """

    def __init__(self, ts: Any, base: Any, root: Any, walkable: bool) -> None:
        self._ts, self._base, self._root, self._walkable = ts, base, root, walkable

    @classmethod
    def start(cls, item: str) -> _OcdbtWalk:
        ts = _tensorstore(item)

        try:
            base = ts.KvStore.open(f"file://{os.path.abspath(item)}/").result()
            manifest = ts.ocdbt.dump(base).result()
        except (ValueError, RuntimeError) as e:
            raise LoadError(
                f"{item}: cannot read the OCDBT manifest: {str(e).splitlines()[0]}"
            ) from None
        versions = manifest.get("versions") or []
        if not versions or manifest.get("version_tree_nodes"):
            # older versions live in version-tree nodes: tensorstore's reads resolve them
            return cls(ts, base, None, False)
        root = max(versions, key=lambda v: v["generation_number"])["root"]
        if "location" not in root:
            return cls(ts, base, None, True)  # an empty database
        return cls(ts, base, (ts.ocdbt.dump(base, root["location"]), b""), True)

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
            node = pending.result()
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
            found[name] = pending.result()
        return found


def _ocdbt_read_metadata(ts: Any, item: str) -> dict[str, bytes]:
    """array name -> metadata bytes, one tensorstore read per key."""
    ctx = ts.Context({"cache_pool": {"total_bytes_limit": 256 << 20}})
    spec = {"driver": "ocdbt", "base": f"file://{os.path.abspath(item)}/"}
    kv = ts.KvStore.open(spec, context=ctx).result()
    keys = [k for k in kv.list().result() if k.endswith(_ZARR_META)]
    futures = [(k, kv.read(k)) for k in keys]
    return {k[: k.rindex(b"/")].decode(): fut.result().value for k, fut in futures}


def _shardings(item: str) -> dict[str, Any]:
    f = os.path.join(item, "_sharding")
    if not os.path.isfile(f):
        return {}
    raw = _load_json(f)
    out = {}
    parsed: dict[str, Any] = {}  # most arrays share one sharding: its text is parsed once
    if isinstance(raw, dict):
        for k, v in raw.items():
            try:
                name = base64.b64decode(k).decode()
                if isinstance(v, str):
                    if v not in parsed:
                        parsed[v] = json.loads(v)
                    v = parsed[v]
                out[name] = v
            except (ValueError, UnicodeDecodeError):
                continue
    return out


def _strings(item: str) -> dict[str, Any]:
    f = os.path.join(item, "_strings.json")
    raw = _load_json(f) if os.path.isfile(f) else {}
    return raw if isinstance(raw, dict) else {}


class _Seq(dict):
    """A dict standing for a list while the tree is built (orbax key_type 1)."""


class _Map(dict):
    """A dict made while the tree is built (leaves that are dicts are left alone)."""


def _insert(root: Any, keys: list[tuple[str, Any]], leaf: Any, item: str) -> Any:
    if not keys:
        return leaf
    if root is None:
        root = _Seq() if keys[0][1] == 1 else _Map()
    node = root
    last = len(keys) - 1
    for i, (k, _) in enumerate(keys):
        key: Any = k
        if type(node) is _Seq:
            try:
                key = int(k)
            except ValueError:
                raise LoadError(f"{item}/_METADATA: {k!r} is not a sequence index") from None
        if i == last:
            node[key] = leaf
        else:
            nxt = node.get(key)
            if nxt is None:
                nxt = node[key] = _Seq() if keys[i + 1][1] == 1 else _Map()
            elif type(nxt) is not _Seq and type(nxt) is not _Map:
                raise LoadError(
                    f"{item}/_METADATA: {'.'.join(k for k, _ in keys)} conflicts with a leaf"
                )
            node = nxt
    return root


def _convert(root: Any, item: str) -> Any:
    """The built tree with plain dicts and lists, converted children first (no recursion)."""
    made = (_Seq, _Map)
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        if type(node) in made:
            order.append(node)
            stack.extend(node.values())
    done: dict[int, Any] = {}
    for node in reversed(order):
        if type(node) is _Seq:
            n = max(node) + 1 if node else 0
            if n > 2 * len(node) + 16 or (node and min(node) < 0):
                raise LoadError(
                    f"{item}/_METADATA: sequence indices {min(node)}..{n - 1} "
                    f"for {len(node)} entries"
                )
            done[id(node)] = [
                done[id(v)] if type(v) in made else v for v in map(node.get, range(n))
            ]
        else:
            done[id(node)] = {k: done[id(v)] if type(v) in made else v for k, v in node.items()}
    return done.get(id(root), root)
