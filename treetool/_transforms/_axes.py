"""Pytree techniques for transformations: batch axes for vmap, and independent key trees.

`batch_axes` infers vmap's `in_axes` from shapes, `auto_vmap` applies it to every argument
(passing strings, numbers and other non-array leaves through, which vmap cannot take), and
`split_keys` gives a tree of independent PRNG keys shaped like a parameter tree. `autojit`
lives in `_autojit.py` and is re-exported here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from treetool._errors import PathError, TreetoolError
from treetool._leaves._arrays import is_array, is_key, leaf_info, may_be_raw_key
from treetool._leaves._prng import KeyArray
from treetool._paths._path import Path, suggest
from treetool._public import set_module
from treetool._transforms._autojit import AutoJit, CacheInfo, autojit
from treetool._tree._model import IsLeaf

__all__ = [
    "AutoJit",
    "BatchReport",
    "CacheInfo",
    "auto_vmap",
    "autojit",
    "batch_axes",
    "split_keys",
]


# --- batch axes -----------------------------------------------------------------------------


@dataclass
class BatchReport:
    """Why each leaf is or is not batched; `str()` is a readable list.

    Attributes:
        batched: paths mapped over `axis`.
        unbatched: `(path, reason)` for array leaves left alone.
        excluded: `(path, pattern)` for array leaves that `exclude=` kept out.
        overridden: the excluded paths that have `batch_size` on `axis` (batched without it).
        static: paths of non-array leaves (strings, numbers, functions): never batched.
        ambiguous: `(path, reason)` for batched leaves that may be configuration.

    Example:
        >>> import numpy as np
        >>> data = {"x": np.zeros((4, 2)), "cfg": {"table": np.zeros((4, 4)), "act": "relu"}}
        >>> axes, report = batch_axes(data, 4, explain=True)
        >>> print(report)
        batch size 4 on axis 0: 2 batched, 0 not batched, 0 excluded, 1 static
          batched   ['cfg']['table']
          batched   ['x']
          static    ['cfg']['act']
        check (pass exclude= for any that is not per-example data):
          ? ['cfg']['table']  f64[4,4]: size 4 on more than one axis
        >>> batch_axes(data, 4, exclude="cfg", explain=True)[1].overridden
        ["['cfg']['table']"]
    """

    batch_size: int
    axis: int
    batched: list[str] = field(default_factory=list)
    unbatched: list[tuple[str, str]] = field(default_factory=list)
    excluded: list[tuple[str, str]] = field(default_factory=list)
    overridden: list[str] = field(default_factory=list)
    static: list[str] = field(default_factory=list)
    ambiguous: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [
            f"batch size {self.batch_size} on axis {self.axis}: {len(self.batched)} batched, "
            f"{len(self.unbatched)} not batched, {len(self.excluded)} excluded, "
            f"{len(self.static)} static"
        ]
        lines += [f"  batched   {p}" for p in self.batched]
        lines += [f"  not       {p}  ({why})" for p, why in self.unbatched]
        over = set(self.overridden)
        lines += [
            f"  excluded  {p}  (matches {pat!r}{'; has the batch size' if p in over else ''})"
            for p, pat in self.excluded
        ]
        lines += [f"  static    {p}" for p in self.static]
        if self.ambiguous:
            lines.append("check (pass exclude= for any that is not per-example data):")
            lines += [f"  ? {p}  {why}" for p, why in self.ambiguous]
        return "\n".join(lines)


@set_module("treetool.transforms")
def batch_axes(
    tree: Any,
    batch_size: int,
    axis: int = 0,
    *,
    exclude: str | Iterable[str] = (),
    explain: bool = False,
    is_leaf: IsLeaf = None,
) -> Any:
    """vmap's `in_axes` for `tree`: `axis` for arrays whose size along it is `batch_size`.

    Every other leaf gets None: arrays of other sizes, scalars, strings, configuration. A
    container below the root whose entries all agree collapses to one entry (`'cfg': None`), so
    the result is a prefix tree of `tree`, as jax's `in_axes` expects. `exclude=` paths or globs (`"cfg"`,
    `"**.table"`) are never batched; a pattern that names a subtree excludes all of it.

    With `explain=True`, returns `(in_axes, BatchReport)`: every decision with its reason, the
    excluded arrays that have the batch size, and as ambiguous the batched arrays that may be
    configuration: next to unbatched arrays, alone among static leaves, under a name like
    `cfg`/`config`/`table`, or with `batch_size` on more than one axis. An `exclude=` pattern
    that matches no path raises `PathError` naming the nearest paths.

    Example:
        >>> import numpy as np
        >>> data = {"x": np.zeros((8, 3)), "y": np.zeros(8), "cfg": {"lr": 0.1, "w": np.eye(3)}}
        >>> batch_axes(data, 8)
        {'cfg': None, 'x': 0, 'y': 0}
        >>> batch_axes(data, 3, axis=1)
        {'cfg': {'lr': None, 'w': 1}, 'x': 1, 'y': None}
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 0:
        raise TypeError(f"batch_axes: batch_size must be a non-negative int, got {batch_size!r}")
    import jax.tree_util as jtu

    patterns = _patterns(exclude)
    report = BatchReport(batch_size, axis)
    flat, treedef = jtu.tree_flatten_with_path(tree, is_leaf=is_leaf)
    paths = [Path.from_jax(jp) for jp, _ in flat]
    if patterns:
        _check_patterns(patterns, paths, "batch_axes")
    axes = [_decide(p, x, batch_size, axis, patterns, report) for p, (_, x) in zip(paths, flat)]
    _flag_mixed(report)
    _flag_names(report)
    result = _collapse(jtu.tree_unflatten(treedef, axes), root=True)
    return (result, report) if explain else result


@set_module("treetool.transforms")
def auto_vmap(
    fn: Callable[..., Any],
    batch_size: int,
    axis: int = 0,
    *,
    exclude: str | Iterable[str] = (),
    out_axes: Any = 0,
    is_leaf: IsLeaf = None,
) -> Callable[..., Any]:
    """`fn` vmapped over every array argument whose size along `axis` is `batch_size`.

    Positional and keyword arguments are both mapped; `exclude=` patterns name them as
    `args[0]...` and `kwargs['k']...`. Non-array leaves (strings, numbers, functions, config
    objects) reach `fn` unchanged: vmap itself cannot take them.

    Example:
        >>> import jax.numpy as jnp
        >>> f = auto_vmap(lambda x, scale, name: x.sum() * scale, 4)
        >>> f(jnp.ones((4, 3)), 2.0, name="run").tolist()
        [6.0, 6.0, 6.0, 6.0]
    """
    patterns = _patterns(exclude)

    @functools.wraps(fn)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        import jax
        import jax.tree_util as jtu

        flat, treedef = jtu.tree_flatten_with_path((args, kwargs), is_leaf=is_leaf)
        leaves = [x for _, x in flat]
        if patterns:
            name = f"auto_vmap({getattr(fn, '__name__', 'fn')})"
            _check_patterns(patterns, [_call_path(jp) for jp, _ in flat], name)
        where, dyn, dyn_axes = [], [], []
        for i, (jp, x) in enumerate(flat):
            if not _traceable(x):
                continue
            ax = _leaf_axis(x, batch_size, axis)
            if ax is not None and patterns and _excluded(_call_path(jp), patterns):
                ax = None
            where.append(i)
            dyn.append(x)
            dyn_axes.append(ax)
        if all(a is None for a in dyn_axes):
            name = getattr(fn, "__name__", "fn")
            raise TreetoolError(
                f"auto_vmap({name}): no argument has size {batch_size} on axis {axis}; "
                "nothing to map over"
            )

        def inner(dyn_leaves: list[Any]) -> Any:
            full = list(leaves)
            for i, x in zip(where, dyn_leaves, strict=True):
                full[i] = x
            a, kw = jtu.tree_unflatten(treedef, full)
            return fn(*a, **kw)

        return jax.vmap(inner, in_axes=(dyn_axes,), out_axes=out_axes)(dyn)

    return mapped


def _call_path(jp: tuple) -> Path:
    """The path of a leaf of `(args, kwargs)` as `args[0]...` or `kwargs['k']...`."""
    from treetool._paths._path import GetAttrKey

    rest = Path.from_jax(jp[1:])
    return Path((GetAttrKey("args" if jp[0].idx == 0 else "kwargs"), *rest.keys))


def _patterns(exclude: str | Path | Iterable[str | Path]) -> list[tuple[str, Path]]:
    if isinstance(exclude, (str, Path)):
        exclude = [exclude]
    return [(str(e), e if isinstance(e, Path) else Path.parse(str(e))) for e in exclude]


def _excluded(path: Path, patterns: list[tuple[str, Path]]) -> str | None:
    """The pattern that matches `path` or one of its ancestors, or None."""
    keys = path.keys
    for text, pat in patterns:
        for k in range(1, len(keys) + 1):
            if pat.match(Path(keys[:k])):
                return text
    return None


def _check_patterns(patterns: list[tuple[str, Path]], paths: list[Path], who: str) -> None:
    """Raise PathError for an `exclude=` pattern that matches no path (a typo)."""
    for text, pat in patterns:
        if any(_excluded(p, [(text, pat)]) for p in paths):
            continue
        leaves = {str(p) for p in paths}
        nodes = {str(Path(p.keys[:k])) for p in paths for k in range(1, len(p))}
        close = suggest(str(pat), leaves) or suggest(str(pat), nodes) or suggest(text, leaves)
        hint = ""
        if close:  # auto_vmap's paths read `args[0]...`, as autojit's do
            best = close[0][1:] if close[0].startswith((".args", ".kwargs")) else close[0]
            hint = f"; did you mean {best!r}?"
        raise PathError(f"{who}: exclude pattern {text!r} matches no path{hint}")


def _leaf_axis(x: Any, batch_size: int, axis: int) -> int | None:
    shape = getattr(x, "shape", None)
    if not shape:
        return None
    ax = axis if axis >= 0 else len(shape) + axis
    if 0 <= ax < len(shape) and shape[ax] == batch_size:
        return axis
    return None


def _decide(
    path: Path,
    x: Any,
    batch_size: int,
    axis: int,
    patterns: list[tuple[str, Path]],
    report: BatchReport,
) -> int | None:
    text = str(path)
    if not is_array(x):
        report.static.append(text)
        return None
    pattern = _excluded(path, patterns) if patterns else None
    if pattern is not None:
        report.excluded.append((text, pattern))
        if _leaf_axis(x, batch_size, axis) is not None:
            report.overridden.append(text)
        return None
    ax = _leaf_axis(x, batch_size, axis)
    if ax is None:
        report.unbatched.append((text, _why_not(x, batch_size, axis)))
        return None
    report.batched.append(text)
    if sum(1 for d in x.shape if d == batch_size) > 1:
        label = leaf_info(x).label
        report.ambiguous.append((text, f"{label}: size {batch_size} on more than one axis"))
    return ax


def _why_not(x: Any, batch_size: int, axis: int) -> str:
    shape = tuple(x.shape)
    label = leaf_info(x).label
    if not shape:
        return f"{label}: a scalar"
    ax = axis if axis >= 0 else len(shape) + axis
    if not 0 <= ax < len(shape):
        return f"{label}: no axis {axis}"
    return f"{label}: size {shape[ax]} on axis {axis}"


def _flag_mixed(report: BatchReport) -> None:
    """Batched arrays that look like configuration: next to arrays that are not batched, or
    the only batched leaf among static ones (a table in a config dict)."""

    def parent(text: str) -> str:
        return str(Path.parse(text).parent)

    count: dict[str, list[int]] = {}  # parent -> [batched, unbatched arrays, static]
    for i, texts in enumerate((report.batched, [t for t, _ in report.unbatched], report.static)):
        for text in texts:
            count.setdefault(parent(text), [0, 0, 0])[i] += 1
    flagged = {p for p, _ in report.ambiguous}
    for text in report.batched:
        where = parent(text)
        batched, unbatched, static = count[where]
        if text in flagged or not (unbatched or (batched == 1 and static)):
            continue
        others = []
        if unbatched:
            others.append(f"{unbatched} other array(s) are not batched")
        if static:
            others.append(f"{static} leaf(s) are static")
        report.ambiguous.append(
            (text, f"batched, but in {where or 'the root'} " + " and ".join(others))
        )


_CONFIG_WORDS = frozenset(
    [
        "cfg",
        "config",
        "configs",
        "conf",
        "configuration",
        "settings",
        "hparams",
        "hyperparams",
        "options",
        "opts",
        "constants",
        "consts",
        "table",
        "tables",
        "lookup",
        "vocab",
    ]
)


def _flag_names(report: BatchReport) -> None:
    """Batched arrays under a key whose name reads like configuration (`cfg`, `table`, ...)."""
    flagged = {p for p, _ in report.ambiguous}
    for text in report.batched:
        if text in flagged:
            continue
        for key in Path.parse(text).keys:
            words = re.split(r"[^a-z0-9]+", key.text.lower())
            hit = next((w for w in words if w in _CONFIG_WORDS), None)
            if hit is not None:
                report.ambiguous.append((text, f"batched, but its path names {key.text!r}"))
                break


def _collapse(t: Any, root: bool = False) -> Any:
    """Builtin containers below the root whose entries are all None, or all the same int,
    become that value (the root keeps its shape, so `axes["x"]` still works)."""
    if isinstance(t, dict):
        out: Any = {k: _collapse(v) for k, v in t.items()}
        vals = list(out.values())
    elif type(t) in (list, tuple):
        out = type(t)(_collapse(v) for v in t)
        vals = list(out)
    else:
        return t
    if root:
        return out
    if vals and all(v is None for v in vals):
        return None
    if vals and all(type(v) is int for v in vals) and len(set(vals)) == 1:
        return vals[0]
    return out


def _traceable(x: Any) -> bool:
    import jax
    import numpy as np

    return isinstance(x, (jax.Array, np.ndarray, np.generic))


# --- key trees ------------------------------------------------------------------------------


@set_module("treetool.transforms")
def split_keys(key: Any, tree: Any, is_leaf: IsLeaf = None) -> Any:
    """A tree shaped like `tree` with an independent PRNG key at every array leaf, None elsewhere.

    `key` may be a typed key (`jax.random.key`) or a legacy `uint32[2]` key
    (`jax.random.PRNGKey`); the keys made are of the same kind and on the same device. One
    `jax.random.split` makes them all, so they are independent of each other.

    Example:
        >>> import jax, numpy as np
        >>> tree = {"w": np.zeros((2, 3)), "b": np.zeros(3), "act": "relu"}
        >>> keys = split_keys(jax.random.key(0), tree)
        >>> sorted(k for k, v in keys.items() if v is not None), keys["act"]
        (['b', 'w'], None)
    """
    import jax
    import jax.tree_util as jtu

    if type(key) is KeyArray:
        key = key.to_jax()  # a typed key loaded from a file
    raw = may_be_raw_key(key) and tuple(key.shape) == (2,)
    if not (raw or (is_key(key) and tuple(key.shape) == ())):
        got = leaf_info(key).label if is_array(key) else type(key).__name__
        raise TypeError(
            "split_keys: key must be one PRNG key (jax.random.key(seed) or "
            f"jax.random.PRNGKey(seed)), got {got}"
        )
    leaves, treedef = jtu.tree_flatten(tree, is_leaf=is_leaf)
    where = [i for i, x in enumerate(leaves) if is_array(x)]
    out: list[Any] = [None] * len(leaves)
    if where:
        keys = jax.random.split(key, len(where))
        for i, k in zip(where, _unstack(keys), strict=True):
            out[i] = k
    return jtu.tree_unflatten(treedef, out)


def _unstack(keys: Any) -> list[Any]:
    """The rows of a key array: one copy to the host and one back, nothing compiled per size."""
    import jax
    import numpy as np

    typed = jax.dtypes.issubdtype(keys.dtype, jax.dtypes.prng_key)
    host = np.asarray(jax.random.key_data(keys) if typed else keys)
    devices = keys.devices()
    device = next(iter(devices)) if len(devices) == 1 else None
    rows = jax.device_put(list(host), device)
    if not typed:
        return rows
    impl = jax.random.key_impl(keys)
    return [jax.random.wrap_key_data(r, impl=impl) for r in rows]
