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

The checkpoint may be a local directory or an `s3://` / `gs://` prefix: every file question
goes through `_orbax_fs` (one listing of the prefix remotely), every array through the
tensorstore kvstore it names. The pieces: `_orbax_array` (the lazy leaf), `_orbax_ocdbt` (the
OCDBT B+tree walk), `_orbax_tree` (the tree built from `_METADATA`), `_orbax_data` (the
safety checks of array reads).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from treetool._errors import LoadError
from treetool._leaves._dtypes import ITEMSIZES, spec_facts
from treetool._source import Source, is_url
from treetool.io._formats import Format, Probe, ReadOptions
from treetool.io._loaded import Loaded
from treetool.io._opaque import GlobalRef
from treetool.io._orbax._array import OrbaxArray, _tensorstore, _ts_error
from treetool.io._orbax._data import allow_fill, check_component, inside
from treetool.io._orbax._fs import (
    abspath,
    getsize,
    isdir,
    isfile,
    islink,
    join,
    listdir,
    read_bytes,
)
from treetool.io._orbax._ocdbt import _ocdbt_read_metadata, _OcdbtWalk, decoded_metadata
from treetool.io._orbax._tree import _Builder
from treetool.io._safety._limits import MAX_DEPTH, check_dtype, check_json_text, check_shape

if TYPE_CHECKING:
    from treetool.io._sources._pool import Future

__all__ = ["FORMAT", "OrbaxArray", "allow_fill", "is_orbax_dir", "run_steps"]

_ARRAY_TYPES = frozenset({"jax.Array", "np.ndarray", "scalar"})


def _is_item(path: str) -> bool:
    return isfile(join(path, "_METADATA"))


_PREFIXED_STEP = re.compile(r"[A-Za-z][\w.-]{0,63}_(\d{1,18})")


def _steps(path: str) -> list[str]:
    """Step directories: `1200`, `0001200`, or `PREFIX_1200` (orbax's `step_prefix`, which
    must hold `_CHECKPOINT_METADATA`)."""
    try:
        names = listdir(path)
    except OSError:
        return []
    out = []
    for n in names:
        if n.isdigit() and len(n) <= 18:
            if _confined(path, n, isdir):
                out.append(n)
        elif _PREFIXED_STEP.fullmatch(n) and _confined(path, n, _has_checkpoint_metadata):
            out.append(n)
    return out


def _step_number(name: str) -> int:
    return int(name.rpartition("_")[2])


def _has_checkpoint_metadata(full: str) -> bool:
    return isfile(join(full, "_CHECKPOINT_METADATA"))


def _is_json_item(path: str) -> bool:
    """An item saved with `ocp.args.JsonSave`: a directory holding the JSON file `metadata`."""
    return isfile(join(path, "metadata")) and not _is_item(path)


def _items(step_dir: str) -> list[str]:
    """The items of a step directory: array items (`_METADATA`) and JSON items."""
    return sorted(n for n in listdir(step_dir) if _confined(step_dir, n, _is_item_or_json))


def _is_item_or_json(path: str) -> bool:
    return _is_item(path) or _is_json_item(path)


def _other_dirs(step_dir: str, items: list[str]) -> list[str]:
    """Directories of a step that are not items treetool reads (shown, never dropped)."""
    try:
        names = listdir(step_dir)
    except OSError:
        return []
    return sorted(
        n for n in names if n not in items and not n.startswith(".") and isdir(join(step_dir, n))
    )


def run_steps(path: str) -> list[int]:
    """The steps of a CheckpointManager run directory, in increasing order ([] if not a run).

    Example:
        >>> import tempfile
        >>> run_steps(tempfile.mkdtemp())
        []
    """
    if isfile(join(path, "_CHECKPOINT_METADATA")) or _is_item(path):
        return []
    return sorted({_step_number(s) for s in _steps(path)})


def _confined(parent: str, name: str, test: Any) -> bool:
    """`test(parent/name)`, refusing an entry that is a link to outside `parent`."""
    full = join(parent, name)
    if not test(full):
        return False
    if islink(full) and not inside(parent, full):
        raise LoadError(f"{full}: a link to outside the checkpoint {parent}")
    return True


def is_orbax_dir(path: str) -> bool:
    """An item (`_METADATA`), a step directory, or a CheckpointManager root."""
    if _is_item(path):
        return True
    if isfile(join(path, "_CHECKPOINT_METADATA")) and _items(path):
        return True
    return any(_is_item(join(path, s)) or _items(join(path, s)) for s in _steps(path))


def _sniff(probe: Probe) -> bool:
    return is_orbax_dir(probe.path)


def _read(src: Source, opts: ReadOptions) -> Loaded:
    """`treetool.io.read` for orbax checkpoint directories.

    A CheckpointManager run reads its latest step, or `opts.step`; `Loaded.step` and
    `Loaded.steps` say which step was read and which there are.
    """
    path, lazy, step, format = src.name, opts.lazy, opts.step, "orbax"
    if not isdir(path):
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
        tree = _read_any(join(path, "default"), lazy)
    else:
        tree = {name: _read_any(join(path, name), lazy) for name in items}
        for name in _other_dirs(path, items):  # shown as what they are, never dropped
            tree[name] = GlobalRef("orbax", f"unreadable item {name}", tag="orbax")
    return Loaded(tree, format, step=chosen, steps=steps or None)


FORMAT = Format(
    "orbax",
    sniff=_sniff,
    read=_read,
    expects="_METADATA, _CHECKPOINT_METADATA or step directories",
)


def _step_dir(path: str, step: int) -> str:
    """The directory of `step` (`1200`, zero-padded `0001200`, or prefixed `ckpt_1200`)."""
    for name in sorted(_steps(path)):
        if _step_number(name) == step:
            return join(path, name)
    raise LoadError(f"{path}: no step {step}")


_MAX_JSON_ITEM = 64 << 20


def _read_any(item: str, lazy: bool) -> Any:
    """An array item, or a JSON item as its small tree of dicts, lists and scalars."""
    if _is_item(item):
        return _read_item(item, lazy)
    path = join(item, "metadata")
    if getsize(path) > _MAX_JSON_ITEM:
        raise LoadError(f"{path}: JSON item of {getsize(path)} bytes, more than 64 MiB")
    return _load_json(path)


def _load_json(path: str, root: str | None = None, bytes_per_container: int = 12) -> Any:
    if root is not None and not inside(root, path):
        raise LoadError(f"{path}: a link to outside the checkpoint {root}")
    return _parse_json(read_bytes(path), path, bytes_per_container)


def _parse_json(raw: bytes | str, where: str, bytes_per_container: int = 12) -> Any:
    """JSON of the checkpoint: nesting and object count checked before `json.loads` runs."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    check_json_text(raw, where, bytes_per_container=bytes_per_container)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise LoadError(f"{where}: not valid JSON") from None


def _read_item(item: str, lazy: bool) -> Any:
    # remotely, the OCDBT nodes are fetched while _METADATA is fetched and parsed
    early = _start_decode(item) if is_url(item) else None
    # an entry of _METADATA is ~6 objects in 180+ bytes; 1 per 20 bytes bounds its memory
    meta = _load_json(join(item, "_METADATA"), item, bytes_per_container=20)
    tm = meta.get("tree_metadata") if isinstance(meta, dict) else None
    if not isinstance(tm, dict):
        raise LoadError(f"{item}/_METADATA: no tree_metadata")
    ocdbt = bool(meta.get("use_ocdbt", False)) or isdir(join(item, "ocdbt.process_0"))
    zarr_of = _zarr_lookup(item, ocdbt, early)
    item_abs = abspath(item)
    facts: dict[int, Any] = {}
    shardings = _shardings(item)
    strings = _strings(item)
    built = _Builder(item)
    # {outer key: the dict `pair` made for it}: most entries are two dict keys deep, and go
    # straight into their dict; any other entry, or an outer key seen first elsewhere, takes
    # the builder's checked way (and a dict it replaced is forgotten here)
    pairs: dict[str, dict] = {}
    arrays, alike, sharding_of = _ARRAY_TYPES, OrbaxArray._alike, shardings.get
    # the last array's metadata dict (none yet: a fresh object), the first array made of it
    last_meta: Any = object()
    last_first: Any = None
    for key, entry in tm.items():
        if type(entry) is dict:
            km, vm = entry.get("key_metadata"), entry.get("value_metadata")
        else:
            km = vm = None
        if type(km) is not list or type(vm) is not dict:
            raise LoadError(f"{item}/_METADATA: bad entry {key!r:.80}")
        depth = len(km)
        try:
            if depth > MAX_DEPTH:
                raise LoadError(
                    f"{item}/_METADATA: {key!r:.80} is {depth} keys deep, more than {MAX_DEPTH}"
                )
            if depth == 2:  # a dict of dicts: most entries
                k0, k1 = km
                outer, inner = k0["key"], k1["key"]
                if type(outer) is not str:
                    outer = str(outer)
                if type(inner) is not str:
                    inner = str(inner)
                param = f"{outer}.{inner}"
            elif depth == 1:  # no list to build
                param = str(km[0]["key"])
            else:
                keys = [(str(k["key"]), k.get("key_type")) for k in km]
                param = ".".join([k for k, _ in keys])
        except (TypeError, KeyError, AttributeError):
            raise LoadError(f"{item}/_METADATA: bad key metadata in {key!r:.80}") from None
        vt = vm.get("value_type")
        if vt in arrays:
            zmeta = zarr_of(param)
            sharding = sharding_of(param) if shardings else None
            if zmeta is last_meta and lazy:  # arrays in a row of one shape and dtype
                leaf: Any = alike(last_first, param, sharding)
            else:
                known = facts.get(id(zmeta))  # arrays of one shape and dtype share their facts
                if known is not None and lazy:
                    leaf = alike(known[4], param, sharding)
                else:
                    leaf = _array(item_abs, ocdbt, param, zmeta, sharding, lazy, facts)
                if lazy and zmeta is not None:
                    last_meta, last_first = zmeta, facts[id(zmeta)][4]
        elif vt == "None" or vm.get("skip_deserialize"):
            leaf = None
        elif vt == "string" and param in strings:
            leaf = strings[param]
        else:
            leaf = GlobalRef("orbax", str(vt), tag="orbax")
        if depth == 2:
            node = pairs.get(outer)
            if node is not None and k1.get("key_type") != 1:
                node[inner] = leaf
                continue
            if k0.get("key_type") != 1:
                built.pair(outer, inner, k1.get("key_type"), leaf)
                made = built.root.get(outer) if type(built.root) is dict else None
                if type(made) is dict and built.made(made):
                    pairs[outer] = made
                continue
            keys = [(outer, k0.get("key_type")), (inner, k1.get("key_type"))]
            built.insert(keys, leaf)
        elif depth == 1:
            pairs.pop(param, None)  # its dict, if any, is replaced
            if not built.flat(param, leaf):  # a flat entry of a dict: most of them
                built.insert([(param, km[0].get("key_type"))], leaf)
        else:
            if not keys:  # the root itself: the dicts made so far are no longer in the tree
                pairs.clear()
            built.insert(keys, leaf)
    return built.tree()


def _array(
    item: str, ocdbt: bool, param: str, zmeta: Any, sharding: Any, lazy: bool, facts: dict
) -> Any:
    if zmeta is None:
        raise LoadError(f"{item}: no zarr metadata for array {param!r}")
    known = facts.get(id(zmeta))  # arrays of one shape and dtype share one parsed metadata dict
    if known is None:
        if type(zmeta) is not dict:
            raise LoadError(f"{item}: zarr metadata of {param!r} is not a JSON object")
        shape = zmeta.get("shape")
        if type(shape) is not list:
            raise LoadError(f"{item}: bad shape for {param!r}")
        shape = check_shape(shape, f"{item}: array {param!r}")
        # numpy's name: a standard one stays a name in the leaf (listing imports no numpy)
        dtype = _dtype(zmeta.get("dtype", zmeta.get("data_type")), item, param)
        driver = "zarr3" if zmeta.get("zarr_format") == 3 else "zarr"
        leaf = OrbaxArray(tuple(shape), dtype, item, param, driver, ocdbt, sharding)
        # the first array of these facts: the others are made alike (`OrbaxArray._alike`)
        facts[id(zmeta)] = (leaf.shape, dtype, driver, zmeta, leaf)
    else:
        leaf = OrbaxArray._alike(known[4], param, sharding)
    return leaf if lazy else leaf.read().copy()


def _dtype(name: Any, item: str, param: str) -> str:
    """The numpy name of a zarr dtype (`<f4` -> `float32`); other spellings (ml_dtypes'
    float8 and int4 types...) are checked by numpy, imported for them only."""
    if isinstance(name, str):  # what orbax writes, as numpy names (no numpy import)
        if name in ITEMSIZES:  # numpy's and ml_dtypes' names
            return name
        facts = spec_facts(name) if name[:1] in "<|=" else None  # `<f4`, `|b1`: not `>f4`
        if facts is not None and not facts[0].startswith("void"):
            return facts[0]
    import numpy as np

    dt: np.dtype | None = None
    spelled = ""  # how `_as_dtype` gets it back: numpy's own string, or ml_dtypes' name
    if isinstance(name, str) and len(name) <= 32:
        try:
            dt = np.dtype(name)
            spelled = dt.str if np.dtype(dt.str) == dt else dt.name  # ml_dtypes': by name
        except Exception:  # TypeError; SyntaxError and ValueError for odd strings
            import ml_dtypes

            t = getattr(ml_dtypes, name, None)
            if isinstance(t, type):
                dt = np.dtype(t)
                spelled = name
    if dt is None or dt.fields is not None:
        raise LoadError(f"{item}: unsupported dtype {name!r:.40} for {param!r}")
    check_dtype(dt, f"{item}: array {param!r}")
    return spelled


def _start_decode(item: str) -> Future | None:
    """`decoded_metadata(item)` started in a thread of its own, in this read's session
    (None: no OCDBT database). Its ranged reads run on the read-ahead pool: it waits on them
    from outside that pool."""
    if not isfile(join(item, "manifest.ocdbt")):
        return None
    import contextvars
    import threading

    from treetool.io._sources._pool import Future

    fut: Future = Future()
    context = contextvars.copy_context()

    def run() -> None:
        fut.set_running_or_notify_cancel()
        try:
            fut.set_result(context.run(decoded_metadata, item))
        except BaseException as e:  # `result()` raises it on the reader's thread
            fut.set_exception(e)

    # a thread of its own (not `concurrent.futures`: it imports `logging`, ~5 ms)
    threading.Thread(target=run, name="treetool-ocdbt", daemon=True).start()
    return fut


def _zarr_lookup(item: str, ocdbt: bool, early: Future | None = None) -> Any:
    """param -> its parsed `.zarray` / `zarr.json` (None if missing), from the OCDBT database
    (all read at once) or from the files of each array."""
    if ocdbt:
        return _ocdbt_metadata(item, early).get

    def from_files(param: str) -> Any:
        for name in (".zarray", "zarr.json"):
            f = join(item, check_component(param, item), name)
            if isfile(f):
                return _load_json(f, item)
        return None

    return from_files


def _ocdbt_metadata(item: str, early: Future | None = None) -> dict[str, Any]:
    """The zarr metadata (`.zarray` / `zarr.json`) of every array in an OCDBT checkpoint.

    treetool's own decoder reads the few B+tree nodes that hold them (no tensorstore import);
    without a zstd decoder, tensorstore's dump of the database walks the tree node by node
    (small values come inline); key-by-key reads cost ~100 us each at 1e5 keys, whatever the
    cache, so they are only the last fallback, for databases the dump cannot walk.
    """
    if early is not None:
        found = early.result()
    else:
        found = decoded_metadata(item) if isfile(join(item, "manifest.ocdbt")) else None
    if found is None:
        ts = _tensorstore(item)
        try:
            found = _OcdbtWalk.start(item).metadata()
            if found is None:
                found = _ocdbt_read_metadata(ts, item)
        except (ValueError, RuntimeError, KeyError, TypeError) as e:
            raise LoadError(f"{item}: cannot read the OCDBT metadata: {_ts_error(e)}") from None
    # arrays of one shape and dtype share their metadata text: each text is parsed once (the
    # decoder hands out one bytes object for equal texts in a row: their hash is made once)
    parsed = {value: _parse_json(value, f"{item}: zarr metadata") for value in set(found.values())}
    return dict(zip(found, map(parsed.__getitem__, found.values())))


def _shardings(item: str) -> dict[str, Any]:
    f = join(item, "_sharding")
    if not isfile(f):
        return {}
    import base64  # only for checkpoints with shardings (1.5 ms of start-up otherwise)

    raw = _load_json(f, item)
    out = {}
    parsed: dict[str, Any] = {}  # most arrays share one sharding: its text is parsed once
    if isinstance(raw, dict):
        for k, v in raw.items():
            try:
                name = base64.b64decode(k).decode()
                if isinstance(v, str):
                    if v not in parsed:
                        parsed[v] = _parse_json(v, f)
                    v = parsed[v]
                out[name] = v
            except (ValueError, UnicodeDecodeError, LoadError):
                continue
    return out


def _strings(item: str) -> dict[str, Any]:
    f = join(item, "_strings.json")
    raw = _load_json(f, item) if isfile(f) else {}
    return raw if isinstance(raw, dict) else {}
