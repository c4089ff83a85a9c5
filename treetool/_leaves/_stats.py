"""Summary statistics of an array leaf, read in chunks: min/max/mean/std, NaN/Inf/zero counts,
histogram. File-backed leaves are streamed, never held whole in memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treetool._leaves._facts import _is_typed_key_dtype, is_key
from treetool._leaves._lazy_array import _CHUNK_ELEMS, LazyArray
from treetool._public import set_module

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "REMOTE_STATS_BYTES",
    "STATS_BYTES",
    "Stats",
    "StatsBudget",
    "has_stats",
    "is_remote",
    "stats",
]

#: `treetool get` computes the stats of leaves still in their file up to this many bytes of a
#: local file (a fraction of a second to read and sum) ...
STATS_BYTES = 64_000_000
#: ... and up to this many of a remote one (a few seconds on a slow link); above, `--stats`
REMOTE_STATS_BYTES = 8_000_000

# --- stats --------------------------------------------------------------------------------


@set_module("treetool")
@dataclass(frozen=True)
class Stats:
    """Summary statistics of an array leaf, over its finite values.

    `histogram` is `(counts, edges)` with `bins` bins between the finite min and max.
    For complex arrays the statistics are of the magnitudes.
    """

    size: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    nan: int
    inf: int
    zeros: int
    histogram: tuple[list[int], list[float]] | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {
            "size": self.size,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "std": self.std,
            "nan": self.nan,
            "inf": self.inf,
            "zeros": self.zeros,
            "histogram": None
            if self.histogram is None
            else {"counts": self.histogram[0], "edges": self.histogram[1]},
        }


class StatsBudget:
    """What `treetool get` may read from files for stats without being asked (`--stats`):
    `STATS_BYTES` of local files and `REMOTE_STATS_BYTES` of remote ones, in all, across the
    leaves of one call (a subtree's leaves share it). Arrays in memory cost nothing.

    Example:
        >>> budget = StatsBudget()
        >>> big = LazyArray((4000, 4000), "float32", "w.bin")  # 64.0 MB
        >>> budget.take(big), budget.take(big)
        (True, False)
        >>> StatsBudget().take(LazyArray((4000, 4000), "float32", "https://host/w.bin"))
        False
    """

    __slots__ = ("local", "remote")

    def __init__(self, local: int = STATS_BYTES, remote: int = REMOTE_STATS_BYTES) -> None:
        self.local, self.remote = local, remote

    def take(self, x: Any) -> bool:
        """Whether the stats of `x` fit in what is left; if so, its bytes are spent."""
        if not isinstance(x, LazyArray):
            return True
        n = x.nbytes
        if is_remote(x):
            if n > self.remote:
                return False
            self.remote -= n
            return True
        if n > self.local:
            return False
        self.local -= n
        return True


def is_remote(x: LazyArray) -> bool:
    """Whether reading `x` crosses the network (a URL, or a source that says it is remote).

    Example:
        >>> is_remote(LazyArray((2,), "float32", "s3://b/w.bin")), is_remote(LazyArray((2,), "float32", "w.bin"))
        (True, False)
    """
    from treetool._source import is_url

    return bool(getattr(x.source, "remote", False)) or is_url(x.file)


def _chunks(x: Any, max_elems: int = _CHUNK_ELEMS) -> Iterator[np.ndarray]:
    if isinstance(x, LazyArray):
        yield from x.iter_chunks(max_elems)
        return
    import numpy as np

    arr = np.asarray(x)
    flat = arr.reshape(-1)
    for i in range(0, max(flat.size, 1), max_elems):
        part = flat[i : i + max_elems]
        if part.size:
            yield part


def _as_float(chunk: np.ndarray) -> np.ndarray:
    import numpy as np

    if chunk.dtype.kind == "c":
        return np.abs(chunk)
    if chunk.dtype.kind in "fiub":
        return chunk.astype(np.float64, copy=False) if chunk.dtype.kind != "f" else chunk
    return chunk.astype(np.float32)  # ml_dtypes (bfloat16, float8, int4 …)


def has_stats(x: Any) -> bool:
    """Whether `stats` is defined for `x`'s dtype: numbers (bool, ints, floats incl. ml_dtypes,
    complex), not strings, records, objects, datetimes or PRNG keys.

    Example:
        >>> import numpy as np
        >>> has_stats(np.zeros(2, np.float32)), has_stats(np.array(["a"])), has_stats(np.zeros(1, "M8[s]"))
        (True, False, False)
    """
    if isinstance(x, LazyArray) and x._dt is None:  # a standard dtype, known by its name
        return not x._dtname.startswith("void")
    import numpy as np

    try:
        dt: np.dtype[Any] = np.dtype(getattr(x, "dtype", None))
    except TypeError:  # typed PRNG keys and other dtypes numpy does not know
        return False
    return dt.kind in "biufc" or (dt.kind == "V" and dt.type is not np.void)


@set_module("treetool")
def stats(x: Any, bins: int = 20) -> Stats:
    """Min, max, mean, std, NaN/Inf/zero counts and a histogram, read in chunks.

    Works on numpy and jax arrays and on `LazyArray` leaves (streamed from the file, never
    held whole in memory).

    Example:
        >>> import numpy as np
        >>> s = stats(np.array([0.0, 1.0, 2.0, np.nan]))
        >>> s.min, s.max, s.mean, s.nan, s.zeros
        (0.0, 2.0, 1.0, 1, 1)
    """
    from treetool._errors import StatsError, TreetoolError

    if is_key(x) and _is_typed_key_dtype(getattr(x, "dtype", None)):
        raise StatsError("stats of a PRNG key array are not defined; use jax.random.key_data")
    if isinstance(x, (str, bytes)) or not has_stats(x):
        what = getattr(x, "dtype", None) or type(x).__name__
        raise StatsError(f"stats of a {what} array are not defined")
    try:
        return _stats(x, bins)
    except (TreetoolError, OSError):  # a damaged or vanished file: its own error as it is
        raise
    except Exception as e:  # a deleted or donated jax array, values numpy cannot convert
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise StatsError(
            f"stats of this {type(x).__name__} cannot be computed: {type(e).__name__}: {text}"
        ) from e


def _stats(x: Any, bins: int) -> Stats:
    import numpy as np

    size = n = nan = inf = zeros = 0
    lo, hi = math.inf, -math.inf
    mean = m2 = 0.0
    for raw in _chunks(x):
        c = _as_float(raw)
        size += c.size
        finite = np.isfinite(c)
        nf = int(np.count_nonzero(finite))
        nnan = int(np.count_nonzero(np.isnan(c)))
        nan += nnan
        inf += c.size - nf - nnan
        zeros += int(np.count_nonzero(c == 0))
        if nf == 0:
            continue
        v = c[finite] if nf != c.size else c
        lo = min(lo, float(v.min()))
        hi = max(hi, float(v.max()))
        cm = float(v.mean(dtype=np.float64))
        cm2 = float(((v - cm) ** 2).sum(dtype=np.float64))
        delta = cm - mean
        tot = n + nf
        mean += delta * nf / tot
        m2 += cm2 + delta * delta * n * nf / tot
        n = tot
    if n == 0:
        return Stats(size, None, None, None, None, nan, inf, zeros, None)
    hist = _histogram(x, lo, hi, bins)
    return Stats(size, lo, hi, mean, math.sqrt(m2 / n), nan, inf, zeros, hist)


def _histogram(x: Any, lo: float, hi: float, bins: int) -> tuple[list[int], list[float]]:
    import numpy as np

    if hi == lo:
        hi = lo + 1.0
    counts = np.zeros(bins, dtype=np.int64)
    edges = np.linspace(lo, hi, bins + 1)
    for raw in _chunks(x):
        c = _as_float(raw)
        c = c[np.isfinite(c)]
        if c.size:
            counts += np.histogram(c, bins=edges)[0]
    return counts.tolist(), edges.tolist()
