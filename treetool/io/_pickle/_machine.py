"""The safe pickle reader's opcode machine: `_Machine`, one object per file read.

The machine holds what `pickle.Unpickler` holds (the stack, the marks, the memo, the position)
as attributes, and runs the opcodes through a table indexed by opcode byte: one method per
opcode family (constants, strings and bytes, containers, sets, the memo, globals and objects,
framing, the refused ones; `_pickle_families`). The families that fill a checkpoint (MEMOIZE,
BINGET, the small ints, the short strings, MARK, SETITEMS, APPENDS, the empty containers and
the small tuples) run inline in `run`, a loop over local variables: a method call per opcode
costs about as much as the opcode itself, and these are 90-99% of the opcodes of a real
checkpoint. Every other opcode is dispatched through the table. Also inline: a short string
takes the MEMOIZE that follows it, and a BINGET of numpy's `_reconstruct` followed by an array
header seen before makes the array from the bytes in memory (`fast_array` does the same, and
the rest), then the arrays that follow it while they are more of the same: a dict's records
(a short string key and its MEMOIZE, or a key from the memo, then the array) or a list's (the
array alone), each checked whole (the key, the BINGET, a header seen before, the data and what
ends an array) before anything is made from it, so that the effect on the stack and the memo
is the opcodes' and a record that is anything else is read opcode by opcode, with every check.
The run also goes on from one dict of arrays to the next of the same parent (SETITEMS, then
`key: {` and MARK: a nested checkpoint's next layer), and tries the header before the current
one first when the header changes (layers alternate a bias's and a kernel's).

The state and the operations the families share (the memo, globals, calls, BUILD, numpy's
per-array opcode sequence replayed in one step by `fast_array`) are `_pickle_state._State`.

Invariants the methods keep: `self.stack` is the current stack (the loop rebinds its local
copy after each dispatched opcode, and every rebinding in the loop is written back), and
`self.pos` is the position just past the opcode being run (the loop writes it before a
dispatch; a method that consumes argument bytes advances it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from treetool._leaves._dtypes import loaded_numpy
from treetool._source import check_stop, stop_event
from treetool.io._pickle import _numpy_rebuild as nr
from treetool.io._pickle._families import _Families
from treetool.io._pickle._layers import run_layers
from treetool.io._pickle._ops import SHAREABLE, _appends, _setitems
from treetool.io._pickle._salvage import offer_snapshot
from treetool.io._pickle._state import _SIMPLE_KEYS, _STATE_C, _STATE_F, _UNDEF, _Fail, _Special
from treetool.io._safety._budget import NODE_COST

__all__ = ["_Fail", "_Machine"]

#: the bytes each opcode that makes a container or an object charges to the allocation budget
#: (`_safety/_budget.py`): a list, dict or object NODE_COST (300: itself and the tree node a
#: view builds for it), a tuple 64 (itself: it is as often a dict key or a reconstructor's
#: arguments, which become no node); sets are charged by their family (`_SET_COST`, items)
_COST = tuple(
    NODE_COST if op in b"]}ldRoi\x81\x92" else 64 if op in b")t\x85\x86\x87" else 0
    for op in range(256)
)
_BATCH = 1 << 18  # bytes counted between two charges


def _why(pos: int) -> str:
    return f"containers and objects made ({NODE_COST} bytes each, a tuple 64), at byte {pos - 1}"


class _Machine(_Families):
    """The opcode machine for one file: `run()` returns the tree or raises `_Fail`/`LoadError`.

    Example:
        >>> import pickle
        >>> from treetool.io._safety._budget import Budget
        >>> data = pickle.dumps({"a": [1, 2.5, "x"]}, protocol=4)
        >>> _Machine(data, "f.pkl", True, False, Budget("f.pkl", len(data)), set()).run()
        {'a': [1, 2.5, 'x']}
    """

    def _table(self) -> list[Callable[[int], None]]:
        table: list[Callable[[int], None]] = [self._unknown] * 256
        families: tuple[tuple[Callable[[int], None], bytes], ...] = (
            (self._constants, b"NFGIJKLM\x88\x89\x8a\x8b"),
            (self._strings, b"BCSTUVX\x8c\x8d\x8e\x96\x98"),
            (self._containers, b"()ltdsaeu]}\x85\x86\x87012"),
            (self._sets, b"\x8f\x90\x91"),
            (self._memo, b"pqrghj\x94"),
            (self._objects, b"ci\x93Rbo\x81\x92"),
            (self._framing, b"\x80\x95"),
            (self._refused, b"PQ\x82\x83\x84\x97"),
        )
        for method, ops in families:
            for op in ops:
                table[op] = method
        return table

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> Any:
        """Run the opcodes from the start; the tree STOP returns."""
        data = self.data
        pos = self.pos
        stack = self.stack
        metastack = self.metastack
        memo = self.memo
        memo_append, memo_extend = memo.append, memo.extend
        append = stack.append
        headers_get, header_lengths = self.headers.get, self.header_lengths
        np = loaded_numpy()  # bound when the first array is made in memory
        frombuffer = np.frombuffer if np is not None else None
        ndarray: Any = np.ndarray if np is not None else None
        i32, u16, f64 = self.i32, self.u16, self.f64
        keycheck = self.keycheck
        simple_keys = _SIMPLE_KEYS
        shareable = SHAREABLE
        shared_add = self.shared.add
        fail = self.fail
        table = self._table()  # opcode byte -> the method of its family
        fast_array = self.fast_array
        reconstruct = self.reconstruct
        end = self.end
        # every container or object made is charged to the allocation budget (`_COST`), in
        # batches of `_BATCH` bytes: one add and one compare per opcode that makes one
        cost = _COST
        made, charge_at = 0, _BATCH
        charge_alloc = self.budget.charge_alloc
        watch = self.watch
        stop = stop_event()  # set when a read beside this one failed (a diff's other side)
        undef, special, state_c, state_f = _UNDEF, _Special, _STATE_C, _STATE_F
        try:
            while True:
                op = data[pos]
                pos += 1
                # the most frequent opcodes first; IndexError (truncated data, stack
                # underflow) is turned into a LoadError below
                if op == 0x68:  # BINGET
                    v = memo[data[pos]]
                    pos += 1
                    if v is reconstruct:  # numpy's _reconstruct: an array, in one step
                        # the common case inline (a header seen before, the data in memory);
                        # fast_array does the same and the rest
                        for length in header_lengths:
                            hb = data[pos : pos + length]
                            h = headers_get(hb)
                            if h is not None:
                                break
                        else:
                            h = None
                        if h is not None and h[9]:
                            nd_t0_bb, t0, new_t0, dt, shape, dims, n, fortran, _, _, shaped, _ = h
                            at = pos + length
                            if data[at + n : at + n + 4] == b"\x94t\x94b":
                                if frombuffer is None:  # (an eager header imported numpy)
                                    frombuffer = nr.numpy().frombuffer
                                    ndarray = nr.numpy().ndarray
                                idx, key, kmemo = data[pos - 1], None, False
                                tmpl: bytes | None = None
                                alt_hb: bytes | None = None  # the header before this one
                                alt_h, alt_len = h, 0
                                h2: tuple[Any, ...] | None
                                layer: list[tuple[Any, ...]] | None = None  # this layer's records
                                state = state_f if fortran else state_c
                                common = new_t0 and dims
                                while True:
                                    raw = data[at : at + n]
                                    if not shaped:
                                        arr = frombuffer(raw, dt)
                                    elif fortran:
                                        arr = ndarray(shape, dt, raw, 0, None, "F")
                                    else:  # (one call: frombuffer and reshape cost 1.5x)
                                        arr = ndarray(shape, dt, raw)
                                    if kmemo and common:  # a dict's record, as numpy writes it
                                        append(key)
                                        memo_extend((key, t0, nd_t0_bb, arr, shape, raw, state))
                                    elif common and key is not None:  # a key from the memo
                                        append(key)
                                        memo_extend((t0, nd_t0_bb, arr, shape, raw, state))
                                    else:
                                        if key is not None:
                                            append(key)
                                            if kmemo:
                                                memo_append(key)
                                        if new_t0:
                                            memo_append(t0)
                                        if dims:
                                            memo_extend((nd_t0_bb, arr, shape, raw, state))
                                        else:
                                            memo_extend((nd_t0_bb, arr, raw, state))
                                    append(arr)
                                    pos = at + n + 4
                                    # the next record, if it is another array: a short string
                                    # key and its MEMOIZE or a key from the memo (a dict's), or
                                    # nothing (a list's), the same BINGET of `_reconstruct`, a
                                    # header seen before, the data. It is checked whole before
                                    # anything is made from it; anything else (a FRAME,
                                    # SETITEMS, a new header...) is read by the loop, with all
                                    # its checks. The memo entries a cached header names cannot
                                    # change here: this only appends to the memo. `tmpl`: the
                                    # bytes from the key's MEMOIZE to the end of the header,
                                    # once two records in a row had the same.
                                    if pos + 2 >= end:
                                        break
                                    c = data[pos]
                                    if c == 0x75 and watch is None:
                                        # SETITEMS ending a dict of these records, then the
                                        # next `key: {` of its parent (SHORT_BINUNICODE,
                                        # MEMOIZE, EMPTY_DICT, MEMOIZE, MARK): the next layer
                                        # of a nested checkpoint. Checked before anything is
                                        # done; once done, the stacks and the memo are the
                                        # opcodes', and a record that follows is checked below
                                        # as any other (else the loop reads it)
                                        if data[pos + 1] != 0x8C or not metastack:
                                            break
                                        q = pos + 3 + data[pos + 2]
                                        if data[q : q + 4] != b"\x94}\x94(" or len(stack) % 2:
                                            break
                                        outer = metastack[-1]
                                        if not outer or type(outer[-1]) is not dict:
                                            break
                                        keys = stack[::2]
                                        if not simple_keys.issuperset(map(type, keys)):
                                            break
                                        try:
                                            key = data[pos + 3 : q].decode("utf-8", "surrogatepass")
                                        except UnicodeDecodeError:
                                            break
                                        # a layer of records only (keys from the memo): the
                                        # next layers are read as more of the same
                                        same = layer and 2 * len(layer) == len(stack)
                                        outer[-1].update(zip(keys, stack[1::2]))
                                        # (the MARK puts `outer` back on the metastack)
                                        d: dict[Any, Any] = {}
                                        outer.extend((key, d))
                                        memo_extend((key, d))
                                        self.stack = stack = []
                                        append = stack.append
                                        pos = q + 4
                                        if stop is not None and stop.is_set():
                                            check_stop(self.path)
                                        if same:
                                            pos, stack = run_layers(
                                                data,
                                                pos,
                                                end,
                                                tuple(layer),  # type: ignore[arg-type]
                                                stack,
                                                metastack,
                                                memo_extend,
                                                frombuffer,
                                                ndarray,
                                                stop,
                                                self.path,
                                            )
                                            self.stack = stack
                                            append = stack.append
                                            break
                                        layer = []
                                        if pos + 2 >= end:
                                            break
                                        c = data[pos]
                                    if c == 0x8C:  # SHORT_BINUNICODE, MEMOIZE, BINGET
                                        # (not a record of `layer`: the layer's count of
                                        # records then falls short of its stack, no template)
                                        q = pos + 2 + data[pos + 1]
                                        hp = q + 3
                                        if data[q : hp + length] != tmpl:
                                            if q + 2 >= end or data[q + 2] != idx:
                                                break
                                            if data[q] != 0x94 or data[q + 1] != 0x68:
                                                break
                                            tmpl = None
                                        try:
                                            key = data[pos + 2 : q].decode("utf-8", "surrogatepass")
                                        except UnicodeDecodeError:
                                            break
                                        kmemo = True
                                        if tmpl:
                                            at = hp + length
                                            if data[at + n : at + n + 4] != b"\x94t\x94b":
                                                break
                                            continue
                                    elif c == 0x68:  # BINGET, of a key or not
                                        i = data[pos + 1]
                                        if i == idx:
                                            key, kmemo, hp = None, False, pos + 2
                                        elif (
                                            pos + 3 < end
                                            and data[pos + 2] == 0x68
                                            and data[pos + 3] == idx
                                            and i < len(memo)
                                            and type(memo[i]) is str
                                        ):
                                            key, kmemo, hp = memo[i], False, pos + 4
                                        else:
                                            break
                                    else:
                                        break
                                    hb2 = data[hp : hp + length]
                                    if hb2 != hb:  # another header: one seen before?
                                        # first the one before this one (a nested
                                        # checkpoint's layers alternate two headers)
                                        if data[hp : hp + alt_len] == alt_hb:
                                            h2, hb2 = alt_h, alt_hb
                                        else:
                                            h2 = headers_get(hb2)
                                            if h2 is None:
                                                for i in header_lengths:
                                                    if i != length:
                                                        hb2 = data[hp : hp + i]
                                                        h2 = headers_get(hb2)
                                                        if h2 is not None:
                                                            break
                                                else:
                                                    break
                                            if not h2[9]:
                                                break
                                        alt_hb, alt_h, alt_len, h = hb, h, length, h2
                                        (
                                            nd_t0_bb,
                                            t0,
                                            new_t0,
                                            dt,
                                            shape,
                                            dims,
                                            n,
                                            fortran,
                                            length,
                                        ) = h[:9]
                                        shaped, hb, tmpl = h[10], hb2, None
                                        state = state_f if fortran else state_c
                                        common = new_t0 and dims
                                    elif c == 0x8C:  # the same again: its template
                                        tmpl = data[hp - 3 : hp + length]
                                    at = hp + length
                                    if data[at + n : at + n + 4] != b"\x94t\x94b":
                                        break
                                    if layer is not None:
                                        if key is not None and not kmemo and common:
                                            rec = (data[pos:at], at - pos, key, n, dt, shape)
                                            layer.append(
                                                (*rec, shaped, fortran, t0, nd_t0_bb, state)
                                            )
                                        else:
                                            layer = None
                                continue
                        if nxt := fast_array(pos):
                            pos = nxt
                            continue
                    elif type(v) is special:  # undefined, or an array state to make
                        if v is undef:
                            raise fail(f"memo key {data[pos - 1]} is undefined", pos - 2)
                        v = self.memo_special(data[pos - 1])
                    if type(v) in shareable:
                        shared_add(id(v))
                    append(v)
                elif op == 0x94:  # MEMOIZE
                    memo_append(stack[-1])
                elif op == 0x4B:  # BININT1
                    append(data[pos])
                    pos += 1
                elif op == 0x85:  # TUPLE1
                    made += 64
                    if made >= charge_at:
                        charge_alloc(made - charge_at + _BATCH, _why(pos))
                        charge_at = made + _BATCH
                    stack[-1] = (stack[-1],)
                elif op == 0x28:  # MARK
                    metastack.append(stack)
                    self.stack = stack = []
                    append = stack.append
                elif op == 0x8C:  # SHORT_BINUNICODE, and the MEMOIZE that follows it
                    n = data[pos]
                    b = data[pos + 1 : pos + 1 + n]
                    if len(b) != n:
                        self.need(n, pos + 1, "SHORT_BINUNICODE")
                    try:
                        b = b.decode("utf-8", "surrogatepass")
                    except UnicodeDecodeError:
                        raise fail("bad UTF-8 string", pos) from None
                    append(b)
                    pos += 1 + n
                    if pos < end and data[pos] == 0x94:
                        memo_append(b)
                        pos += 1
                elif op == 0x75:  # SETITEMS
                    if not metastack:
                        raise fail("MARK expected but missing", pos - 1)
                    items = stack
                    self.stack = stack = metastack.pop()
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
                    if stop is not None and stop.is_set():  # every batch of 1000 items
                        check_stop(self.path)
                    if watch is not None and watch._wanted():
                        self.pos = pos
                        offer_snapshot(self)
                elif op == 0x7D:  # EMPTY_DICT
                    made += 300  # NODE_COST
                    if made >= charge_at:
                        charge_alloc(made - charge_at + _BATCH, _why(pos))
                        charge_at = made + _BATCH
                    append({})
                elif op == 0x87:  # TUPLE3
                    made += 64
                    if made >= charge_at:
                        charge_alloc(made - charge_at + _BATCH, _why(pos))
                        charge_at = made + _BATCH
                    if len(stack) < 3:
                        raise fail("stack underflow in TUPLE3", pos - 1)
                    stack[-3:] = [(stack[-3], stack[-2], stack[-1])]
                elif op == 0x86:  # TUPLE2
                    made += 64
                    if made >= charge_at:
                        charge_alloc(made - charge_at + _BATCH, _why(pos))
                        charge_at = made + _BATCH
                    if len(stack) < 2:
                        raise fail("stack underflow in TUPLE2", pos - 1)
                    stack[-2:] = [(stack[-2], stack[-1])]
                elif op == 0x89:  # NEWFALSE
                    append(False)
                elif op == 0x88:  # NEWTRUE
                    append(True)
                elif op == 0x4A:  # BININT
                    if pos + 4 > end:
                        self.need(4, pos, "BININT")
                    append(i32(data, pos)[0])
                    pos += 4
                elif op == 0x4E:  # NONE
                    append(None)
                elif op == 0x47:  # BINFLOAT
                    if pos + 8 > end:
                        self.need(8, pos, "BINFLOAT")
                    append(f64(data, pos)[0])
                    pos += 8
                elif op == 0x5D:  # EMPTY_LIST
                    made += 300  # NODE_COST
                    if made >= charge_at:
                        charge_alloc(made - charge_at + _BATCH, _why(pos))
                        charge_at = made + _BATCH
                    append([])
                elif op == 0x29:  # EMPTY_TUPLE
                    made += 64
                    if made >= charge_at:
                        charge_alloc(made - charge_at + _BATCH, _why(pos))
                        charge_at = made + _BATCH
                    append(())
                elif op == 0x65:  # APPENDS
                    if not metastack:
                        raise fail("MARK expected but missing", pos - 1)
                    items = stack
                    self.stack = stack = metastack.pop()
                    append = stack.append
                    if not stack:
                        raise fail("stack underflow in APPENDS", pos - 1)
                    _appends(stack[-1], items, pos - 1, fail)
                    if stop is not None and stop.is_set():
                        check_stop(self.path)
                    if watch is not None and watch._wanted():
                        self.pos = pos
                        offer_snapshot(self)
                elif op == 0x4D:  # BININT2
                    if pos + 2 > end:
                        self.need(2, pos, "BININT2")
                    append(u16(data, pos)[0])
                    pos += 2
                elif op == 0x2E:  # STOP
                    if not stack:
                        raise fail("malformed pickle: STOP with an empty stack", pos - 1)
                    self.pos = pos
                    return stack[-1]  # as pickle does, whatever else is left on the stacks
                else:  # every other opcode: its family's method
                    if cost[op]:
                        made += cost[op]
                        if made >= charge_at:
                            charge_alloc(made - charge_at + _BATCH, _why(pos))
                            charge_at = made + _BATCH
                    self.pos = pos
                    table[op](op)
                    pos = self.pos
                    stack = self.stack
                    append = stack.append
                    reconstruct = self.reconstruct
        except IndexError:
            pos = max(pos, self.pos)
            if pos >= self.end:
                raise fail("truncated pickle: the data ends before STOP", self.end) from None
            raise fail("malformed pickle: stack underflow", pos) from None
