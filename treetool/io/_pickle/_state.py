"""The state of the safe pickle reader's opcode machine, and what its opcode families share.

`_State` holds what `pickle.Unpickler` holds (the stack, the marks, the memo, the position)
and the operations several opcode families use: the memo, finding a global, calling and
instantiating one (through the imitations), BUILD, and `fast_array`, which replays the opcode
sequence numpy writes for each array (about 25 opcodes) in one step, after a compiled pattern
matched it (`_FAST_ARRAY`): the effect on the stack and the memo is the same as opcode by
opcode. The memo keeps no `(1, shape, dtype, fortran, raw)` state tuple for such an array: a
`_Special` placeholder stands in its slot and `memo_special` makes the tuple from the slots
before it if the file ever asks for it (`pin` makes it first when one of those slots is about
to change). `_pickle_families._Families` adds the opcode families and
`_pickle_machine._Machine` the opcode loop.
"""

from __future__ import annotations

import collections
import mmap
import re
import struct
import time
from typing import Any

from treetool._errors import LoadError
from treetool._leaves._arrays import LazyArray
from treetool._leaves._dtypes import loaded_numpy
from treetool.io._opaque import GlobalRef, Opaque
from treetool.io._partial import PartialWatch
from treetool.io._pickle import _numpy_rebuild as nr
from treetool.io._pickle._imitations import imitate
from treetool.io._pickle._ops import (
    ALLOWED,
    BUILTIN_TYPES,
    SHAREABLE,
    KeyCheck,
    PendingKey,
    _dynamic_class_path,
    _prng_key,
    _short,
)
from treetool.io._safety._budget import Budget

__all__ = ["LAZY_MIN_BYTES", "_RAW", "_Fail", "_State"]

#: payloads at least this big stay in the file (LazyArray leaves)
LAZY_MIN_BYTES = 4096

_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U16 = struct.Struct("<H").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_F64 = struct.Struct(">d").unpack_from

# The pickle numpy writes for each array after the first (protocol 4+), from just after the
# BINGET of `_reconstruct` up to the data bytes: ndarray, (0,), b'b', TUPLE3, REDUCE, MARK, 1,
# shape, dtype, fortran flag, data opcode. `fast_array` replays its exact effect on the stack
# and the memo in one step; anything else takes the opcode-by-opcode path.
_FAST_ARRAY = re.compile(
    rb"(?:h(.)|j(.{4}))"
    rb"(?:K\x00\x85\x94|h(.)|j(.{4}))"
    rb"(?:h(.)|j(.{4}))"
    rb"\x87\x94R\x94\(K\x01"
    rb"(?:\)|((?:K.|M..|J....){1,3})([\x85\x86\x87])\x94)"
    rb"(?:h(.)|j(.{4}))"
    rb"([\x88\x89])"
    rb"(?:C(.)|B(.{4}))",
    re.S,
)
_ZERO_TUPLE = (0,)

_OP_NAMES = {op.code.encode("latin1")[0]: op.name for op in __import__("pickletools").opcodes}

_Global = GlobalRef  # a global named by the file, with the tag of its imitation ("" if blocked)


class _Special:
    """A memo slot that does not hold its value (yet): see `_State.memo_special`."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what


_UNDEF = _Special("undefined")  # a memo slot skipped over by a PUT with a larger index
# the `(1, shape, dtype, fortran, raw)` state of an array `fast_array` read, made from the
# slots before it when the file asks for it (it seldom does): 80 bytes saved per array
_STATE_C = _Special("C-ordered array state")
_STATE_F = _Special("Fortran-ordered array state")
# the data bytes of an array `run_layers` made as a view of a block shared by a batch's arrays
# (not a view of bytes of its own): made from the array (the slot before it, or the one before
# its shape) when the file asks for them
_RAW = _Special("array bytes")
_MEMO_GAP = 4096
_SET_COST = 216 - 64  # an empty set, beyond the 64 bytes a byte of the file may make
#: dict keys that SETITEMS inserts unchecked: strings (an int's hash may be chosen by the file:
#: `KeyCheck` checks ints for collisions)
_SIMPLE_KEYS = frozenset((str,))


class _Fail(Exception):
    """Raised inside the reader; carries the message and the byte offset."""


def _over_reads(data: Any) -> tuple[Any, ...]:
    """The struct and regex helpers of the machine for a buffer that only supports slicing."""

    def sliced(unpack: Any, width: int) -> Any:
        return lambda buf, at=0: unpack(buf[at : at + width])

    class _At:  # a match made on a slice, reporting positions in the file
        __slots__ = ("_m", "_start")

        def __init__(self, m: Any, start: int) -> None:
            self._m, self._start = m, start

        def groups(self) -> Any:
            return self._m.groups()

        def end(self) -> int:
            return self._m.end() + self._start

    def match(buf: Any, start: int) -> Any:
        m = _FAST_ARRAY.match(buf[start : start + 64])
        return None if m is None else _At(m, start)

    return (
        sliced(_U32, 4),
        sliced(_I32, 4),
        sliced(_U16, 2),
        sliced(_U64, 8),
        sliced(_F64, 8),
        match,
    )


class _State:
    """What the opcode machine holds for one file, and the operations its opcode families share.

    After an error, `stack` and `metastack` hold what was built so far (for `partial`), and
    `frame_error` the error of a truncated FRAME that a partial read went past.
    """

    #: whether numpy arrays take the shortcuts (`fast_array`, the loop's runs of arrays); off,
    #: every array is read opcode by opcode through the imitations (the tests compare the two)
    fast_arrays = True

    def __init__(
        self,
        data: Any,
        path: str,
        lazy: bool,
        partial: bool,
        budget: Budget,
        shared: set[int],
        watch: PartialWatch | None = None,
    ) -> None:
        self.data = data
        self.watch = watch
        self.path = path
        self.lazy = lazy
        self.partial = partial
        self.budget = budget
        self.end = len(data)
        self.pos = 0
        self.stack: list[Any] = []
        self.metastack: list[list[Any]] = []
        self.memo: list[Any] = []
        self.globals: dict[tuple[str, str], Any] = {}
        self.keycheck = KeyCheck(budget)
        self.shared = shared
        self.frame_error: str | None = None
        self.object_arrays = False  # whether a numpy array of dtype object was made
        self.started = time.perf_counter()
        self.snap_spent = 0.0  # seconds spent building snapshots for the watch
        self.reconstruct: Any = object()  # numpy's _reconstruct global, once the file names it
        self.u32, self.i32, self.u16, self.u64, self.f64 = _U32, _I32, _U16, _U64, _F64
        self.match_fast: Any = _FAST_ARRAY.match
        if not isinstance(data, mmap.mmap):  # a remote file: the same walk over ranged reads
            self.u32, self.i32, self.u16, self.u64, self.f64, self.match_fast = _over_reads(data)
        # array headers already matched: their bytes -> what they resolved to. Headers repeat
        # byte for byte across arrays of one shape and dtype; any change to an existing memo
        # entry (a PUT over it, a BUILD finishing one) empties the cache.
        self.headers: dict[bytes, tuple] = {}
        self.header_lengths: list[int] = []

    # -- errors and small helpers -------------------------------------------------------------

    def fail(self, msg: str, at: int) -> _Fail:
        return _Fail(f"{self.path}: {msg} (at byte {at})")

    def need(self, n: int, at: int, what: str) -> None:
        if n < 0 or at + n > self.end:
            raise self.fail(
                f"truncated pickle: {what} needs {n} bytes, {max(self.end - at, 0)} left", at
            )

    def read_line(self, at: int, what: str) -> tuple[bytes, int]:
        nl = self.data.find(b"\n", at)
        if nl < 0:
            raise self.fail(f"truncated pickle: {what} has no end of line", at)
        return self.data[at:nl], nl + 1

    def payload(self, at: int, n: int, kind: type) -> Any:
        if self.lazy and n >= LAZY_MIN_BYTES:
            return LazyArray((n,), "uint8", self.path, at)
        b = self.data[at : at + n]
        return bytearray(b) if kind is bytearray else b

    def pop_mark(self) -> list[Any]:
        items = self.stack
        if not self.metastack:
            raise self.fail("MARK expected but missing", self.pos - 1)
        self.stack = self.metastack.pop()
        return items

    def push(self, value: Any) -> None:
        self.stack.append(value)

    def note_shared(self, v: Any) -> None:
        if type(v) in SHAREABLE:
            self.shared.add(id(v))

    # -- the memo ------------------------------------------------------------------------------

    def memo_put(self, idx: int, value: Any) -> None:
        memo = self.memo
        n = len(memo)
        if idx == n:
            memo.append(value)
        elif idx < n:
            self.pin(idx)
            memo[idx] = value
            self.headers.clear()
        elif idx - n <= _MEMO_GAP:
            self.budget.charge_alloc(8 * (idx - n), f"memo indices skipped, at byte {self.pos - 1}")
            memo.extend([_UNDEF] * (idx - n))
            memo.append(value)
        else:
            raise self.fail(f"memo index {idx} is far beyond the {n} entries so far", self.pos)

    def memo_get(self, idx: int) -> Any:
        memo = self.memo
        v = memo[idx] if 0 <= idx < len(memo) else _UNDEF
        if type(v) is _Special:
            return self.memo_special(idx)
        return v

    def memo_special(self, idx: int) -> Any:
        """The value of memo slot `idx`, which holds a `_Special`: an array state is made (and
        kept in the slot), an undefined slot fails."""
        memo = self.memo
        v = memo[idx] if 0 <= idx < len(memo) else _UNDEF
        if v is _UNDEF:
            raise self.fail(f"memo key {idx} is undefined", self.pos)
        if v is _RAW:  # run_layers left [..., arr, shape, _RAW, state]
            x = memo[idx - 1]
            arr = memo[idx - 2] if type(x) is tuple else x
            self.budget.charge_alloc(arr.nbytes, f"array bytes fetched, at byte {self.pos - 1}")
            memo[idx] = raw = arr.tobytes()
            return raw
        # fast_array left [..., arr, shape (if not 0-d), raw, state]
        raw, x = memo[idx - 1], memo[idx - 2]
        if raw is _RAW:
            raw = self.memo_special(idx - 1)
        shape, arr = (x, memo[idx - 3]) if type(x) is tuple else ((), x)
        memo[idx] = state = (1, shape, arr.dtype, v is _STATE_F, raw)
        return state

    def pin(self, idx: int) -> None:
        # memo slot idx is about to change: the array states made from it are made now
        memo = self.memo
        for i in range(idx + 1, min(idx + 4, len(memo))):
            if memo[i] is _STATE_C or memo[i] is _STATE_F or memo[i] is _RAW:
                self.memo_special(i)

    def finalize(self, old: Any, new: Any) -> None:
        # BUILD completed an array or dtype: the memo entry made right after its REDUCE must
        # give the finished object too; it is among the last few entries.
        memo = self.memo
        self.stack[-1] = new
        self.headers.clear()
        for i in range(len(memo) - 1, max(-1, len(memo) - 65), -1):
            if memo[i] is old:
                self.pin(i)
                memo[i] = new

    # -- globals and objects -------------------------------------------------------------------

    def find_class(self, module: str, name: str) -> Any:
        key = (module, name)
        g = self.globals.get(key)
        if g is None:
            if module == "ml_dtypes" and nr.is_ml_dtype(name):
                g = nr.MlDtypeType(name)
            else:
                g = _Global(module, name, ALLOWED.get(key, ""))
                if g.tag == "np_reconstruct" and self.fast_arrays:
                    self.reconstruct = g
            self.globals[key] = g
        return g

    def call(self, f: Any, args: Any, at: int) -> Any:
        if type(args) is not tuple:
            raise self.fail(f"REDUCE arguments are not a tuple: {_short(args)}", at)
        if type(f) is _Global:
            tag = f.tag
            if tag:
                try:
                    out = imitate(tag, f, args, self.lazy, self.keycheck)
                except LoadError as e:
                    raise self.fail(str(e), at) from None
                if nr.is_object_array(out):
                    self.object_arrays = True
                return out
            return Opaque(f.class_path, args)
        if type(f) is Opaque:
            out = Opaque(f"{f.class_path}()", args)
            out.source = f
            return out
        raise self.fail(f"REDUCE on a value that is not callable: {_short(f)}", at)

    def instantiate(self, cls: Any, args: tuple, kwargs: dict | None, at: int) -> Any:
        if type(cls) is _Global:
            tag = cls.tag
            if tag == "prng_key":
                return PendingKey()
            if tag in BUILTIN_TYPES and not args and not kwargs:
                return BUILTIN_TYPES[tag]()
            if tag == "ordereddict" and not args:
                return collections.OrderedDict()
            if tag:
                return self.call(cls, args, at)
            return Opaque(cls.class_path, args, kwargs)
        if type(cls) is Opaque:
            out = Opaque(_dynamic_class_path(cls), args, kwargs)
            out.source = cls
            return out
        raise self.fail(f"NEWOBJ on a value that is not a class: {_short(cls)}", at)

    def build(self, inst: Any, state: Any, at: int) -> Any:
        t = type(inst)
        if t is Opaque:
            if isinstance(inst.state, dict) and isinstance(state, dict):
                inst.state.update(state)
            else:
                inst.state = state
            return inst
        try:
            if t is nr.PendingArray:
                arr = nr.array_from_state(state, self.lazy, self.budget)
                if nr.is_object_array(arr):
                    self.object_arrays = True
                return arr
            if t is nr.PendingDtype:
                return inst.build(state)
        except LoadError as e:
            raise self.fail(str(e), at) from None
        if t is PendingKey:
            return _prng_key(state)
        raise self.fail(f"BUILD on a {t.__name__}", at)

    # -- numpy arrays in one step --------------------------------------------------------------

    def fast_array(self, start: int) -> int:
        """Replay a whole numpy array pickle at `start` (see _FAST_ARRAY); 0 if it is not one."""
        data = self.data
        headers = self.headers
        for length in self.header_lengths:
            h = headers.get(data[start : start + length])
            if h is not None:
                break
        else:
            h = self.match_header(start)
            if h is None:
                return 0
        nd_t0_bb, t0, new_t0, dt, shape, dims, n, fortran, length, eager, shaped, hosted = h
        at = start + length
        if data[at + n : at + n + 4] != b"\x94t\x94b":
            return 0
        raw: Any
        arr: Any
        if hosted:  # listing: the bytes, and what they are (no numpy)
            raw = data[at : at + n]
            arr = nr.HostArray(shape, dt, raw, fortran)
        elif not eager:
            raw = LazyArray((n,), "uint8", self.path, at)
            arr = LazyArray(shape, dt, self.path, at, fortran_order=fortran)
        else:
            raw = data[at : at + n]
            np = nr.numpy()
            if not shaped:
                arr = np.frombuffer(raw, dt)
            elif fortran:
                arr = np.ndarray(shape, dt, raw, 0, None, "F")
            else:  # (one call: frombuffer then reshape costs 1.5x as much)
                arr = np.ndarray(shape, dt, raw)
        memo = self.memo
        if new_t0:
            memo.append(t0)
        state = _STATE_F if fortran else _STATE_C
        if dims:
            memo.extend((nd_t0_bb, arr, shape, raw, state))
        else:
            memo.extend((nd_t0_bb, arr, raw, state))
        self.stack.append(arr)
        return at + n + 4

    def match_header(self, start: int) -> tuple | None:
        m = self.match_fast(self.data, start)
        if m is None:
            return None
        g = m.groups()
        memo, u32, u16, i32 = self.memo, self.u32, self.u16, self.i32
        try:
            nd = memo[g[0][0] if g[0] is not None else u32(g[1])[0]]
            if type(nd) is not _Global or nd.tag != "np_ndarray":
                return None
            if g[2] is not None or g[3] is not None:
                t0 = memo[g[2][0] if g[2] is not None else u32(g[3])[0]]
                new_t0 = False
            else:
                t0, new_t0 = _ZERO_TUPLE, True
            bb = memo[g[4][0] if g[4] is not None else u32(g[5])[0]]
            dt = memo[g[8][0] if g[8] is not None else u32(g[9])[0]]
        except IndexError:
            return None
        if type(dt) is nr.PendingDtype:
            dt = dt.dtype
        if type(t0) is _Special or type(bb) is _Special:
            return None  # the opcode by opcode path makes them
        if type(dt) is not nr.PlainDtype:
            np = loaded_numpy()  # no numpy imported: no numpy dtype exists
            if np is None or not isinstance(dt, np.dtype) or dt.hasobject:
                return None
        shape: tuple = ()
        dims = g[6]
        if dims is not None:
            out = []
            i, nd_ = 0, len(dims)
            while i < nd_:
                c = dims[i]
                if c == 0x4B:
                    out.append(dims[i + 1])
                    i += 2
                elif c == 0x4D:
                    out.append(u16(dims, i + 1)[0])
                    i += 3
                else:
                    out.append(i32(dims, i + 1)[0])
                    i += 5
            if len(out) != g[7][0] - 0x84 or min(out) < 0:
                return None
            shape = tuple(out)
        n = g[11][0] if g[11] is not None else u32(g[12])[0]
        size = 1
        for d in shape:
            size *= d
        if size * dt.itemsize != n:
            return None
        length = m.end() - start
        fortran = g[10] == b"\x88"
        eager = not (self.lazy and n >= LAZY_MIN_BYTES)
        hosted = eager and nr.in_listing()  # listing: a HostArray, not an array in memory
        eager = eager and not hosted
        if type(dt) is nr.PlainDtype:  # a name for a LazyArray, numpy's dtype for frombuffer
            dt = dt.numpy() if eager else dt.spec
        # (ndarray, (0,), b'b') is the same tuple for every array of the header: one object
        h = (
            (nd, t0, bb),
            t0,
            new_t0,
            dt,
            shape,
            dims is not None,
            n,
            fortran,
            length,
            eager,
            len(shape) != 1 or fortran,
            hosted,
        )
        if len(self.headers) < 1024:
            self.headers[self.data[start : start + length]] = h
            if length not in self.header_lengths:
                self.header_lengths.append(length)
        return h
