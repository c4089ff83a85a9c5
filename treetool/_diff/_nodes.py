"""How a diff names and describes a node, and compares a custom node's static (aux) data.

`_diff`'s walk asks these for the labels of a change (`f32[3]`, `dict[2]`, `Linear`), the
words `explain_mismatch` uses ("a dict with keys [...]"), and the "static" change of a custom
node whose aux data differ (which fields, their values shown without memory addresses, a
function equal to another of the same name).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from treetool._diff._compare import leaf_label, no_address
from treetool._leaves._callables import callable_identity, same_callable
from treetool._paths._path import DictKey, GetAttrKey
from treetool._tree._model import CUSTOM, LEAF, LIST, TUPLE, node_data
from treetool._typetests import is_opaque

__all__ = ["_SEQUENCES", "_describe", "_node_label", "_static_change", "dict_like"]

_SEQUENCES = (LIST, TUPLE)


def dict_like(obj: Any, kind: str, kids: list) -> bool:
    """Whether a node is a mapping compared by keys and values: a `dict`, an `OrderedDict`
    (torch's state dicts with `_metadata` too), a `defaultdict`, or a custom node that is a
    `Mapping` keyed by its keys (flax `FrozenDict`, an `Opaque` one read from a file).

    Example:
        >>> import collections
        >>> dict_like(collections.OrderedDict(a=1), "dict", [])
        True
    """
    if kind == "dict":
        return True
    if kind != CUSTOM or not all(type(k) is DictKey for k, _ in kids):
        return False
    if is_opaque(obj):
        return bool(kids)
    import collections.abc

    return isinstance(obj, collections.abc.Mapping)


def _node_label(obj: Any, kind: str, kids: list) -> str:
    """`f32[3]` for a leaf, `list[3]`, `dict[2]`, `Linear`, `None` for nodes."""
    if kind == LEAF:
        return leaf_label(obj)
    if kind == "none":
        return "None"
    name = getattr(obj, "class_name", None) if is_opaque(obj) else None
    name = name or type(obj).__name__
    if kind in _SEQUENCES or kind == "dict":
        return f"{name}[{len(kids)}]"
    return name


def _describe(obj: Any, kind: str, kids: list) -> str:
    """What a side has at a path, as `explain_mismatch` words it."""
    if kind == LEAF:
        return f"a leaf {leaf_label(obj)}"
    if kind == "none":
        return "None (a node with no children)"
    label = _node_label(obj, kind, [])
    if kind == "dict":
        keys = [k.key for k, _ in kids]
        return f"a {type(obj).__name__} with keys {keys!r}"
    if kind in _SEQUENCES:
        return f"a {type(obj).__name__} of {len(kids)} children"
    return f"a {label} node with {len(kids)} children"


def _static_names(obj: Any, kids: list) -> list[str]:
    child_names = {k.name for k, _ in kids if isinstance(k, GetAttrKey)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = [f.name for f in dataclasses.fields(obj)]
    elif is_opaque(obj):
        names = [n for n in getattr(obj, "fields", {}) if isinstance(n, str)]
    else:
        names = []
    return [n for n in names if n not in child_names]


def _static_change(a: Any, b: Any, kids_a: list) -> tuple[str, Any, Any, dict] | None:
    """`("static", {field: a's}, {field: b's}, {"fields": [...]})` when aux data differ."""
    if type(a) is not type(b):
        return None  # an Opaque against a live object: their aux data are not comparable
    da, db = node_data(a), node_data(b)
    if da is None or db is None or _equal(da[1], db[1]):
        return None
    before, after = {}, {}
    for n in _static_names(a, kids_a):
        va, vb = getattr(a, n, None), getattr(b, n, None)
        if not _equal(va, vb):
            before[n], after[n] = _static_value(va), _static_value(vb)
    name = _node_label(a, CUSTOM, [])
    if not before:
        if _aux_equal(da[1], db[1]):  # they differ only by functions of one name
            return None
        ra, rb = no_address(repr(da[1])), no_address(repr(db[1]))
        return "static", ra, rb, {"fields": [], "type": name}
    return "static", before, after, {"fields": list(before), "type": name}


def _aux_equal(x: Any, y: Any, depth: int = 0) -> bool:
    """Aux data equal, a function equal to another of the same name (nested tuples, dicts)."""
    if depth < 8 and type(x) is type(y) and isinstance(x, tuple | list) and len(x) == len(y):
        return all(_aux_equal(a, b, depth + 1) for a, b in zip(x, y))
    if depth < 8 and type(x) is dict and type(y) is dict and x.keys() == y.keys():
        return all(_aux_equal(x[k], y[k], depth + 1) for k in x)
    return _equal(x, y)


def _static_value(x: Any) -> Any:
    """A static field's value as a change shows it: a function by its label, no addresses."""
    f = callable_identity(x)
    if f is not None:
        return f[3]
    if x is None or isinstance(x, bool | int | float | str):
        return x
    try:
        r = repr(x)
    except Exception:
        return type(x).__name__
    return no_address(r) if " at 0x" in r else x


def _equal(x: Any, y: Any) -> bool:
    if x is y:
        return True
    fx = callable_identity(x)
    if fx is not None:
        fy = callable_identity(y)
        if fy is not None:
            return same_callable(fx, fy)
    try:
        return bool(x == y)
    except Exception:  # arrays as static data, or == that raises
        pass
    try:
        import numpy as np

        return bool(np.array_equal(np.asarray(x), np.asarray(y)))
    except Exception:
        return False
