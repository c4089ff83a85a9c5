"""treetool: the microscope and the scalpel for JAX pytrees.

Everything public is importable from here. `import treetool` is cheap: it imports neither jax
nor textual; each name below is loaded from its module the first time it is used.

Example:
    >>> import treetool as tt
    >>> tree = {"w": [1.0, 2.0], "b": None}
    >>> [str(p) for p, _ in tt.leaves_with_path(tree)]
    ["['w'][0]", "['w'][1]"]

Beside the tree product at `tt.*`, three public namespaces: `treetool.io` (files: `read`,
`detect`, the formats), `treetool.sharding` (`placement` and its results) and
`treetool.transforms` (`batch_axes`, `auto_vmap`, `autojit`, `split_keys`); their names are
also at `tt.*`, and each object's `__module__` is its namespace's (`tt.placement.__module__ ==
"treetool.sharding"`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treetool._errors import LoadError as LoadError
from treetool._errors import PathError as PathError
from treetool._errors import SaveError as SaveError
from treetool._errors import SelectionError as SelectionError
from treetool._errors import StatsError as StatsError
from treetool._errors import StructureMismatch as StructureMismatch
from treetool._errors import TreetoolError as TreetoolError
from treetool._errors import UnsafeError as UnsafeError
from treetool._public import lazy_names

if TYPE_CHECKING:
    # Generated from `_LAZY` (below) by `python tests/project/test_typecheck.py`: the
    # names loaded on first use, imported for type checkers and editors only.
    from treetool._diff._explain import explain as explain
    from treetool._diff._explain import explain_mismatch as explain_mismatch
    from treetool._diff._tree_diff import Change as Change
    from treetool._diff._tree_diff import TreeDiff as TreeDiff
    from treetool._diff._tree_diff import diff as diff
    from treetool._display._render import render as render
    from treetool._display._show import show as show
    from treetool._jaxpr._view import JaxprView as JaxprView
    from treetool._jaxpr._view import jaxpr as jaxpr
    from treetool._leaves._arrays import LazyArray as LazyArray
    from treetool._leaves._arrays import LeafInfo as LeafInfo
    from treetool._leaves._arrays import Stats as Stats
    from treetool._leaves._arrays import is_key as is_key
    from treetool._leaves._arrays import leaf_info as leaf_info
    from treetool._leaves._arrays import stats as stats
    from treetool._leaves._callables import OpaqueFunction as OpaqueFunction
    from treetool._leaves._prng import KeyArray as KeyArray
    from treetool._paths._path import Path as Path
    from treetool._port import port as port
    from treetool._summary._summary import Summary as Summary
    from treetool._summary._summary import summary as summary
    from treetool._surgery._select import Selection as Selection
    from treetool._surgery._select import combine as combine
    from treetool._surgery._select import delete as delete
    from treetool._surgery._select import insert as insert
    from treetool._surgery._select import partition as partition
    from treetool._surgery._select import rename as rename
    from treetool._surgery._select import select as select
    from treetool._surgery._select import tree_at as tree_at
    from treetool._tree._model import Node as Node
    from treetool._tree._model import NodeError as NodeError
    from treetool._tree._model import view as view
    from treetool._tree._nodes import NodeTypeInfo as NodeTypeInfo
    from treetool._tree._nodes import pytree_node as pytree_node
    from treetool._tree._nodes import register_node as register_node
    from treetool._tree._nodes import registered_nodes as registered_nodes
    from treetool._tree._nodes import static as static
    from treetool._tree._views import flatten as flatten
    from treetool._tree._views import from_flat_dict as from_flat_dict
    from treetool._tree._views import get as get
    from treetool._tree._views import leaves_with_path as leaves_with_path
    from treetool._tree._views import leaves_with_paths as leaves_with_paths
    from treetool._tree._views import nonfinite as nonfinite
    from treetool._tree._views import to_flat_dict as to_flat_dict
    from treetool._tree._views import unflatten as unflatten
    from treetool.io import Opaque as Opaque
    from treetool.io import load as load
    from treetool.io import materialize as materialize
    from treetool.io import save as save
    from treetool.sharding import DeviceUsage as DeviceUsage
    from treetool.sharding import LeafPlacement as LeafPlacement
    from treetool.sharding import Placement as Placement
    from treetool.sharding import placement as placement
    from treetool.transforms import auto_vmap as auto_vmap
    from treetool.transforms import autojit as autojit
    from treetool.transforms import batch_axes as batch_axes
    from treetool.transforms import split_keys as split_keys

#: name -> the module it is imported from, on first use (PEP 562); the one table of these names:
#: the `if TYPE_CHECKING:` block above is generated from it (tests/project/test_typecheck.py)
_LAZY: dict[str, str] = {
    # paths, views
    "Path": "treetool._paths._path",
    "leaves_with_path": "treetool._tree._views",
    "leaves_with_paths": "treetool._tree._views",  # deprecated alias of leaves_with_path
    "flatten": "treetool._tree._views",
    "unflatten": "treetool._tree._views",
    "to_flat_dict": "treetool._tree._views",
    "from_flat_dict": "treetool._tree._views",
    "get": "treetool._tree._views",
    "summary": "treetool._summary._summary",
    "Summary": "treetool._summary._summary",
    "nonfinite": "treetool._tree._views",
    "view": "treetool._tree._model",
    "Node": "treetool._tree._model",
    "NodeError": "treetool._tree._model",
    # custom nodes
    "pytree_node": "treetool._tree._nodes",
    "static": "treetool._tree._nodes",
    "register_node": "treetool._tree._nodes",
    "registered_nodes": "treetool._tree._nodes",
    "NodeTypeInfo": "treetool._tree._nodes",
    # diff
    "diff": "treetool._diff._tree_diff",
    "TreeDiff": "treetool._diff._tree_diff",
    "Change": "treetool._diff._tree_diff",
    "explain_mismatch": "treetool._diff._explain",
    "explain": "treetool._diff._explain",
    # surgery
    "tree_at": "treetool._surgery._select",
    "select": "treetool._surgery._select",
    "Selection": "treetool._surgery._select",
    "insert": "treetool._surgery._select",
    "rename": "treetool._surgery._select",
    "delete": "treetool._surgery._select",
    "partition": "treetool._surgery._select",
    "combine": "treetool._surgery._select",
    # arrays, devices, jaxprs
    "leaf_info": "treetool._leaves._arrays",
    "LeafInfo": "treetool._leaves._arrays",
    "stats": "treetool._leaves._arrays",
    "Stats": "treetool._leaves._arrays",
    "LazyArray": "treetool._leaves._arrays",
    "is_key": "treetool._leaves._arrays",
    "KeyArray": "treetool._leaves._prng",
    "placement": "treetool.sharding",
    "Placement": "treetool.sharding",
    "LeafPlacement": "treetool.sharding",
    "DeviceUsage": "treetool.sharding",
    "jaxpr": "treetool._jaxpr._view",
    "JaxprView": "treetool._jaxpr._view",
    # files
    "load": "treetool.io",
    "save": "treetool.io",
    "materialize": "treetool.io",
    "Opaque": "treetool.io",
    "OpaqueFunction": "treetool._leaves._callables",
    # display
    "show": "treetool._display._show",
    "render": "treetool._display._render",
    # porting between frameworks
    "port": "treetool._port",
    # transformations
    "batch_axes": "treetool.transforms",
    "auto_vmap": "treetool.transforms",
    "autojit": "treetool.transforms",
    "split_keys": "treetool.transforms",
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


#: the installed distribution's version (its metadata, read on first use)
__version__: str

if not TYPE_CHECKING:  # hidden from type checkers, so that `tt.misspelt` is an error there
    _lazy_getattr, __dir__ = lazy_names(__name__, _LAZY)

    def __getattr__(name: str) -> Any:
        # the installed distribution's version, read from its metadata on first use
        # (importlib.metadata costs ~50 ms of import: not paid by `import treetool`)
        if name == "__version__":
            from treetool._version import version

            return version()
        return _lazy_getattr(name)
