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
from typing import Any

from ._errors import LoadError as LoadError
from ._errors import PathError as PathError
from ._errors import SaveError as SaveError
from ._errors import SelectionError as SelectionError
from ._errors import StructureMismatch as StructureMismatch
from ._errors import TreetoolError as TreetoolError
from ._errors import UnsafeError as UnsafeError
from ._paths import Path as Path

__version__ = "0.1.0"

# name -> module that defines it; resolved on first use (PEP 562).
_LAZY: dict[str, str] = {
    # views
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
    # transformations
    "batch_axes": "treetool._transforms",
    "auto_vmap": "treetool._transforms",
    "autojit": "treetool._transforms",
    "split_keys": "treetool._transforms",
}

__all__ = [
    "LoadError",
    "Path",
    "PathError",
    "SaveError",
    "SelectionError",
    "StructureMismatch",
    "TreetoolError",
    "UnsafeError",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'treetool' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
