"""One leaf in full: facts, stats, a histogram and a value preview (`treetool get`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from treetool._leaves._arrays import LazyArray, has_stats, is_array, leaf_info, stats, values_list
from treetool._leaves._prng import KeyArray
from treetool._lowering._labels import fmt_bytes, fmt_count
from treetool._paths._path import Path
from treetool._text import safe, safe_text
from treetool._typetests import is_shape_struct

__all__ = ["LeafReport", "leaf_report", "sparkline"]

_BARS = " ▁▂▃▄▅▆▇█"
#: file-backed leaves up to this many elements are read whole for the preview
_PREVIEW_MAX = 1000
_EDGE = 3


def sparkline(counts: list[int]) -> str:
    """A histogram as one line of block characters.

    Example:
        >>> sparkline([0, 1, 4, 8])
        ' ▁▄█'
    """
    top = max(counts) if counts else 0
    if top == 0:
        return " " * len(counts)
    return "".join(_BARS[round(c / top * 8)] for c in counts)


@dataclass
class LeafReport:
    """What `treetool get` prints about one path.

    A file-backed leaf too big to print whole is read only where it is shown (its corners);
    its stats, which read all of it, are computed when `budget` has room for it (64 MB of a
    local file, 8 MB of a remote one: `StatsBudget`), else only with `stats=True`
    (`get --stats`).
    """

    path: Path
    value: Any
    stats: bool = False
    budget: Any = None  # a `StatsBudget` shared by the leaves of one `get` (None: a fresh one)
    _skip: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from treetool._leaves._stats import StatsBudget

        v = self.value
        # decided once: the budget is spent by the leaf whose stats it allows
        self._skip = (
            not self.stats
            and isinstance(v, LazyArray)
            and v.size > _PREVIEW_MAX
            and has_stats(v)
            and not (self.budget if self.budget is not None else StatsBudget()).take(v)
        )

    def to_dict(self) -> dict[str, Any]:
        """Facts, stats and (small) values as JSON."""
        info = leaf_info(self.value)
        out: dict[str, Any] = {
            "path": str(self.path),
            "type": info.type_name,
            "shape": list(info.shape) if info.shape is not None else None,
            "dtype": info.dtype,
            "nbytes": info.nbytes,
            "params": info.params,
            "device": info.device,
            "is_key": info.is_key,
        }
        stored = self.value.data if type(self.value) is KeyArray else self.value
        if isinstance(stored, LazyArray):  # still in its file: which one (path or URL), where
            out["file"], out["offset"] = stored.file, stored.offset
        st = self._stats()
        out["stats"] = st.to_dict() if st is not None else None
        if self._skips_stats():
            out["stats_skipped"] = self._skip_note()
        arr = self._values() if info.params <= 1000 or info.kind != "lazy" else None
        small = arr is not None and arr.size <= 1000 and not _bad_code_points(arr)
        out["values"] = values_list(arr) if small and arr is not None else None
        if info.shape is None:
            out["value"] = repr(self.value)
        return out

    def _skips_stats(self) -> bool:
        """A file-backed leaf bigger than its preview and than the stats budget left."""
        return self._skip

    def _skip_note(self) -> str:
        size = fmt_bytes(leaf_info(self.value).nbytes)
        return f"not computed: they read all {size} from the file (pass --stats)"

    def _stats(self) -> Any:
        if self._skips_stats():
            return None
        if not is_array(self.value) or leaf_info(self.value).is_key:
            return None
        if not has_stats(self.value):  # strings, records, datetimes: no numbers to sum
            return None
        if is_shape_struct(self.value):
            return None
        return stats(self.value)

    def _values(self) -> Any:
        import numpy as np

        if not is_array(self.value) or is_shape_struct(self.value):
            return None
        if isinstance(self.value, LazyArray) and self.value.size > _PREVIEW_MAX:
            return None  # too big to print whole: `_corners` reads what is shown
        info = leaf_info(self.value)
        if info.is_key and info.dtype and info.dtype.startswith("key<"):
            if hasattr(self.value, "key_data"):  # a key loaded from a file (no jax needed)
                return self.value.key_data()
            import jax

            return np.asarray(jax.random.key_data(self.value))
        return np.asarray(self.value)

    def __rich_console__(self, console: Any, options: Any) -> Any:

        info = leaf_info(self.value)
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold")
        t.add_column()
        t.add_row("path", Text(safe(str(self.path)), style="green"))
        t.add_row("type", safe_text(info.type_name))
        if info.shape is not None:
            t.add_row("shape", Text(str(tuple(info.shape))))
            t.add_row("dtype", safe_text(info.dtype))
            t.add_row("params", fmt_count(info.params))
            t.add_row("bytes", fmt_bytes(info.nbytes))
            t.add_row("device", safe_text(info.device))
            if info.is_key:
                t.add_row("PRNG key", "yes")
        st = self._stats()
        parts: list[Any] = [t]
        if st is not None:
            s = Table.grid(padding=(0, 2))
            s.add_column(style="bold")
            s.add_column()
            for k in ("min", "max", "mean", "std"):
                v = getattr(st, k)
                s.add_row(k, "-" if v is None else f"{v:.6g}")
            s.add_row("zeros", fmt_count(st.zeros))
            s.add_row(
                "nan / inf", Text(f"{st.nan} / {st.inf}"), style="red" if st.nan or st.inf else ""
            )
            if st.histogram is not None:
                counts, edges = st.histogram
                s.add_row("histogram", Text(f"{edges[0]:.3g} {sparkline(counts)} {edges[-1]:.3g}"))
            parts += [Text(""), s]
        elif self._skips_stats() and has_stats(self.value):
            parts += [Text(""), Text(f"stats  {self._skip_note()}", style="dim")]
        arr = self._values()
        if arr is not None:
            text = _array_text(
                arr, threshold=200, edgeitems=3, max_line_width=max(options.max_width, 40)
            )
            parts += [Text(""), Text(safe(text, newlines=True))]
        elif isinstance(self.value, LazyArray) and self.value.size:
            corners = self.value.corners(_EDGE)
            if corners is not None:
                from treetool._leaves._corners import with_gaps

                # `...` where elements are left out, as numpy's summarised print has
                text = _array_text(
                    with_gaps(corners, self.value.shape, _EDGE),
                    threshold=0,
                    edgeitems=_EDGE,
                    max_line_width=max(options.max_width, 40),
                )
                parts += [
                    Text(""),
                    Text(f"first and last {_EDGE} along each axis:"),
                    Text(safe(text, newlines=True)),
                ]
        elif info.shape is None:
            from treetool._format import fold

            parts += [Text(""), safe_text(fold(repr(self.value), 2000))]  # cut: says its length
        yield Group(*parts)


def _array_text(arr: Any, **options: Any) -> str:
    """`np.array2string`, or one line saying why the values cannot be printed (a file's
    datetime64 with generic units, say)."""
    import numpy as np

    if _bad_code_points(arr):
        return "(values not printable: characters past U+10FFFF)"
    try:
        return np.array2string(arr, **options)
    except (ValueError, TypeError, OverflowError) as e:
        return f"(values not printable: {str(e).splitlines()[0] if str(e) else type(e).__name__})"


def _bad_code_points(arr: Any) -> bool:
    """A file's unicode array holding code points Python strings cannot (numpy reads any
    32-bit value; turning one into `str` is a SystemError in CPython)."""
    import numpy as np

    if arr.dtype.kind != "U" or arr.size == 0:
        return False
    return bool((np.ascontiguousarray(arr).view(np.uint32) > 0x10FFFF).any())


def leaf_report(path: Path, value: Any, stats: bool = False) -> Any:
    """A rich renderable of one path: a LeafReport for a leaf, a tree for a subtree.

    `stats`: compute the stats of every file-backed leaf (they read the whole leaf); without
    it, those the `StatsBudget` allows (in-memory leaves always get them).
    """
    from treetool._tree._model import Node

    node = Node(value, path)
    if node.is_leaf:
        return LeafReport(path, value, stats)
    from treetool._tree._rich import TreeView

    return _Subtree(TreeView(node, depth=3), path, value)


@dataclass
class _Subtree:
    tree: Any
    path: Path
    value: Any

    def to_dict(self) -> dict[str, Any]:
        from treetool._leaves._stats import StatsBudget
        from treetool._tree._views import leaves_with_path

        budget = StatsBudget()  # one for the subtree: its leaves' stats read that much in all
        return {
            "path": str(self.path),
            "leaves": [
                LeafReport(self.path + p, x, budget=budget).to_dict() | {"path": str(self.path + p)}
                for p, x in leaves_with_path(self.value)
            ],
        }

    def __rich_console__(self, console: Any, options: Any) -> Any:
        yield self.tree
