"""`tt.save`: write a pytree of arrays as safetensors, npz or pickle."""

from __future__ import annotations

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

__all__ = ["save"]

_EXT = {".safetensors": "safetensors", ".npz": "npz", ".pkl": "pickle", ".pickle": "pickle"}


def _format_of(path: str, format: str | None) -> str:
    if format is not None:
        if format not in ("safetensors", "npz", "pickle"):
            raise SaveError(
                f"{path}: cannot save as {format!r}; use 'safetensors', 'npz' or 'pickle'"
            )
        return format
    ext = os.path.splitext(path)[1].lower()
    if ext not in _EXT:
        raise SaveError(
            f"{path}: cannot tell the format from the extension {ext or '(none)'!r}; "
            "pass format='safetensors', 'npz' or 'pickle'"
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


def dotted_names(paths: list[Any]) -> list[str]:
    """The names `tt.save` gives tensors in safetensors: `encoder.layers.0.weight`.

    That is the form other tools (Hugging Face, `safetensors.flax`) write and expect. When two
    paths would get one name (`{"a.b": x, "a": {"b": y}}`) or a name would be empty (a lone
    leaf), every name is the key path itself (`['a.b']`).
    """
    names = [".".join(str(k.text) for k in p) for p in paths]
    if len(set(names)) != len(names) or not all(names):
        return [str(p) for p in paths]
    return names


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


def save(tree: Any, path: str, format: str | None = None) -> None:
    """Write `tree` to `path`; see `treetool.io.save`."""
    fmt = _format_of(path, format)
    if fmt == "pickle":
        opened = False
        try:
            data = _materialize(tree, path)
            with open(path, "wb") as fh:
                opened = True
                pickle.dump(data, fh, protocol=pickle.HIGHEST_PROTOCOL)
        except RecursionError:
            # both the walk here and the pickler recurse once per level
            if opened:
                os.unlink(path)  # a partial pickle
            raise SaveError(
                f"{path}: the tree is nested too deeply to pickle (Python's recursion limit); "
                "save it as safetensors or npz, which store flat key paths"
            ) from None
        return
    if fmt == "safetensors":
        import json

        from treetool.io.safetensors import PATHS_KEY, write

        pairs = _flat_paths(tree, path, arrays_only=True)
        names = dotted_names([p for p, _ in pairs])
        keystrs = {name: str(p) for name, (p, _) in zip(names, pairs)}
        meta = {PATHS_KEY: json.dumps(keystrs, separators=(",", ":"))}
        write({name: leaf for name, (_, leaf) in zip(names, pairs)}, path, meta)
        return
    flat = _flat(tree, path, arrays_only=True)
    # Any: numpy's stub types savez's keyword `allow_pickle`, which a keystr name never is
    arrays: dict[str, Any] = {k: np.asarray(v) for k, v in flat.items()}
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
