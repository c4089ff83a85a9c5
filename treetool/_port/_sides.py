"""The two sides of a port as lists of `Leaf`: the source's entries and the target's leaves."""

from __future__ import annotations

import os
from typing import Any

from treetool._paths._path import Path
from treetool._port._conventions import layout, out_axis
from treetool._port._names import Leaf, dropped_reason, fused_parts

__all__ = ["Side", "read_source", "source_side", "state_hint", "target_side"]


class Side:
    """A side's leaves (fused ones split into parts), its arrays by name, and what it drops."""

    def __init__(self) -> None:
        self.leaves: list[Leaf] = []
        self.arrays: dict[str, Any] = {}  # real name -> the array (source) or leaf (target)
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.dtypes: dict[str, str] = {}
        self.dropped: dict[str, str] = {}  # name -> reason
        self.order: list[str] = []  # every real name, in the tree's order


def _is_array(x: Any) -> bool:
    shape = getattr(x, "shape", None)
    return isinstance(shape, tuple) and hasattr(x, "dtype") and not isinstance(x, type)


def _dtype_name(x: Any) -> str:
    name = getattr(x, "dtype_name", None)
    return name if isinstance(name, str) else str(getattr(x.dtype, "name", x.dtype))


def read_source(source: Any) -> Any:
    """A file name, URL or sharded index read with `tt.load` (lazily); a tree as it is."""
    if isinstance(source, str | os.PathLike):
        from treetool.io import load

        return load(os.fspath(source))
    return source


def _add(
    side: Side, name: str, keys: tuple[str, ...], x: Any, split_fused: bool, lay: str = ""
) -> None:
    shape = tuple(int(d) for d in x.shape)
    side.arrays[name] = x
    side.shapes[name] = shape
    side.dtypes[name] = _dtype_name(x)
    side.order.append(name)
    lay = lay or layout(keys, len(shape))
    fused = fused_parts(keys) if split_fused else None
    if fused is not None:
        parts, part_keys = fused
        axis = out_axis(lay, len(shape))
        n = len(parts)
        if shape and shape[axis] % n == 0:
            sub = tuple(d // n if k == axis else d for k, d in enumerate(shape))
            for i, pk in enumerate(part_keys):
                side.leaves.append(Leaf(name, pk, sub, side.dtypes[name], lay, (axis, i, n)))
            return
    side.leaves.append(Leaf(name, keys, shape, side.dtypes[name], lay))


def source_side(tree: Any) -> Side:
    """The source's entries: names are dotted (`layers.0.weight`, as torch and Hugging Face
    write them), unless two paths would share one, then key paths."""
    from treetool._tree._views import leaves_with_path

    side = Side()
    pairs = [(p, x) for p, x in leaves_with_path(tree) if _is_array(x)]
    keys = [tuple(part for k in p for part in k.text.split(".")) for p, _ in pairs]
    names = [".".join(k) for k in keys]
    if len(set(names)) != len(names) or not all(names):
        names = [str(p) for p, _ in pairs]
    for name, ks, (_, x) in zip(names, keys, pairs):
        reason = dropped_reason(ks, tuple(x.shape))
        if reason is not None:
            side.dropped[name] = reason
            side.order.append(name)
            side.shapes[name] = tuple(x.shape)
            continue
        _add(side, name, ks, x, split_fused=True)
    return side


def target_side(tree: Any) -> tuple[Side, list[Path]]:
    """The target's array leaves (named by keystr) and the paths of all its leaves."""
    from treetool._tree._views import leaves_with_path

    side = Side()
    paths = []
    ct = _eqx_conv_transpose_weights(tree)
    stats, kept = _eqx_state_stats(tree)
    for p, x in leaves_with_path(tree):
        paths.append(p)
        if _is_array(x) and id(x) not in kept:
            ks = stats.get(id(x)) or tuple(part for k in p for part in k.text.split("."))
            lay = "ct_oi" if id(x) in ct and len(x.shape) >= 3 else ""
            _add(side, str(p), ks, x, split_fused=True, lay=lay)
    return side, paths


def _eqx_conv_transpose_weights(tree: Any) -> set[int]:
    """The ids of the weights of the equinox `ConvTranspose` modules in `tree` (their layout
    `(O, I, *k)` is not told by their names)."""
    import sys

    eqx = sys.modules.get("equinox")
    if eqx is None:  # no equinox module can be in the tree
        return set()
    import jax

    cls = eqx.nn.ConvTranspose
    mods = jax.tree_util.tree_leaves(tree, is_leaf=lambda m: isinstance(m, cls))
    return {id(m.weight) for m in mods if isinstance(m, cls)}


def _key_text(k: Any) -> str:
    for attr in ("name", "key", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def _eqx_state_stats(tree: Any) -> tuple[dict[int, tuple[str, ...]], set[int]]:
    """For a target holding an equinox `State` (`(model, state)`): the ids of the running
    statistics of each `BatchNorm` in it, named as if the module kept them
    (`bn.mean`, `bn.var`), and the ids of the state's own counters (kept as they are)."""
    import sys

    eqx = sys.modules.get("equinox")
    if eqx is None:
        return {}, set()
    import jax

    def is_node(m: Any) -> bool:
        return isinstance(m, eqx.nn.BatchNorm | eqx.nn.State)

    found = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_node)[0]
    states = [m for _, m in found if isinstance(m, eqx.nn.State)]
    bns = [(p, m) for p, m in found if isinstance(m, eqx.nn.BatchNorm)]
    named: dict[int, tuple[str, ...]] = {}
    kept: set[int] = set()
    for state in states:
        for path, bn in bns:
            keys = tuple(part for k in path for part in _key_text(k).split("."))
            index = getattr(bn, "ema_state_index", None) or getattr(bn, "batch_state_index", None)
            counter = getattr(bn, "ema_first_time_index", None) or getattr(
                bn, "batch_counter", None
            )
            try:
                mean, var = state.get(index)
                if counter is not None:
                    kept.add(id(state.get(counter)))
            except (KeyError, TypeError, ValueError):  # not this state's BatchNorm
                continue
            named[id(mean)] = (*keys, "mean")
            named[id(var)] = (*keys, "var")
    return named, kept


STATE_HINT = (
    "the target's equinox BatchNorm keeps its running statistics in an eqx.nn.State, not in "
    "the module: port into (model, state) from eqx.nn.make_with_state"
)


def state_hint(tree: Any) -> str | None:
    """`STATE_HINT` when `tree` holds an equinox `BatchNorm` but no `State`; else None."""
    import sys

    eqx = sys.modules.get("equinox")
    if eqx is None:
        return None
    import jax

    def is_node(m: Any) -> bool:
        return isinstance(m, eqx.nn.BatchNorm | eqx.nn.State)

    nodes = jax.tree_util.tree_leaves(tree, is_leaf=is_node)
    if any(isinstance(m, eqx.nn.BatchNorm) for m in nodes) and not any(
        isinstance(m, eqx.nn.State) for m in nodes
    ):
        return STATE_HINT
    return None
