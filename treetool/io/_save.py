"""`tt.save`: write a pytree as safetensors, npz, an equinox `.eqx` file or a pickle.

safetensors and npz hold the array leaves as tensors under their dotted names (`layers.0.bias`,
what other libraries show) and a structure record of everything else (`_structure`), from
which `load` rebuilds the tree without a skeleton. `.eqx` is written as
`eqx.tree_serialise_leaves` writes it (one `.npy` record per array or scalar leaf, in jax
order), so equinox reads it back. Every write goes to a temporary file beside the name and is
moved into place whole (`_atomic`).
"""

from __future__ import annotations

import json
import os
import pickle
from typing import Any, cast

import numpy as np

from treetool._errors import SaveError
from treetool._leaves._arrays import LazyArray, is_array, is_key, leaf_info
from treetool._leaves._callables import OpaqueFunction
from treetool._leaves._prng import KeyArray
from treetool._paths._path import DictKey
from treetool.io._opaque import GlobalRef, Opaque
from treetool.io._structure import RECORD_KEY, dotted_names

__all__ = ["save"]

_EXT = {
    ".safetensors": "safetensors",
    ".npz": "npz",
    ".eqx": "equinox",
    ".pkl": "pickle",
    ".pickle": "pickle",
}
_FORMATS = ("safetensors", "npz", "equinox", "pickle")
#: the npz member that holds the structure record (`np.load` shows it as a uint8 array)
NPZ_RECORD = "__treetool_tree__"


def _format_of(path: str, format: str | None) -> str:
    if format is not None:
        format = "equinox" if format == "eqx" else format
        if format not in _FORMATS:
            raise SaveError(
                f"{path}: cannot save as {format!r}; use 'safetensors', 'npz', 'equinox' or "
                "'pickle'"
            )
        return format
    ext = os.path.splitext(path)[1].lower()
    if ext not in _EXT:
        raise SaveError(
            f"{path}: cannot tell the format from the extension {ext or '(none)'!r}; "
            "pass format='safetensors', 'npz', 'equinox' or 'pickle'"
        )
    return _EXT[ext]


def _flat(tree: Any, path: str, arrays_only: bool) -> dict[str, Any]:
    return {str(p): leaf for p, leaf in _flat_paths(tree, path, arrays_only)}


def _flat_paths(tree: Any, path: str, arrays_only: bool) -> list[tuple[Any, Any]]:
    from treetool._tree._views import iter_leaves_with_paths

    _check_no_opaque(tree, path)
    out: list[tuple[Any, Any]] = []
    for p, leaf in iter_leaves_with_paths(tree):
        if is_key(leaf):
            raise SaveError(
                f"{path}: {p} is a typed PRNG key array ({leaf_info(leaf).label}); save its key "
                "data (jax.random.key_data) or use format='pickle'"
            )
        if arrays_only and not (is_array(leaf) or isinstance(leaf, bool | int | float | complex)):
            raise SaveError(
                f"{path}: {p} is a {type(leaf).__name__}; only arrays and numbers can be saved here"
            )
        out.append((p, leaf))
    return out


def _check_no_opaque(tree: Any, path: str) -> None:
    from treetool._tree._model import view

    for node in view(tree).walk():
        if isinstance(node.obj, Opaque | GlobalRef):
            _refuse(path, str(node.path), node.obj)


def _refuse(path: str, where: str, obj: Any) -> None:
    raise SaveError(
        f"{path}: cannot save {where or 'the tree'}: it is an opaque {obj.class_path} object that was "
        "loaded without running its code; replace it (tt.tree_at) or load the source with trust=True"
    )


def _materialize(tree: Any, path: str, refuse_opaque: bool = True) -> Any:
    """The tree with LazyArray leaves read; refuses Opaque nodes (or keeps them as they are)."""
    from treetool._tree._model import children

    def conv(x: Any, where: str) -> Any:
        if isinstance(x, Opaque | GlobalRef):
            if not refuse_opaque:
                return x
            _refuse(path, where, x)
        if isinstance(x, LazyArray):
            return np.asarray(x)
        if type(x) is KeyArray:  # a key loaded from a file is saved as the live jax key
            return x.to_jax()
        if type(x) is OpaqueFunction:
            raise SaveError(
                f"{path}: cannot save {where or 'the tree'}: it is the function {x.label}, loaded "
                "without running its code; replace it (tt.tree_at) or load the source with "
                "trust=True"
            )
        kind, kids = children(x)
        if kind == "dict":
            return (
                {cast(DictKey, k).key: conv(c, where + str(k)) for k, c in kids}
                if type(x) is dict
                else _rebuild(x, kids, where, conv)
            )
        if kind in ("list", "tuple"):
            return type(x)(conv(c, where + str(k)) for k, c in kids)
        if kind in ("leaf", "none"):
            return x
        return _rebuild(x, kids, where, conv)

    return conv(tree, "")


def _rebuild(x: Any, kids: list, where: str, conv: Any) -> Any:
    import jax

    _, treedef = jax.tree_util.tree_flatten(x, is_leaf=lambda y: y is not x)
    return jax.tree_util.tree_unflatten(treedef, [conv(c, where + str(k)) for (k, c) in kids])


def save(tree: Any, path: str, format: str | None = None, *, overwrite: bool = True) -> None:
    """Write `tree` to `path`; see `treetool.io.save`."""
    from treetool.io._atomic import atomic_write

    fmt = _format_of(path, format)
    if os.path.isdir(path):
        raise SaveError(f"{path}: is a folder; not replaced")
    if fmt == "pickle":
        try:
            data = _materialize(tree, path)
        except RecursionError:
            raise SaveError(_TOO_DEEP_TO_PICKLE.format(path=path)) from None
        with atomic_write(path, overwrite=overwrite) as fh:
            _pickle(data, fh, path)
        return
    if fmt == "equinox":
        leaves = _eqx_leaves(tree, path)
        with atomic_write(path, overwrite=overwrite) as fh:
            for x in leaves:
                np.save(fh, x, allow_pickle=False)
        return
    tensors, meta = _tensors_and_record(tree, path, npz=fmt == "npz")
    if fmt == "safetensors":
        from treetool.io.safetensors import write

        write(tensors, path, meta, overwrite=overwrite)
        return
    arrays: dict[str, Any] = {k: np.asarray(v) for k, v in tensors.items()}
    arrays[NPZ_RECORD] = np.frombuffer(meta[RECORD_KEY].encode(), np.uint8)
    with atomic_write(path, overwrite=overwrite) as fh:
        try:
            np.savez(fh, **arrays)
        except (ValueError, TypeError) as e:
            raise SaveError(f"{path}: npz cannot store the tree: {e}") from None


_TOO_DEEP_TO_PICKLE = (
    "{path}: the tree is nested too deeply to pickle (Python's recursion limit); save it as "
    "safetensors, which stores flat key paths"
)


def _pickle(data: Any, fh: Any, path: str) -> None:
    try:
        pickle.dump(data, fh, protocol=pickle.HIGHEST_PROTOCOL)
    except RecursionError:
        # both the walk here and the pickler recurse once per level
        raise SaveError(_TOO_DEEP_TO_PICKLE.format(path=path)) from None
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        msg = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise SaveError(
            f"{path}: cannot pickle the tree ({msg}); save it as .safetensors, .npz or .eqx, "
            "which record functions and classes by name"
        ) from None


def _tensors_and_record(tree: Any, path: str, npz: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """`({name: leaf}, {RECORD_KEY: record JSON})`: the tensors under their dotted names
    (key paths where two would collide), the record naming them."""
    from treetool.io._structure import record, rename

    try:
        pairs, node = record(tree, path)
        names = dotted_names([p for p, _ in pairs])
        if npz and NPZ_RECORD in names:
            names = [str(p) for p, _ in pairs]
        by_keystr = {str(p): n for (p, _), n in zip(pairs, names)}
        tree_record = rename(node, by_keystr)
        text = json.dumps({"version": 1, "tree": tree_record}, separators=(",", ":"))
    except RecursionError:
        if npz:
            raise SaveError(f"{path}: the tree is nested too deeply to record") from None
        return _by_key_paths(tree, path)
    return {n: leaf for n, (_, leaf) in zip(names, pairs)}, {RECORD_KEY: text}


def _by_key_paths(tree: Any, path: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A tree too deep for the structure record (Python's recursion limit) whose leaves are
    all arrays: the tensors under their dotted names and the key path of each
    (`PATHS_KEY`), from which `tt.load` nests them again (walked without recursion)."""
    from treetool._leaves._facts import is_array
    from treetool._tree._views import leaves_with_path
    from treetool.io.safetensors import PATHS_KEY

    pairs = leaves_with_path(tree)
    bad = [str(p) for p, x in pairs if not is_array(x)]
    if bad:
        raise SaveError(
            f"{path}: the tree is nested too deeply to record its non-array leaves "
            f"({bad[0]}{', ...' if len(bad) > 1 else ''})"
        )
    names = dotted_names([p for p, _ in pairs])
    paths = {n: str(p) for (p, _), n in zip(pairs, names)}
    return {n: x for n, (_, x) in zip(names, pairs)}, {PATHS_KEY: json.dumps(paths)}


def _eqx_leaves(tree: Any, path: str) -> list[Any]:
    """The arrays `eqx.tree_serialise_leaves` writes, in its order: every array leaf (read
    if lazy) and Python bool/int/float/complex (as `jnp.save` stores them); other leaves are
    not written, as equinox skips them."""
    import jax

    out = []
    for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]:
        where = jax.tree_util.keystr(p)
        if isinstance(x, Opaque | GlobalRef) or type(x) is OpaqueFunction:
            continue
        if is_key(x):
            raise SaveError(
                f"{path}: {where} is a typed PRNG key array; save its key data "
                "(jax.random.key_data) first"
            )
        if isinstance(x, LazyArray | np.ndarray | np.generic):
            out.append(np.asarray(x))
        elif is_array(x) or isinstance(x, bool | int | float | complex):
            import jax.numpy as jnp

            out.append(np.asarray(jnp.asarray(x)))
    return out
