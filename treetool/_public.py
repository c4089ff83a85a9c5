"""`set_module`: a public object names its public module, as jax's `set_module` does.

`tt.Path` is defined in `treetool._paths._path`; decorated with `@set_module("treetool")` its
`__module__` is `treetool`, so reprs (`<class 'treetool.Path'>`), tracebacks, the docs and
pickles name the path a user imports, not the private module that defines it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["lazy_names", "set_module"]

T = TypeVar("T")


def set_module(module: str) -> Callable[[T], T]:
    """A decorator that sets `obj.__module__` to `module`, the public path of `obj`.

    Put it outermost (above `@dataclass` and the like: they read `__module__` while they
    run). doctest looks for examples only among the objects whose `__module__` is the module it
    collects, so the object is also put in its defining module's `__test__`, and its examples
    keep running where they are written.

    Example:
        >>> @set_module("treetool")
        ... class Thing:
        ...     pass
        >>> Thing
        <class 'treetool.Thing'>
    """

    def decorate(obj: T) -> T:
        home = sys.modules.get(getattr(obj, "__module__", ""))
        if home is not None and home.__name__ != module:
            tests: dict[str, Any] = home.__dict__.setdefault("__test__", {})
            tests[getattr(obj, "__qualname__", repr(obj))] = obj
        obj.__module__ = module
        return obj

    return decorate


def lazy_names(
    module: str, table: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` (PEP 562) for a public module whose names are imported on
    first use: `table` maps each name to the module that holds it.

    A name is never bound in the public module (doctest collects a module's objects whose
    `__module__` names it, and would run their examples a second time, in the wrong namespace:
    they run in their defining module, see `set_module`); it is kept in a table of its own.

    Example:
        >>> getattr_, dir_ = lazy_names("mod", {"dumps": "json"})
        >>> getattr_("dumps").__name__, dir_()
        ('dumps', ['dumps'])
        >>> getattr_("nothing")
        Traceback (most recent call last):
        AttributeError: module 'mod' has no attribute 'nothing'
    """
    import importlib

    found: dict[str, Any] = {}

    def __getattr__(name: str) -> Any:
        try:
            return found[name]
        except KeyError:
            pass
        home = table.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}") from None
        value = found[name] = getattr(importlib.import_module(home), name)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module]) if module in sys.modules else ()) | set(table))

    return __getattr__, __dir__
