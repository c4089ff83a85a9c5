"""Comparing two leaves: shape, dtype, values (in chunks, NaN equal to NaN) and sharding.

Values are streamed in chunks of about a megabyte: neither side is ever copied whole (a
file-backed `LazyArray` is read chunk by chunk), and a chunk whose bytes are equal costs one
vectorised comparison. Only chunks that differ pay for the statistics (max abs and rel
difference, count, first index).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from treetool._errors import LoadError, TreetoolError
from treetool._leaves._arrays import LazyArray, dtype_name, is_key, scalar_value, short_dtype
from treetool._leaves._callables import NOT_CALLABLE, callable_identity, same_callable
from treetool._leaves._prng import KeyArray
from treetool._leaves._read_ahead import ReadAhead, is_remote
from treetool._typetests import is_named_sharding, is_shape_struct, is_single_device_sharding

__all__ = ["LeafComparer", "leaf_label", "sharding_text"]

_CHUNK_BYTES = 1 << 20

# leaf classes: what kind of leaf a type is, cached per type (in-memory classes below _LAZY)
_OBJECT, _NUMPY, _JAX, _LAZY, _ABSTRACT, _KEYS = range(6)
_class_cache: dict[type, int] = {}


def _leaf_class(x: Any) -> int:
    t = type(x)
    c = _class_cache.get(t)
    if c is None:
        c = _classify(t, x)
        _class_cache[t] = c
    return c


def _classify(t: type, x: Any) -> int:
    if issubclass(t, (np.ndarray, np.generic)):
        return _NUMPY
    if issubclass(t, LazyArray):
        return _LAZY
    if t is KeyArray:
        return _KEYS
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(x, jax.Array):
        return _JAX
    if is_shape_struct(x):
        return _ABSTRACT
    return _OBJECT


def leaf_label(x: Any) -> str:
    """`f32[8,4]` for arrays; the type name otherwise."""
    if _leaf_class(x) != _OBJECT:
        return f"{short_dtype(x.dtype)}[{','.join(str(int(s)) for s in x.shape)}]"
    if x is None:
        return "None"
    return type(x).__name__


def sharding_text(s: Any) -> str:
    """A short description of a jax sharding: `cpu:0`, `NamedSharding(x=4,y=2; P('x', None))`."""
    if is_single_device_sharding(s):
        d = next(iter(s.device_set))
        return f"{d.platform}:{d.id}"
    if is_named_sharding(s):
        axes = ",".join(f"{k}={v}" for k, v in s.mesh.shape.items())
        spec = ", ".join(repr(p) for p in s.spec)
        return f"NamedSharding({axes}; P({spec}))"
    return str(s)


def _host(x: Any, cls: int, dtype: Any) -> Any:
    """An object with numpy semantics: the array itself, or a LazyArray (streamed)."""
    if cls == _LAZY:
        return x
    if cls == _KEYS:  # a typed key loaded from a file: its key data (in memory or lazy)
        data = x.data
        return data if isinstance(data, LazyArray) else np.asarray(data)
    if cls == _JAX and not isinstance(dtype, np.dtype) and is_key(x):
        import jax  # a typed PRNG key array: compare its raw key data

        return np.asarray(jax.random.key_data(x))
    return np.asarray(x)


def _same_key_dtype(da: Any, db: Any) -> bool:
    """Two typed key dtypes of one implementation (a loaded `key<fry>` and jax's)."""
    if isinstance(da, np.dtype) or isinstance(db, np.dtype):
        return False
    name = dtype_name(da)
    return name.startswith("key<") and name == dtype_name(db)


def _chunks(x: Any, size: int, step: int) -> Iterator[np.ndarray]:
    """1-D chunks of `step` elements in C order (the last may be shorter)."""
    if isinstance(x, LazyArray):
        if x.fortran_order:
            x = x.read()
        else:
            yield from x.iter_chunks(step)
            return
    if x.flags.c_contiguous:
        flat = x.reshape(-1)
        for i in range(0, size, step):
            yield flat[i : i + step]
    else:
        for i in range(0, size, step):
            yield x.flat[i : i + step]


def _float_like(dtype: np.dtype) -> bool:
    if dtype.kind == "f":
        return True
    return dtype.kind == "V" and dtype_name(dtype).startswith(("float", "bfloat"))


_vector_cache: dict[np.dtype, bool] = {}


def _vector_eq(dtype: np.dtype) -> bool:
    """Whether `a == b` is a plain elementwise comparison for this dtype."""
    out = _vector_cache.get(dtype)
    if out is None:
        out = _vector_cache[dtype] = dtype.kind in "fiubc" or _float_like(dtype) or _int_like(dtype)
    return out


def _int_like(dtype: np.dtype) -> bool:
    if dtype.kind in "iu":
        return True
    return dtype.kind == "V" and dtype_name(dtype).startswith(("int", "uint"))


class _ValueStats:
    """Accumulates the differences found chunk by chunk."""

    __slots__ = ("before", "after", "count", "first", "max_abs", "max_rel")

    def __init__(self) -> None:
        self.count = 0
        self.first: int | None = None
        self.before: Any = None
        self.after: Any = None
        self.max_abs: float | None = None
        self.max_rel: float | None = None

    def add(self, ca: np.ndarray, cb: np.ndarray, offset: int, rtol: float, atol: float) -> None:
        dtype = ca.dtype
        with np.errstate(all="ignore"):
            if _float_like(dtype) or dtype.kind == "c":
                wide = np.complex128 if dtype.kind == "c" else np.float64
                fa, fb = ca.astype(wide), cb.astype(wide)
                both_nan = np.isnan(fa) & np.isnan(fb)
                diff = np.abs(fa - fb)
                mag = np.maximum(np.abs(fa), np.abs(fb))
                eq = (fa == fb) | both_nan
                if rtol or atol:
                    eq |= diff <= atol + rtol * mag
            elif _int_like(dtype) or dtype.kind == "b":
                fa, fb = ca.astype(np.float64), cb.astype(np.float64)
                diff = np.abs(fa - fb)
                mag = np.maximum(np.abs(fa), np.abs(fb))
                eq = ca == cb
                if rtol or atol:
                    eq |= diff <= atol + rtol * mag
            else:
                eq = np.asarray(ca == cb, dtype=bool)
                diff = mag = None
            neq = ~eq
            n = int(np.count_nonzero(neq))
            if not n:
                return
            self.count += n
            if self.first is None:
                k = int(np.argmax(neq))
                self.first = offset + k
                self.before, self.after = _item(ca[k]), _item(cb[k])
            if diff is None or mag is None:
                return
            d = diff[neq]
            ok = np.isfinite(d)
            if not ok.any():
                return
            d = d[ok]
            m = mag[neq][ok]
            hi = float(d.max())
            rel = float(np.max(np.where(m > 0, d / np.where(m > 0, m, 1.0), 0.0)))
            self.max_abs = hi if self.max_abs is None else max(self.max_abs, hi)
            self.max_rel = rel if self.max_rel is None else max(self.max_rel, rel)


def _item(x: Any) -> Any:
    try:
        v = scalar_value(x) if getattr(x, "size", None) == 1 else x.item()
    except Exception:
        return repr(x)
    if isinstance(v, complex):
        return repr(v)
    if isinstance(v, bytes):
        return v.decode("latin-1")
    return v


class LeafComparer:
    """Compares pairs of leaves with fixed options; `compare` answers None or a change.

    A change is `(kind, before, after, detail)`, kind one of "node_type", "shape", "dtype",
    "value", "sharding".
    """

    __slots__ = ("atol", "pending", "progress", "rtol", "values")

    def __init__(
        self,
        *,
        rtol: float = 0.0,
        atol: float = 0.0,
        values: bool = True,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        if not (rtol >= 0 and atol >= 0):
            raise ValueError(f"rtol and atol must be >= 0, got rtol={rtol!r}, atol={atol!r}")
        self.rtol = float(rtol)
        self.atol = float(atol)
        self.values = values
        #: called with the number of bytes (of one side) compared, leaf by leaf, chunk by chunk
        self.progress = progress
        #: when a list, value comparisons that read remote bytes are put off here, as
        #: `("pending", job, None, {})` answers, and `settle` runs them with reads ahead
        self.pending: list[tuple[Any, Any]] | None = None

    def compare(self, a: Any, b: Any) -> tuple[str, Any, Any, dict] | None:
        """The most significant difference between two leaves, or None."""
        ca, cb = _leaf_class(a), _leaf_class(b)
        if ca == _OBJECT or cb == _OBJECT:
            return self._objects(a, b, ca, cb)
        sa_shape, sb_shape = a.shape, b.shape
        if sa_shape != sb_shape and tuple(sa_shape) != tuple(sb_shape):
            return (
                "shape",
                tuple(int(s) for s in sa_shape),
                tuple(int(s) for s in sb_shape),
                {"labels": [leaf_label(a), leaf_label(b)]},
            )
        da, db = a.dtype, b.dtype
        if da != db and not _same_key_dtype(da, db):
            return (
                "dtype",
                dtype_name(da),
                dtype_name(db),
                {"labels": [leaf_label(a), leaf_label(b)]},
            )
        shard = None
        if ca == _JAX and cb == _JAX:
            try:
                sa, sb = a.sharding, b.sharding
            except Exception:  # deleted buffers, tracers
                sa = sb = None
            if sa is not sb and sa != sb:
                shard = self._sharding(sa, sb, len(sa_shape))
        if self.values and ca != _ABSTRACT and cb != _ABSTRACT:
            v = self._values(a, b, ca, cb, da)
            if v is not None:
                if shard is not None:
                    v[3]["sharding"] = [shard[1], shard[2]]
                return v
        return shard

    def _objects(self, a: Any, b: Any, ca: int, cb: int) -> tuple[str, Any, Any, dict] | None:
        if type(a) not in NOT_CALLABLE:  # numbers and strings: no function lookup
            fa = callable_identity(a)
            if fa is not None:
                fb = callable_identity(b)
                if fb is not None:
                    return self._callables(fa, fb)
        ta, tb = type(a), type(b)
        if ca != cb or ta is not tb:
            from treetool._diff._align import type_key

            if ca == _OBJECT and cb == _OBJECT and type_key(a) == type_key(b):
                pass
            else:
                return (
                    "node_type",
                    leaf_label(a),
                    leaf_label(b),
                    {"before_kind": "leaf", "after_kind": "leaf"},
                )
        if not self.values or _same_object_value(a, b):
            return None
        return ("value", _plain(a), _plain(b), {"count": 1, "size": 1, "first_index": []})

    def _callables(self, fa: tuple, fb: tuple) -> tuple[str, Any, Any, dict] | None:
        """Two functions: equal when they name one function (module, qualname, code)."""
        if same_callable(fa, fb):
            return None
        if not self.values and (fa[0], fa[1]) == (fb[0], fb[1]):
            return None  # only the code differs, and values are not compared
        detail = {"callable": True, "code_changed": (fa[0], fa[1]) == (fb[0], fb[1])}
        return ("value", fa[3], fb[3], detail)

    @staticmethod
    def _sharding(sa: Any, sb: Any, ndim: int) -> tuple[str, Any, Any, dict] | None:
        try:
            if sa.is_equivalent_to(sb, ndim):
                return None
        except Exception:
            return None
        return ("sharding", sharding_text(sa), sharding_text(sb), {})

    def _values(
        self, a: Any, b: Any, ca: int, cb: int, dtype: Any
    ) -> tuple[str, Any, Any, dict] | None:
        xa, xb = _host(a, ca, dtype), _host(b, cb, dtype)
        pending = self.pending
        if (
            pending is not None
            and (ca >= _LAZY or cb >= _LAZY)
            and (is_remote(xa) or is_remote(xb))
            and _plannable(xa, xb)
        ):
            pending.append((xa, xb))
            return ("pending", len(pending) - 1, None, {})
        dtype = xa.dtype
        fast = _vector_eq(dtype)
        progress = self.progress
        # file-backed data (a LazyArray, a loaded key's data) is streamed in chunks
        if ca < _LAZY and cb < _LAZY and xa.nbytes <= _CHUNK_BYTES:
            if progress is not None:
                progress(xa.nbytes)
            # one chunk: the common case of many small leaves
            if fast and (xa == xb).all():
                return None
            return self._result(self._accumulate(xa.reshape(-1), xb.reshape(-1), 0, None), xa.shape)
        size = math.prod(xa.shape)
        step = max(_CHUNK_BYTES // max(dtype.itemsize, 1), 1)
        st: _ValueStats | None = None
        offset = 0
        for pa, pb in zip(_chunks(xa, size, step), _chunks(xb, size, step)):
            if not (fast and (pa == pb).all()):
                st = self._accumulate(pa, pb, offset, st)
            offset += pa.size
            if progress is not None:
                progress(pa.nbytes)
        return self._result(st, xa.shape)

    def settle(
        self, where: Callable[[int], str], *, read_ahead: ReadAhead | None = None
    ) -> list[tuple[str, Any, Any, dict] | None]:
        """Run the value comparisons put off in `pending` (and stop putting them off): the
        answer of each job, in order. Both sides' remote bytes are read ahead, across leaves,
        while earlier parts are compared (see `ReadAhead` for the memory bound); `where(job)`
        names a job's leaf in the one line of a read that fails.
        """
        jobs, self.pending = self.pending or [], None
        if not jobs:
            return []
        ra = read_ahead if read_ahead is not None else ReadAhead()
        with ra:
            plans = [_plan(ra, xa, xb) for xa, xb in jobs]
            out = []
            for k, (xa, xb) in enumerate(jobs):
                try:
                    out.append(self._planned(ra, xa, xb, plans[k]))
                except LoadError as e:
                    raise LoadError(_at_leaf(str(e.args[0]) if e.args else "", where(k))) from None
                except TreetoolError:
                    raise
                except Exception as e:  # a leaf whose facts fail: an error entry, as in the walk
                    out.append(("error", f"{type(e).__name__}: {e}", None, {"leaf": True}))
        return out

    def _planned(
        self, ra: ReadAhead, xa: Any, xb: Any, plan: list[tuple[int, int, int | None, int | None]]
    ) -> tuple[str, Any, Any, dict] | None:
        dtype = xa.dtype
        fast = _vector_eq(dtype)
        step = max(_CHUNK_BYTES // max(dtype.itemsize, 1), 1)
        progress = self.progress
        st: _ValueStats | None = None
        for start, count, ta, tb in plan:
            pa, pb = _part(ra, xa, ta, start, count), _part(ra, xb, tb, start, count)
            if not (fast and (pa == pb).all()):
                for i in range(0, count, step):
                    st = self._accumulate(pa[i : i + step], pb[i : i + step], start + i, st)
            if progress is not None:
                progress(pa.nbytes)
        return self._result(st, xa.shape)

    def _accumulate(
        self, pa: np.ndarray, pb: np.ndarray, offset: int, st: _ValueStats | None
    ) -> _ValueStats:
        if st is None:
            st = _ValueStats()
        st.add(pa, pb, offset, self.rtol, self.atol)
        return st

    @staticmethod
    def _result(st: _ValueStats | None, shape: tuple) -> tuple[str, Any, Any, dict] | None:
        if st is None or st.count == 0 or st.first is None:  # `first` is set with `count`
            return None
        size = math.prod(shape)
        first = [int(i) for i in np.unravel_index(st.first, tuple(shape))] if shape else []
        detail = {
            "count": st.count,
            "size": size,
            "first_index": first,
            "max_abs": st.max_abs,
            "max_rel": st.max_rel,
        }
        return ("value", st.before, st.after, detail)


def _plannable(xa: Any, xb: Any) -> bool:
    """Whether both sides can be read in parts of elements: remote ones by a `ReadAhead`,
    local files and arrays in place (not a file read through a stream or in Fortran order)."""
    for x in (xa, xb):
        if isinstance(x, LazyArray) and (
            type(x) is not LazyArray or x.fortran_order or x._opener is not None
        ):
            return False
    return True


def _plan(ra: ReadAhead, xa: Any, xb: Any) -> list[tuple[int, int, int | None, int | None]]:
    """`(start, count, ticket of a, ticket of b)` of each part of a job, in order: parts of a
    request's size; a side that is not remote has no ticket (it is read in place)."""
    size = math.prod(xa.shape)
    part = max(ra.request // max(xa.dtype.itemsize, 1), 1)
    ra_a, ra_b = is_remote(xa), is_remote(xb)
    out = []
    for start in range(0, size, part):
        count = min(part, size - start)
        ta = ra.plan(xa, start, count) if ra_a else None
        tb = ra.plan(xb, start, count) if ra_b else None
        out.append((start, count, ta, tb))
    return out


def _part(ra: ReadAhead, x: Any, ticket: int | None, start: int, count: int) -> np.ndarray:
    """Elements `start:start + count` (C order) of one side, as a 1-D array."""
    if ticket is not None:
        return np.frombuffer(ra.take(ticket), dtype=x.dtype)
    if isinstance(x, LazyArray):  # a local file
        itemsize = x.dtype.itemsize
        with x._open() as fh:
            data = x._read(fh, start * itemsize, count * itemsize)
        return np.frombuffer(data, dtype=x.dtype)
    if x.flags.c_contiguous:
        return x.reshape(-1)[start : start + count]
    return np.asarray(x.flat[start : start + count])


def _at_leaf(message: str, path: str) -> str:
    """A read's one line with the leaf it was for: `FILE: PATH: what` (`FILE: what` given)."""
    file, sep, what = message.partition(": ")
    if sep:
        return f"{file}: {path}: {what}"
    return f"{path}: {message}"


def _same_object_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b)
    except Exception:  # == that raises or is ambiguous: only identity counts
        return False


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def no_address(text: str) -> str:
    """A repr without memory addresses (`<Foo object at 0x7f..>` -> `<Foo object>`)."""
    return _ADDRESS.sub("", text) if " at 0x" in text else text


def _plain(x: Any) -> Any:
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    r = no_address(repr(x))
    return r if len(r) <= 80 else r[:79] + "…"
