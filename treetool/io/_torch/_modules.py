"""A pickled `nn.Module` (`torch.save(model)`) or a TorchScript archive (`torch.jit.save`)
read under the names of its `state_dict()`.

Such a file pickles the module's `__dict__`: `_parameters`, `_buffers`, `_modules`, a dozen
hook dicts and flags, or (TorchScript) the attributes of its compiled class. What a torch user
expects is what `model.state_dict()` gives: `0.weight`, `0.bias`, `2.weight`. `state_dicts`
replaces every module it finds in the tree (at the top or inside a dict, a list...) by that
mapping: its own parameters, then its persistent buffers, then each submodule's under
`<name>.`; hooks and bookkeeping are hidden. Nothing is run: the module stays a record of
what the file says (`raw=True` shows it as it is).

Example:
    >>> from treetool.io._opaque import Opaque
    >>> lin = Opaque("torch.nn.modules.linear.Linear", state={
    ...     "training": True, "_parameters": {"weight": 1.0, "bias": None},
    ...     "_buffers": {}, "_non_persistent_buffers_set": set(), "_modules": {},
    ...     "_forward_hooks": {}, "in_features": 3})
    >>> seq = Opaque("torch.nn.modules.container.Sequential", state={
    ...     "_parameters": {}, "_buffers": {}, "_modules": {"0": lin, "1": None}})
    >>> tree, roots = state_dicts({"model": seq, "epoch": 3})
    >>> dict(tree["model"]), tree["epoch"], roots
    ({'0.weight': 1.0}, 3, ['torch.nn.modules.container.Sequential'])
"""

from __future__ import annotations

import collections
from typing import Any

from treetool._leaves._lazy_array import LazyArray
from treetool.io._opaque import Opaque

__all__ = ["is_module", "state_dicts"]

_EAGER = ("_parameters", "_buffers", "_modules")
_DEPTH = 256  # modules nested deeper than this stay as they are (the budget checked the file)


def is_module(x: Any) -> bool:
    """An `nn.Module` as pickled: eager (its state holds `_parameters`, `_buffers` and
    `_modules` dicts) or scripted (a `__torch__.` class whose state is a dict)."""
    if type(x) is not Opaque:
        return False
    state = x.fields
    if all(isinstance(state.get(k), dict) for k in _EAGER):
        return True
    return x.class_path.startswith("__torch__.") and bool(state)


def _is_tensor(x: Any) -> bool:
    return isinstance(x, LazyArray) or (
        type(x) is Opaque and x.class_path.startswith("torch.Tensor[")
    )


def _collect(m: Opaque, prefix: str, out: dict[str, Any], depth: int) -> None:
    state = m.fields
    if all(isinstance(state.get(k), dict) for k in _EAGER):
        skip = state.get("_non_persistent_buffers_set")
        hidden = set(skip) if isinstance(skip, (set, frozenset, list, tuple)) else set()
        for name, v in state["_parameters"].items():
            if v is not None:
                out[f"{prefix}{name}"] = v
        for name, v in state["_buffers"].items():
            if v is not None and name not in hidden:
                out[f"{prefix}{name}"] = v
        children = [(n, c) for n, c in state["_modules"].items() if c is not None]
    else:  # TorchScript: tensors of this module, then its submodules, in the file's order
        for name, v in state.items():
            if _is_tensor(v):
                out[f"{prefix}{name}"] = v
        children = [(n, c) for n, c in state.items() if is_module(c)]
    for name, child in children:
        if is_module(child) and depth < _DEPTH:
            _collect(child, f"{prefix}{name}.", out, depth + 1)


def state_dicts(tree: Any) -> tuple[Any, list[str]]:
    """`tree` with each module in it replaced by its state_dict (an `OrderedDict`, as
    `model.state_dict()` is), and the class paths of the modules replaced (outermost ones).
    Builtin containers are rebuilt where a module lies below them; the rest is kept."""
    roots: list[str] = []
    memo: dict[int, Any] = {}

    def go(x: Any, depth: int) -> Any:
        if is_module(x):
            out: dict[str, Any] = collections.OrderedDict()
            _collect(x, "", out, 0)
            roots.append(x.class_path)
            return out
        t = type(x)
        if depth > _DEPTH or t not in (dict, collections.OrderedDict, list, tuple):
            return x
        got = memo.get(id(x))
        if got is not None:
            return got
        if t is list or t is tuple:
            items = [go(v, depth + 1) for v in x]
            new: Any = x if all(a is b for a, b in zip(items, x)) else t(items)
        else:
            pairs = [(k, go(v, depth + 1)) for k, v in x.items()]
            new = x if all(v is x[k] for k, v in pairs) else t(pairs)
        memo[id(x)] = new
        return new

    return go(tree, 0), list(dict.fromkeys(roots))
