"""treetool: the microscope and the scalpel for JAX pytrees.

Everything public is importable from here. `import treetool` is cheap: it imports neither jax
nor textual; each name below is loaded from its module the first time it is used.

Example:
    >>> import treetool as tt
    >>> tree = {"w": [1.0, 2.0], "b": None}
    >>> [str(p) for p, _ in tt.leaves_with_paths(tree)]
    ["['w'][0]", "['w'][1]"]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._errors import LoadError as LoadError
from ._errors import PathError as PathError
from ._errors import SaveError as SaveError
from ._errors import SelectionError as SelectionError
from ._errors import StatsError as StatsError
from ._errors import StructureMismatch as StructureMismatch
from ._errors import TreetoolError as TreetoolError
from ._errors import UnsafeError as UnsafeError

if TYPE_CHECKING:
    # The names `__getattr__` loads on first use, imported for type checkers and editors only
    # (so that `tt.load` has its real signature); tests/test_typecheck.py keeps them in sync.
    from ._arrays import LazyArray as LazyArray
    from ._arrays import LeafInfo as LeafInfo
    from ._arrays import Stats as Stats
    from ._arrays import is_key as is_key
    from ._arrays import leaf_info as leaf_info
    from ._arrays import stats as stats
    from ._callables import OpaqueFunction as OpaqueFunction
    from ._devices import DeviceUsage as DeviceUsage
    from ._devices import LeafPlacement as LeafPlacement
    from ._devices import Placement as Placement
    from ._devices import placement as placement
    from ._diff import Change as Change
    from ._diff import TreeDiff as TreeDiff
    from ._diff import diff as diff
    from ._explain import explain as explain
    from ._explain import explain_mismatch as explain_mismatch
    from ._jaxpr import JaxprView as JaxprView
    from ._jaxpr import jaxpr as jaxpr
    from ._model import Node as Node
    from ._model import NodeError as NodeError
    from ._model import view as view
    from ._nodes import NodeTypeInfo as NodeTypeInfo
    from ._nodes import pytree_node as pytree_node
    from ._nodes import register_node as register_node
    from ._nodes import registered_nodes as registered_nodes
    from ._nodes import static as static
    from ._paths import Path as Path
    from ._port import port as port
    from ._prng import KeyArray as KeyArray
    from ._summary import Summary as Summary
    from ._summary import summary as summary
    from ._surgery import Selection as Selection
    from ._surgery import combine as combine
    from ._surgery import delete as delete
    from ._surgery import insert as insert
    from ._surgery import partition as partition
    from ._surgery import rename as rename
    from ._surgery import select as select
    from ._surgery import tree_at as tree_at
    from ._transforms import auto_vmap as auto_vmap
    from ._transforms import autojit as autojit
    from ._transforms import batch_axes as batch_axes
    from ._transforms import split_keys as split_keys
    from ._views import flatten as flatten
    from ._views import from_flat_dict as from_flat_dict
    from ._views import get as get
    from ._views import leaves_with_paths as leaves_with_paths
    from ._views import nonfinite as nonfinite
    from ._views import to_flat_dict as to_flat_dict
    from ._views import unflatten as unflatten
    from .io import Opaque as Opaque
    from .io import load as load
    from .io import materialize as materialize
    from .io import save as save
    from .render import render as render
    from .show import show as show

__version__ = "0.1.0"

# name -> module that defines it; resolved on first use (PEP 562).
_LAZY: dict[str, str] = {
    # paths, views
    "Path": "treetool._paths",
    "leaves_with_paths": "treetool._views",
    "flatten": "treetool._views",
    "unflatten": "treetool._views",
    "to_flat_dict": "treetool._views",
    "from_flat_dict": "treetool._views",
    "get": "treetool._views",
    "summary": "treetool._summary",
    "Summary": "treetool._summary",
    "nonfinite": "treetool._views",
    "view": "treetool._model",
    "Node": "treetool._model",
    "NodeError": "treetool._model",
    # custom nodes
    "pytree_node": "treetool._nodes",
    "static": "treetool._nodes",
    "register_node": "treetool._nodes",
    "registered_nodes": "treetool._nodes",
    "NodeTypeInfo": "treetool._nodes",
    # diff
    "diff": "treetool._diff",
    "TreeDiff": "treetool._diff",
    "Change": "treetool._diff",
    "explain_mismatch": "treetool._explain",
    "explain": "treetool._explain",
    # surgery
    "tree_at": "treetool._surgery",
    "select": "treetool._surgery",
    "Selection": "treetool._surgery",
    "insert": "treetool._surgery",
    "rename": "treetool._surgery",
    "delete": "treetool._surgery",
    "partition": "treetool._surgery",
    "combine": "treetool._surgery",
    # arrays, devices, jaxprs
    "leaf_info": "treetool._arrays",
    "LeafInfo": "treetool._arrays",
    "stats": "treetool._arrays",
    "Stats": "treetool._arrays",
    "LazyArray": "treetool._arrays",
    "is_key": "treetool._arrays",
    "KeyArray": "treetool._prng",
    "placement": "treetool._devices",
    "Placement": "treetool._devices",
    "LeafPlacement": "treetool._devices",
    "DeviceUsage": "treetool._devices",
    "jaxpr": "treetool._jaxpr",
    "JaxprView": "treetool._jaxpr",
    # files
    "load": "treetool.io",
    "save": "treetool.io",
    "materialize": "treetool.io",
    "Opaque": "treetool.io",
    "OpaqueFunction": "treetool._callables",
    # display
    "show": "treetool.show",
    "render": "treetool.render",
    # porting between frameworks
    "port": "treetool._port",
    # transformations
    "batch_axes": "treetool._transforms",
    "auto_vmap": "treetool._transforms",
    "autojit": "treetool._transforms",
    "split_keys": "treetool._transforms",
}

__all__ = [
    "LoadError",
    "PathError",
    "SaveError",
    "SelectionError",
    "StatsError",
    "StructureMismatch",
    "TreetoolError",
    "UnsafeError",
    *_LAZY,
]


if not TYPE_CHECKING:  # hidden from type checkers, so that `tt.misspelt` is an error there

    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'treetool' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
