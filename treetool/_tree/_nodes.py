"""Registering custom node classes with jax, with key paths and static fields.

`@pytree_node` turns a class into a dataclass pytree whose key paths are `.field`; fields
declared with `static()` are aux data (part of the structure, not leaves). `register_node`
does the same for classes you don't own. Registering again is safe: the same class with the
same fields is a no-op, and a class redefined by re-running a notebook cell is a new class
that replaces the old entry in `registered_nodes()`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from treetool._errors import TreetoolError
from treetool._public import set_module

__all__ = ["NodeTypeInfo", "pytree_node", "register_node", "registered_nodes", "static"]

T = TypeVar("T", bound=type)

_STATIC = "treetool_static"


@set_module("treetool")
@dataclass(frozen=True)
class NodeTypeInfo:
    """A class registered through treetool: its data (child) fields and static (aux) fields."""

    cls: type
    data_fields: tuple[str, ...]
    static_fields: tuple[str, ...]

    @property
    def name(self) -> str:
        """`module.QualName` of the class."""
        return f"{self.cls.__module__}.{self.cls.__qualname__}"


# (module, qualname) -> info; a redefined class replaces its stale predecessor.
_REGISTRY: dict[tuple[str, str], NodeTypeInfo] = {}
_BY_CLASS: dict[type, NodeTypeInfo] = {}


@set_module("treetool")
def static(default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    """A dataclass field that is static: stored in the treedef, never a leaf.

    Example:
        >>> import treetool as tt
        >>> @tt.pytree_node
        ... class Dense:
        ...     w: list
        ...     activation: str = tt.static(default="relu")
        >>> import jax
        >>> jax.tree_util.tree_leaves(Dense([1.0, 2.0]))
        [1.0, 2.0]
    """
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata[_STATIC] = True
    return dataclasses.field(default=default, metadata=metadata, **kwargs)


@set_module("treetool")
def pytree_node(cls: T | None = None, *, frozen: bool = False) -> Any:
    """Make a class a dataclass pytree with `.field` key paths; `static()` fields are aux data.

    Use as `@pytree_node` or `@pytree_node(frozen=True)`. A class that is already a dataclass
    keeps its own dataclass options.

    Example:
        >>> import treetool as tt, numpy as np
        >>> @tt.pytree_node
        ... class Block:
        ...     weight: np.ndarray
        ...     bias: np.ndarray
        ...     name: str = tt.static(default="block")
        >>> b = Block(np.ones((2, 2)), np.zeros(2))
        >>> [str(p) for p, _ in tt.leaves_with_path(b)]
        ['.weight', '.bias']
    """

    def wrap(c: T) -> T:
        if not dataclasses.is_dataclass(c):
            c = cast(T, dataclasses.dataclass(frozen=frozen)(c))  # the same class, now a dataclass
        fields = [f for f in dataclasses.fields(c)]
        data = [f.name for f in fields if not f.metadata.get(_STATIC)]
        stat = [f.name for f in fields if f.metadata.get(_STATIC)]
        register_node(c, data_fields=data, static_fields=stat)
        return c

    return wrap if cls is None else wrap(cls)


@set_module("treetool")
def register_node(
    cls: type,
    data_fields: Sequence[str],
    static_fields: Sequence[str] = (),
    *,
    init: Callable[..., Any] | None = None,
) -> type:
    """Register a class you don't own as a pytree node with `.field` key paths.

    Children are the `data_fields` attributes, in that order; `static_fields` are aux data.
    Unflattening makes a new instance without calling `__init__` (or calls `init(**fields)`
    when given). Registering the same class again with the same fields does nothing.

    Example:
        >>> import treetool as tt
        >>> class Pair:
        ...     def __init__(self, a, b, tag="p"):
        ...         self.a, self.b, self.tag = a, b, tag
        >>> _ = tt.register_node(Pair, ["a", "b"], ["tag"])
        >>> _ = tt.register_node(Pair, ["a", "b"], ["tag"])  # again: fine
        >>> [str(p) for p, _ in tt.leaves_with_path(Pair(1, 2))]
        ['.a', '.b']
    """
    import jax

    data = tuple(data_fields)
    stat = tuple(static_fields)
    if not isinstance(cls, type):
        raise TypeError(f"register_node expects a class, got {cls!r}")
    overlap = set(data) & set(stat)
    if overlap:
        raise TreetoolError(
            f"register_node({cls.__qualname__}): {sorted(overlap)} cannot be both data and static fields"
        )
    info = NodeTypeInfo(cls, data, stat)
    old = _BY_CLASS.get(cls)
    if old is not None:
        if old == info:
            return cls
        raise TreetoolError(
            f"{info.name} is already registered with data fields {list(old.data_fields)} and "
            f"static fields {list(old.static_fields)}; jax cannot change a registration: "
            "redefine the class (re-run its cell) to register it differently"
        )
    get_keys = [jax.tree_util.GetAttrKey(n) for n in data]

    def flatten_with_keys(obj: Any) -> tuple[list[tuple[Any, Any]], tuple]:
        return [(k, getattr(obj, n)) for k, n in zip(get_keys, data)], tuple(
            getattr(obj, n) for n in stat
        )

    def flatten(obj: Any) -> tuple[list[Any], tuple]:
        return [getattr(obj, n) for n in data], tuple(getattr(obj, n) for n in stat)

    def unflatten(aux: tuple, children: Any) -> Any:
        values = dict(zip(data, children))
        values.update(zip(stat, aux))
        if init is not None:
            return init(**values)
        obj: Any = object.__new__(cls)
        for k, v in values.items():
            object.__setattr__(obj, k, v)
        return obj

    try:
        jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    except ValueError as e:
        raise TreetoolError(
            f"{info.name} is already registered with jax by other code, not by treetool: {e}"
        ) from None
    _BY_CLASS[cls] = info
    _REGISTRY[(cls.__module__, cls.__qualname__)] = info
    return cls


@set_module("treetool")
def registered_nodes() -> list[NodeTypeInfo]:
    """The classes registered through treetool (the latest definition of each), by name.

    Example:
        >>> import treetool as tt
        >>> @tt.pytree_node
        ... class Cfg:
        ...     lr: float
        >>> any(i.cls is Cfg for i in tt.registered_nodes())
        True
    """
    return sorted(_REGISTRY.values(), key=lambda i: i.name)
