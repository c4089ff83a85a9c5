"""equinox `tree_serialise_leaves` files: one `.npy` record per array or scalar leaf, in order.

Without `like=`, the tree is the list of records (`[0]`, `[1]`, … as `LazyArray` leaves). With
`like=` (a skeleton such as the freshly built model, as `eqx.tree_deserialise_leaves` takes),
the records fill the skeleton's array and scalar leaves in jax order, and the shapes and dtypes
are checked against the skeleton's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treetool._errors import LoadError
from treetool._leaves._arrays import is_array
from treetool._source import Source, source_for
from treetool.io._formats import Format, Probe, ReadOptions
from treetool.io._loaded import Loaded
from treetool.io.npz import is_npy_sequence, read_npy_at

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FORMAT", "fill_like", "read_records"]


def read_records(
    path: str, lazy: bool = True, limit: int | None = None, into: list[Any] | None = None
) -> list[Any]:
    """All `.npy` records of the file, in order (headers only when lazy), appended to `into`
    if given (which then holds the records read before an error)."""
    src = source_for(path)
    size = src.size
    out: list[Any] = [] if into is None else into
    pos = 0
    with src.open() as fh:
        while pos < size:
            arr, pos = read_npy_at(path, pos, lazy, fh, src)
            out.append(arr)
            if limit is not None and len(out) >= limit:
                break
    return out


def fill_like(path: str, like: Any, records: list[Any], *, check_shapes: bool = True) -> Any:
    """The records in `like`'s structure, in jax leaf order, as `eqx.tree_deserialise_leaves`.

    With `check_shapes=False` a record whose shape differs from the skeleton's leaf still takes
    its place (the CLI's diff then shows it as a shape change); the leaf counts must agree.
    """
    return _fill(path, like, records, check_shapes)


def _fill(path: str, like: Any, records: list[Any], check_shapes: bool = True) -> Any:
    import jax
    import numpy as np

    leaves, treedef = jax.tree_util.tree_flatten(like)
    out = []
    i = 0
    for n, leaf in enumerate(leaves):
        is_scalar = isinstance(leaf, bool | int | float | complex) and not isinstance(
            leaf, np.generic
        )
        if not (is_array(leaf) or is_scalar):
            out.append(leaf)
            continue
        if i >= len(records):
            raise LoadError(
                f"{path}: the file has {len(records)} array/scalar leaves, the skeleton "
                f"(`like`) has more (its leaf {n} at {_leaf_path(like, n)} has no record)"
            )
        rec = records[i]
        i += 1
        if is_scalar:
            out.append(type(leaf)(np.asarray(rec).item()))
            continue
        shape = tuple(getattr(leaf, "shape", ()))
        if check_shapes and tuple(rec.shape) != shape:
            raise LoadError(
                f"{path}: {_leaf_path(like, n)}: record {i - 1} has shape {tuple(rec.shape)}, "
                f"the skeleton (`like`) expects {shape}"
            )
        want = _plain_dtype(leaf)
        if want is not None and rec.dtype != want:
            raise LoadError(
                f"{path}: record {i - 1} has dtype {rec.dtype}, `like` leaf {n} has {want}"
            )
        out.append(rec)
    if i != len(records):
        raise LoadError(
            f"{path}: the file has {len(records)} array/scalar leaves, the skeleton (`like`) {i}"
        )
    return jax.tree_util.tree_unflatten(treedef, out)


def _plain_dtype(leaf: Any) -> np.dtype | None:
    """The numpy dtype of a skeleton leaf; None for typed PRNG keys (stored as their data)."""
    import numpy as np

    dtype = getattr(leaf, "dtype", None)
    try:
        return np.dtype(dtype)
    except TypeError:
        return None


def _leaf_path(like: Any, n: int) -> str:
    import jax

    paths = jax.tree_util.tree_flatten_with_path(like)[0]
    return jax.tree_util.keystr(paths[n][0]) if n < len(paths) else f"leaf {n}"


def _sniff(probe: Probe) -> bool:
    """More than one npy record, one after the other (a single one is an `.npy` file)."""
    return is_npy_sequence(probe.path)


def _read(src: Source, opts: ReadOptions) -> Loaded:
    """`treetool.io.read` for equinox leaf files."""
    path, lazy, like, format = src.name, opts.lazy, opts.like, "equinox"
    if opts.partial and like is None:
        records: list[Any] = []
        try:
            read_records(path, lazy, into=records)
        except LoadError as e:  # --partial: the records before the damaged one
            return Loaded(records, format, error=str(e))
        return Loaded(records, format)
    records = read_records(path, lazy)
    if like is None:
        return Loaded(records, format)
    return Loaded(_fill(path, like, records), format)


FORMAT = Format("equinox", sniff=_sniff, read=_read)
