"""Safe pickle loading: treetool's own opcode-level reader, which never runs a file's code.

Why an opcode reader and not `pickle.Unpickler` with a restricted `find_class`: the C unpickler
reads every payload into memory (2 GB of arrays cost 2-4 GB), allocates whatever a length field
claims before it reads, and calls what `find_class` returns. This reader walks the opcodes of
protocols 0-5 over a memory map of the file, seeks past large payloads (they become `LazyArray`
leaves that point into the file), checks every length against the bytes left, and calls only
treetool's imitations of the allow-listed reconstructors (numpy arrays, dtypes and scalars,
ml_dtypes, jax arrays and PRNG keys, `_codecs.encode`, builtin containers, complex, set,
OrderedDict, defaultdict). Every other global becomes an inert `GlobalRef`, and calling or
instantiating one makes an `Opaque` node that only records. EXT1/2/4, PERSID/BINPERSID and
out-of-band buffers are refused.

Speed: the reader is pure Python, so it replays the opcode sequence numpy writes for each array
(about 25 opcodes) in one step, after a compiled pattern matched it (`_FAST_ARRAY`); the effect
on the stack and the memo is the same as opcode by opcode. Then containers are checked once,
iteratively (`walk_check`): no cycles, at most `MAX_DEPTH` levels.

Budgets (`treetool.io._budget`): what a file of N bytes may make the reader build. Every
opcode consumes at least one byte and makes at most one object; what costs more than 64 bytes
per byte read is charged to the budget's allocation limit (empty sets, memo slots skipped over
by a PUT, copies made by reconstructors, payloads read with `lazy=False`). Tuple and frozenset
dict keys and set items are checked before CPython hashes them (depth, and the hashing work
through shared references), and the tree's expanded size (leaves and edges, each shared
container counted at every reference) is computed once per distinct container.

Large `bytes` values that are not array data also stay in the file, as `uint8` LazyArray
leaves (`lazy=False` reads them).

`trust=True` is the plain `pickle.load`.
"""

from __future__ import annotations

import collections
import mmap
import pickle as _stdlib_pickle
import re
import struct
from typing import Any

import numpy as np

from .._arrays import LazyArray
from .._errors import LoadError, UnsafeError
from . import _numpy_rebuild as nr
from ._budget import Budget, BudgetError
from ._functions import collapse_functions, needs_collapse
from ._opaque import GlobalRef, Opaque
from ._pickle_ops import (
    ALLOWED,
    BUILTIN_TYPES,
    MAX_DEPTH,
    SHAREABLE,
    KeyCheck,
    PendingKey,
    WalkResult,
    _appends,
    _ascii,
    _ascii_or_bytes,
    _dynamic_class_path,
    _prng_key,
    _setitems,
    _short,
    _text_number,
    _text_string,
    _utf8,
    imitate,
    walk_check,
)
from ._source import source_for

__all__ = ["MAX_DEPTH", "ParseResult", "read_pickle", "walk_check"]

#: payloads at least this big stay in the file (LazyArray leaves)
LAZY_MIN_BYTES = 4096

_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U16 = struct.Struct("<H").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_F64 = struct.Struct(">d").unpack_from

# The pickle numpy writes for each array after the first (protocol 4+), from just after the
# BINGET of `_reconstruct` up to the data bytes: ndarray, (0,), b'b', TUPLE3, REDUCE, MARK, 1,
# shape, dtype, fortran flag, data opcode. `_fast_array` replays its exact effect on the stack
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


_UNDEF = object()  # a memo slot skipped over by a PUT with a larger index
_MEMO_GAP = 4096
_SET_COST = 216 - 64  # an empty set, beyond the 64 bytes a byte of the file may make
_SIMPLE_KEYS = frozenset((str, int))


def _over_reads(data: Any) -> tuple[Any, ...]:
    """The struct and regex helpers of `_run` for a buffer that only supports slicing."""

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

    return sliced(_U32, 4), sliced(_I32, 4), sliced(_U16, 2), sliced(_U64, 8), match


class ParseResult:
    """What a safe read produced: the tree, the blocked class paths, and an error if partial."""

    __slots__ = ("blocked", "error", "tree")

    def __init__(self, tree: Any, blocked: list[str], error: str | None = None) -> None:
        self.tree = tree
        self.blocked = blocked
        self.error = error


class _Fail(Exception):
    """Raised inside the reader; carries the message and the byte offset."""


def read_pickle(
    path: str, *, trust: bool = False, lazy: bool = True, partial: bool = False
) -> ParseResult:
    """Read a pickle file; never runs its code unless `trust=True`.

    Example:
        >>> import pickle, tempfile, os, numpy as np
        >>> f = os.path.join(tempfile.mkdtemp(), "ckpt.pkl")
        >>> with open(f, "wb") as fh:
        ...     pickle.dump({"w": np.ones((2, 3), np.float32), "step": 7}, fh)
        >>> r = read_pickle(f)
        >>> r.tree["w"].shape, r.tree["w"].dtype, r.tree["step"], r.blocked
        ((2, 3), dtype('float32'), 7, [])
    """
    if trust:
        try:
            with source_for(path).open() as fh:
                return ParseResult(_stdlib_pickle.load(fh), [])
        except Exception as e:  # the file's own code ran: anything can come out of it
            raise LoadError(f"{path}: {type(e).__name__}: {e}") from None
    try:
        src = source_for(path)
        size = src.size
        if size == 0:
            raise LoadError(f"{path}: empty file")
        mm = src.buffer()  # a memory map; remotely, block-cached ranged reads
    except OSError as e:
        raise LoadError(f"{path}: {e.strerror or e}") from None
    budget = Budget(path, size)
    shared: set[int] = set()  # ids of the containers the memo or DUP handed out again
    try:
        tree, error = _walk(mm, path, lazy, partial, budget, shared)
    finally:
        mm.close()
    try:
        # after an error (partial), salvage may have shared anything: no shortcut then
        checked = walk_check(tree, budget, None if error else shared)
    except BudgetError as e:
        if not partial or e.what != "expanded":
            raise
        tree = _what_fits(tree, budget)
        checked = walk_check(tree, budget)
        error = str(e).split("; `--partial`")[0]
    blocked = checked.blocked
    if needs_collapse(blocked):  # functions become one leaf each, named, never opened
        tree, blocked = collapse_functions(tree)
    return ParseResult(tree, blocked, error)


def _what_fits(tree: Any, budget: Budget) -> Any:
    """With `partial`, a tree past the expanded-size budget: the leading part of it that fits.

    Children are kept in order while their expanded size fits; the first one that does not is
    cut the same way, and the rest are left out. Only the containers along the cut are copied.
    """
    room = budget.max_expanded
    sizes: dict[int, int] = {}
    _sizes(tree, room, sizes, 0, budget.path)
    return _prefix(tree, room, sizes)[0]


def _sizes(x: Any, room: int, sizes: dict[int, int], depth: int, path: str) -> int:
    # the expanded size of x, or something > room where it does not fit (sizes memoised by id)
    known = sizes.get(id(x))
    if known is not None:
        return known
    t = type(x)
    if t in _CUT:
        total = len(x)
        if depth < 64:
            for c in x.values() if isinstance(x, dict) else x:
                total += _sizes(c, room, sizes, depth + 1, path)
                if total > room:
                    break
        else:
            total = room + 1
    elif t in (Opaque, set, frozenset) or (t is np.ndarray and x.dtype.hasobject):
        b = Budget(path, 0)
        b.max_expanded = room
        try:
            total = walk_check(x, b).expanded
        except LoadError:
            total = room + 1
    else:
        return 0
    sizes[id(x)] = total
    return total


def _prefix(x: Any, room: int, sizes: dict[int, int]) -> tuple[Any, int]:
    if sizes.get(id(x), 0) <= room:
        return x, sizes.get(id(x), 0)
    t = type(x)
    if t not in _CUT:
        return None, 0
    used = 0
    kept: list = []
    for item in x.items() if isinstance(x, dict) else x:
        c = item[1] if isinstance(x, dict) else item
        need = 1 + sizes.get(id(c), 0)
        if used + need <= room:
            kept.append(item)
            used += need
            continue
        if used + 1 < room and type(c) in _CUT:
            sub, n = _prefix(c, room - used - 1, sizes)
            kept.append((item[0], sub) if isinstance(x, dict) else sub)
            used += 1 + n
        break
    if t is list:
        return kept, used
    if t is tuple:
        return tuple(kept), used
    if t is collections.defaultdict:
        d: Any = collections.defaultdict(x.default_factory)
        d.update(kept)
        return d, used
    return t(kept), used


_CUT = (list, tuple, dict, collections.OrderedDict, collections.defaultdict)


def _walk(
    mm: mmap.mmap, path: str, lazy: bool, partial: bool, budget: Budget, shared: set[int]
) -> tuple[Any, str | None]:
    """Run the opcodes. Returns (tree, None) or, with partial=True, (partial tree, error)."""
    state: dict[str, Any] = {
        "stack": [],
        "metastack": [],
        "keycheck": KeyCheck(budget),
        "partial": partial,
        "shared": shared,
    }
    try:
        tree = _run(mm, path, lazy, state, budget)
        return tree, state.get("frame_error")
    except (_Fail, LoadError) as e:
        msg = str(e)
        if isinstance(e, LoadError) and not msg.startswith(path):
            msg = f"{path}: {msg}"
        err = UnsafeError(msg) if isinstance(e, UnsafeError) else LoadError(msg)
        if not partial:
            raise err from None
        return _salvage(state), msg.split("; `--partial`")[0]
    except Exception as e:
        # not expected (every opcode checks its input): still one LoadError, never a traceback
        msg = f"{path}: malformed pickle ({type(e).__name__}: {nr._short(str(e))})"
        if not partial:
            raise LoadError(msg) from None
        return _salvage(state), msg


def _incomplete(x: Any) -> bool:
    return type(x) in (nr.PendingArray, nr.PendingDtype, PendingKey) or (
        type(x) is GlobalRef and bool(x.tag)
    )


def _salvage(state: dict[str, Any]) -> Any:
    """The outermost object built so far, with pending MARK items folded into it.

    Items waiting for SETITEMS/APPENDS are added to the dict or list below their MARK; values
    still under construction (an array waiting for its data) are left out, and so are keys
    that fail the key check.
    """
    stack, metastack = state["stack"], state["metastack"]
    keycheck: KeyCheck = state["keycheck"]

    def checked(msg: str, at: int) -> LoadError:
        return LoadError(msg)

    while metastack:
        items = stack
        cut = next((i for i, x in enumerate(items) if _incomplete(x)), len(items))
        items = items[:cut]
        stack = metastack.pop()
        if stack:
            top = stack[-1]
            if type(top) is dict:
                for i in range(0, len(items) - 1, 2):
                    try:
                        keycheck.keys((items[i],), 0, checked)
                        top[items[i]] = items[i + 1]
                    except (TypeError, LoadError):
                        break
            elif type(top) is list:
                top.extend(items)
    return stack[0] if stack and not _incomplete(stack[0]) else None


def _run(mm: mmap.mmap, path: str, lazy: bool, st: dict[str, Any], budget: Budget) -> Any:
    data = mm
    end = len(mm)
    pos = 0
    stack: list[Any] = st["stack"]
    metastack: list[list[Any]] = st["metastack"]
    memo: list[Any] = []
    memo_append = memo.append
    globals_: dict[tuple[str, str], Any] = {}
    append = stack.append
    u32, i32, u16, u64 = _U32, _I32, _U16, _U64
    match_fast = _FAST_ARRAY.match
    if not isinstance(data, mmap.mmap):  # a remote file: the same walk over ranged reads
        u32, i32, u16, u64, match_fast = _over_reads(data)
    reconstruct: Any = _UNDEF  # numpy's _reconstruct global, once the file names it
    keycheck: KeyCheck = st["keycheck"]
    simple_keys = _SIMPLE_KEYS
    shareable = SHAREABLE
    shared_add = st["shared"].add

    def fail(msg: str, at: int) -> _Fail:
        return _Fail(f"{path}: {msg} (at byte {at})")

    def need(n: int, at: int, what: str) -> None:
        if n < 0 or at + n > end:
            raise fail(f"truncated pickle: {what} needs {n} bytes, {max(end - at, 0)} left", at)

    def read_line(at: int, what: str) -> tuple[bytes, int]:
        nl = data.find(b"\n", at)
        if nl < 0:
            raise fail(f"truncated pickle: {what} has no end of line", at)
        return data[at:nl], nl + 1

    def payload(at: int, n: int, kind: type) -> Any:
        if lazy and n >= LAZY_MIN_BYTES:
            return LazyArray((n,), np.uint8, path, at)
        b = data[at : at + n]
        return bytearray(b) if kind is bytearray else b

    # array headers already matched: their bytes -> what they resolved to. Headers repeat
    # byte for byte across arrays of one shape and dtype; any change to an existing memo
    # entry (a PUT over it, a BUILD finishing one) empties the cache.
    headers: dict[bytes, tuple] = {}
    header_lengths: list[int] = []

    def fast_array(start: int) -> int:
        """Replay a whole numpy array pickle at `start` (see _FAST_ARRAY); 0 if it is not one."""
        for length in header_lengths:
            h = headers.get(data[start : start + length])
            if h is not None:
                break
        else:
            h = match_header(start)
            if h is None:
                return 0
        nd, t0, new_t0, bb, dt, shape, dims, n, fortran, length = h
        at = start + length
        if data[at + n : at + n + 4] != b"\x94t\x94b":
            return 0
        if lazy and n >= LAZY_MIN_BYTES:
            raw: Any = LazyArray((n,), np.uint8, path, at)
            arr: Any = LazyArray(shape, dt, path, at, fortran_order=fortran)
        else:
            raw = data[at : at + n]
            arr = np.frombuffer(raw, dt)
            if len(shape) != 1 or fortran:
                arr = arr.reshape(shape, order="F" if fortran else "C")
        if new_t0:
            memo_append(t0)
        if dims:
            memo.extend(((nd, t0, bb), arr, shape, raw, (1, shape, dt, fortran, raw)))
        else:
            memo.extend(((nd, t0, bb), arr, raw, (1, shape, dt, fortran, raw)))
        stack.append(arr)
        return at + n + 4

    def match_header(start: int) -> tuple | None:
        m = match_fast(data, start)
        if m is None:
            return None
        g = m.groups()
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
        if not isinstance(dt, np.dtype) or t0 is _UNDEF or bb is _UNDEF or dt.hasobject:
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
        h = (nd, t0, new_t0, bb, dt, shape, dims is not None, n, g[10] == b"\x88", length)
        if len(headers) < 1024:
            headers[data[start : start + length]] = h
            if length not in header_lengths:
                header_lengths.append(length)
        return h

    def pop_mark() -> list[Any]:
        nonlocal stack, append
        items = stack
        if not metastack:
            raise fail("MARK expected but missing", pos - 1)
        stack = metastack.pop()
        append = stack.append
        return items

    def find_class(module: str, name: str) -> Any:
        nonlocal reconstruct
        key = (module, name)
        g = globals_.get(key)
        if g is None:
            if module == "ml_dtypes" and nr.is_ml_dtype(name):
                g = nr.MlDtypeType(name)
            else:
                g = _Global(module, name, ALLOWED.get(key, ""))
                if g.tag == "np_reconstruct":
                    reconstruct = g
            globals_[key] = g
        return g

    def memo_put(idx: int, value: Any) -> None:
        n = len(memo)
        if idx == n:
            memo_append(value)
        elif idx < n:
            memo[idx] = value
            headers.clear()
        elif idx - n <= _MEMO_GAP:
            budget.charge_alloc(8 * (idx - n), f"memo indices skipped, at byte {pos - 1}")
            memo.extend([_UNDEF] * (idx - n))
            memo_append(value)
        else:
            raise fail(f"memo index {idx} is far beyond the {n} entries so far", pos)

    def memo_get(idx: int) -> Any:
        v = memo[idx] if 0 <= idx < len(memo) else _UNDEF
        if v is _UNDEF:
            raise fail(f"memo key {idx} is undefined", pos)
        return v

    def finalize(old: Any, new: Any) -> None:
        # BUILD completed an array or dtype: the memo entry made right after its REDUCE must
        # give the finished object too; it is among the last few entries.
        stack[-1] = new
        headers.clear()
        for i in range(len(memo) - 1, max(-1, len(memo) - 65), -1):
            if memo[i] is old:
                memo[i] = new

    def call(f: Any, args: Any, at: int) -> Any:
        if type(args) is not tuple:
            raise fail(f"REDUCE arguments are not a tuple: {_short(args)}", at)
        if type(f) is _Global:
            tag = f.tag
            if tag:
                try:
                    return imitate(tag, f, args, lazy, keycheck)
                except LoadError as e:
                    raise fail(str(e), at) from None
            return Opaque(f.class_path, args)
        if type(f) is Opaque:
            out = Opaque(f"{f.class_path}()", args)
            out.source = f
            return out
        raise fail(f"REDUCE on a value that is not callable: {_short(f)}", at)

    def instantiate(cls: Any, args: tuple, kwargs: dict | None, at: int) -> Any:
        if type(cls) is _Global:
            tag = cls.tag
            if tag == "prng_key":
                return PendingKey()
            if tag in BUILTIN_TYPES and not args and not kwargs:
                return BUILTIN_TYPES[tag]()
            if tag == "ordereddict" and not args:
                return collections.OrderedDict()
            if tag:
                return call(cls, args, at)
            return Opaque(cls.class_path, args, kwargs)
        if type(cls) is Opaque:
            out = Opaque(_dynamic_class_path(cls), args, kwargs)
            out.source = cls
            return out
        raise fail(f"NEWOBJ on a value that is not a class: {_short(cls)}", at)

    def build(inst: Any, state: Any, at: int) -> Any:
        t = type(inst)
        if t is Opaque:
            if isinstance(inst.state, dict) and isinstance(state, dict):
                inst.state.update(state)
            else:
                inst.state = state
            return inst
        try:
            if t is nr.PendingArray:
                return nr.array_from_state(state, lazy, budget)
            if t is nr.PendingDtype:
                return inst.build(state)
        except LoadError as e:
            raise fail(str(e), at) from None
        if t is PendingKey:
            return _prng_key(state)
        raise fail(f"BUILD on a {t.__name__}", at)

    try:
        while True:
            op = data[pos]
            pos += 1
            # the most frequent opcodes first; IndexError (truncated data, stack underflow) is
            # turned into a LoadError by the caller
            if op == 0x94:  # MEMOIZE
                memo_append(stack[-1])
            elif op == 0x68:  # BINGET
                v = memo[data[pos]]
                if v is _UNDEF:
                    raise fail(f"memo key {data[pos]} is undefined", pos - 1)
                pos += 1
                if v is reconstruct and (nxt := fast_array(pos)):
                    pos = nxt
                else:
                    if type(v) in shareable:
                        shared_add(id(v))
                    append(v)
            elif op == 0x4B:  # BININT1
                append(data[pos])
                pos += 1
            elif op == 0x85:  # TUPLE1
                stack[-1] = (stack[-1],)
            elif op == 0x28:  # MARK
                metastack.append(stack)
                stack = []
                append = stack.append
            elif op == 0x8C:  # SHORT_BINUNICODE
                n = data[pos]
                b = data[pos + 1 : pos + 1 + n]
                if len(b) != n:
                    need(n, pos + 1, "SHORT_BINUNICODE")
                try:
                    append(b.decode("utf-8", "surrogatepass"))
                except UnicodeDecodeError:
                    raise fail("bad UTF-8 string", pos) from None
                pos += 1 + n
            elif op == 0x75:  # SETITEMS
                if not metastack:
                    raise fail("MARK expected but missing", pos - 1)
                items = stack
                stack = metastack.pop()
                append = stack.append
                if not stack:
                    raise fail("stack underflow in SETITEMS", pos - 1)
                top = stack[-1]
                if type(top) is dict and not len(items) % 2:
                    keys = items[::2]
                    if not simple_keys.issuperset(map(type, keys)):
                        keycheck.keys(keys, pos - 1, fail)
                    try:
                        top.update(zip(keys, items[1::2]))
                    except TypeError:
                        _setitems(top, items, pos - 1, fail, keycheck)  # names the bad key
                else:
                    _setitems(top, items, pos - 1, fail, keycheck)
            elif op == 0x7D:  # EMPTY_DICT
                append({})
            elif op == 0x87:  # TUPLE3
                if len(stack) < 3:
                    raise fail("stack underflow in TUPLE3", pos - 1)
                stack[-3:] = [(stack[-3], stack[-2], stack[-1])]
            elif op == 0x86:  # TUPLE2
                if len(stack) < 2:
                    raise fail("stack underflow in TUPLE2", pos - 1)
                stack[-2:] = [(stack[-2], stack[-1])]
            elif op == 0x52:  # REDUCE
                if len(stack) < 2:
                    raise fail("stack underflow in REDUCE", pos - 1)
                args = stack.pop()
                stack[-1] = call(stack[-1], args, pos - 1)
            elif op == 0x89:  # NEWFALSE
                append(False)
            elif op == 0x88:  # NEWTRUE
                append(True)
            elif op == 0x74:  # TUPLE
                items = pop_mark()
                append(tuple(items))
            elif op == 0x62:  # BUILD
                if len(stack) < 2:
                    raise fail("stack underflow in BUILD", pos - 1)
                state_ = stack.pop()
                inst = stack[-1]
                new = build(inst, state_, pos - 1)
                if new is not inst:
                    finalize(inst, new)
            elif op == 0x43:  # SHORT_BINBYTES
                n = data[pos]
                b = data[pos + 1 : pos + 1 + n]
                if len(b) != n:
                    need(n, pos + 1, "SHORT_BINBYTES")
                append(b)
                pos += 1 + n
            elif op == 0x73:  # SETITEM
                if len(stack) < 3:
                    raise fail("stack underflow in SETITEM", pos - 1)
                v = stack.pop()
                k = stack.pop()
                _setitems(stack[-1], [k, v], pos - 1, fail, keycheck)
            elif op == 0x4A:  # BININT
                need(4, pos, "BININT")
                append(i32(data, pos)[0])
                pos += 4
            elif op == 0x4E:  # NONE
                append(None)
            elif op == 0x5D:  # EMPTY_LIST
                append([])
            elif op == 0x29:  # EMPTY_TUPLE
                append(())
            elif op == 0x61:  # APPEND
                if len(stack) < 2:
                    raise fail("stack underflow in APPEND", pos - 1)
                v = stack.pop()
                _appends(stack[-1], [v], pos - 1, fail)
            elif op == 0x65:  # APPENDS
                items = pop_mark()
                if not stack:
                    raise fail("stack underflow in APPENDS", pos - 1)
                _appends(stack[-1], items, pos - 1, fail)
            elif op == 0x71:  # BINPUT
                need(1, pos, "BINPUT")
                if not stack:
                    raise fail("BINPUT on an empty stack", pos - 1)
                memo_put(data[pos], stack[-1])
                pos += 1
            elif op == 0x72:  # LONG_BINPUT
                need(4, pos, "LONG_BINPUT")
                if not stack:
                    raise fail("LONG_BINPUT on an empty stack", pos - 1)
                memo_put(u32(data, pos)[0], stack[-1])
                pos += 4
            elif op == 0x6A:  # LONG_BINGET
                need(4, pos, "LONG_BINGET")
                v = memo_get(u32(data, pos)[0])
                pos += 4
                if v is reconstruct and (nxt := fast_array(pos)):
                    pos = nxt
                else:
                    if type(v) in shareable:
                        shared_add(id(v))
                    append(v)
            elif op == 0x4D:  # BININT2
                need(2, pos, "BININT2")
                append(u16(data, pos)[0])
                pos += 2
            elif op == 0x93:  # STACK_GLOBAL
                if len(stack) < 2:
                    raise fail("stack underflow in STACK_GLOBAL", pos - 1)
                name = stack.pop()
                module = stack.pop()
                if type(module) is not str or type(name) is not str:
                    raise fail("STACK_GLOBAL needs two strings", pos - 1)
                append(find_class(module, name))
            elif op == 0x95:  # FRAME
                need(8, pos, "FRAME")
                n = u64(data, pos)[0]
                if n > end - pos - 8:  # pickle.load refuses it: the file was cut short
                    bad = fail(
                        f"truncated pickle: a FRAME of {n} bytes, {end - pos - 8} left", pos - 1
                    )
                    if not st["partial"]:
                        raise bad
                    st.setdefault("frame_error", str(bad))  # read on: what is there is kept
                pos += 8  # frames only group opcodes; each opcode checks its own lengths
            elif op == 0x81:  # NEWOBJ
                if len(stack) < 2:
                    raise fail("stack underflow in NEWOBJ", pos - 1)
                args = stack.pop()
                if type(args) is not tuple:
                    raise fail("NEWOBJ arguments are not a tuple", pos - 1)
                stack[-1] = instantiate(stack[-1], args, None, pos - 1)
            elif op == 0x92:  # NEWOBJ_EX
                if len(stack) < 3:
                    raise fail("stack underflow in NEWOBJ_EX", pos - 1)
                kwargs = stack.pop()
                args = stack.pop()
                if type(args) is not tuple or type(kwargs) is not dict:
                    raise fail("NEWOBJ_EX needs a tuple and a dict", pos - 1)
                stack[-1] = instantiate(stack[-1], args, kwargs, pos - 1)
            elif op == 0x42 or op == 0x8E or op == 0x96:  # BINBYTES, BINBYTES8, BYTEARRAY8
                w = 4 if op == 0x42 else 8
                need(w, pos, _OP_NAMES[op])
                n = u32(data, pos)[0] if w == 4 else u64(data, pos)[0]
                pos += w
                need(n, pos, _OP_NAMES[op])
                append(payload(pos, n, bytearray if op == 0x96 else bytes))
                pos += n
            elif op == 0x58 or op == 0x8D:  # BINUNICODE, BINUNICODE8
                w = 4 if op == 0x58 else 8
                need(w, pos, _OP_NAMES[op])
                n = u32(data, pos)[0] if w == 4 else u64(data, pos)[0]
                pos += w
                need(n, pos, _OP_NAMES[op])
                append(_utf8(data[pos : pos + n], pos, fail))
                pos += n
            elif op == 0x54 or op == 0x55:  # BINSTRING, SHORT_BINSTRING (python 2 str)
                w = 4 if op == 0x54 else 1
                need(w, pos, _OP_NAMES[op])
                n = i32(data, pos)[0] if w == 4 else data[pos]
                pos += w
                need(n, pos, _OP_NAMES[op])
                raw = data[pos : pos + n]
                pos += n
                append(_ascii_or_bytes(raw))
            elif op == 0x47:  # BINFLOAT
                need(8, pos, "BINFLOAT")
                append(_F64(data, pos)[0])
                pos += 8
            elif op == 0x8A or op == 0x8B:  # LONG1, LONG4
                w = 1 if op == 0x8A else 4
                need(w, pos, _OP_NAMES[op])
                n = data[pos] if w == 1 else i32(data, pos)[0]
                pos += w
                need(n, pos, _OP_NAMES[op])
                append(int.from_bytes(data[pos : pos + n], "little", signed=True))
                pos += n
            elif op == 0x80:  # PROTO
                need(1, pos, "PROTO")
                if data[pos] > 5:
                    raise fail(f"unsupported pickle protocol {data[pos]}", pos - 1)
                pos += 1
            elif op == 0x2E:  # STOP
                if not stack:
                    raise fail("malformed pickle: STOP with an empty stack", pos - 1)
                return stack[-1]  # as pickle does, whatever else is left on the stacks
            elif op == 0x30:  # POP
                if stack:
                    stack.pop()
                else:
                    pop_mark()
            elif op == 0x31:  # POP_MARK
                pop_mark()
            elif op == 0x32:  # DUP
                if not stack:
                    raise fail("DUP on an empty stack", pos - 1)
                if type(stack[-1]) in shareable:
                    shared_add(id(stack[-1]))
                append(stack[-1])
            elif op == 0x8F:  # EMPTY_SET
                budget.charge_alloc(_SET_COST, f"empty sets, at byte {pos - 1}")
                append(set())
            elif op == 0x90:  # ADDITEMS
                items = pop_mark()
                if not stack or type(stack[-1]) is not set:
                    raise fail("ADDITEMS needs a set", pos - 1)
                keycheck.keys(items, pos - 1, fail)
                budget.charge_alloc(32 * len(items), f"set items, at byte {pos - 1}")
                try:
                    stack[-1].update(items)
                except TypeError:
                    raise fail("unhashable set item", pos - 1) from None
            elif op == 0x91:  # FROZENSET
                items = pop_mark()
                keycheck.keys(items, pos - 1, fail)
                budget.charge_alloc(32 * len(items), f"set items, at byte {pos - 1}")
                try:
                    append(frozenset(items))
                except TypeError:
                    raise fail("unhashable frozenset item", pos - 1) from None
            elif op == 0x98:  # READONLY_BUFFER
                if not stack:
                    raise fail("READONLY_BUFFER on an empty stack", pos - 1)
                if type(stack[-1]) is bytearray:
                    stack[-1] = bytes(stack[-1])
            elif op == 0x6C:  # LIST
                items = pop_mark()
                append(items)
            elif op == 0x64:  # DICT
                items = pop_mark()
                d: dict = {}
                _setitems(d, items, pos - 1, fail, keycheck)
                append(d)
            elif op == 0x63:  # GLOBAL
                line1, pos = read_line(pos, "GLOBAL")
                line2, pos = read_line(pos, "GLOBAL")
                append(find_class(_ascii(line1, pos, fail), _ascii(line2, pos, fail)))
            elif op == 0x69:  # INST
                line1, pos = read_line(pos, "INST")
                line2, pos = read_line(pos, "INST")
                cls = find_class(_ascii(line1, pos, fail), _ascii(line2, pos, fail))
                args = tuple(pop_mark())
                append(instantiate(cls, args, None, pos))
            elif op == 0x6F:  # OBJ
                items = pop_mark()
                if not items:
                    raise fail("OBJ without a class", pos - 1)
                append(instantiate(items[0], tuple(items[1:]), None, pos - 1))
            elif op in (0x49, 0x4C, 0x46):  # INT, LONG, FLOAT (text)
                line, pos = read_line(pos, _OP_NAMES[op])
                append(_text_number(op, line, pos, fail))
            elif op == 0x53:  # STRING (text, quoted)
                line, pos = read_line(pos, "STRING")
                append(_text_string(line, pos, fail))
            elif op == 0x56:  # UNICODE (text, raw-unicode-escape)
                line, pos = read_line(pos, "UNICODE")
                try:
                    append(line.decode("raw-unicode-escape"))
                except UnicodeDecodeError:
                    raise fail("bad UNICODE string", pos) from None
            elif op == 0x70 or op == 0x67:  # PUT, GET (text)
                line, pos = read_line(pos, _OP_NAMES[op])
                try:
                    idx = int(line)
                except ValueError:
                    raise fail(f"bad memo key {line[:20]!r}", pos) from None
                if op == 0x70:
                    if not stack:
                        raise fail("PUT on an empty stack", pos)
                    memo_put(idx, stack[-1])
                else:
                    v = memo_get(idx)
                    if type(v) in shareable:
                        shared_add(id(v))
                    append(v)
            elif op in (0x82, 0x83, 0x84):
                raise UnsafeError(
                    f"{path}: refused {_OP_NAMES[op]}: the copyreg extension registry is not used (at byte {pos - 1})"
                )
            elif op in (0x50, 0x51):
                raise UnsafeError(
                    f"{path}: refused {_OP_NAMES[op]}: persistent ids are not supported (at byte {pos - 1})"
                )
            elif op == 0x97:
                raise UnsafeError(
                    f"{path}: refused NEXT_BUFFER: out-of-band buffers are not supported (at byte {pos - 1})"
                )
            else:
                raise fail(f"not a pickle: unknown opcode 0x{op:02x}", pos - 1)

    except IndexError:
        st["stack"] = stack
        if pos >= end:
            raise fail("truncated pickle: the data ends before STOP", end) from None
        raise fail("malformed pickle: stack underflow", pos) from None
    except BaseException:
        st["stack"] = stack  # the stack at the error, for a partial tree
        raise


def read(
    path: str,
    *,
    trust: bool = False,
    lazy: bool = True,
    like: Any = None,
    partial: bool = False,
    format: str = "pickle",
) -> Any:
    """`treetool.io.read` for pickle files: a `Loaded` with the blocked class paths."""
    from . import Loaded

    r = read_pickle(path, trust=trust, lazy=lazy, partial=partial)
    return Loaded(r.tree, format, r.blocked, r.error)


__all__ += ["WalkResult"]
