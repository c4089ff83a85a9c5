"""The opcode families of the safe pickle reader's machine: one method per family.

`_Families` adds to `_pickle_state._State` the methods that `_pickle_machine._Machine.run`
dispatches through its 256-entry table (opcode byte -> method): constants, strings and bytes,
containers, sets, the memo, globals and objects, framing, the refused ones. The hot opcodes of
these families also run inline in `run`; the methods here are the complete versions, with
every check, that the table reaches for the rest.

Invariants the methods keep: `self.stack` is the current stack, and `self.pos` is the position
just past the opcode being run (a method that consumes argument bytes advances it).
"""

from __future__ import annotations

from treetool._errors import UnsafeError
from treetool.io._pickle._ops import (
    _appends,
    _ascii,
    _ascii_or_bytes,
    _setitems,
    _text_number,
    _text_string,
    _utf8,
)
from treetool.io._pickle._salvage import offer_snapshot
from treetool.io._pickle._state import _OP_NAMES, _SET_COST, _State
from treetool.io._safety._bigint import MAX_INT_BYTES, HugeInt

__all__ = ["_Families"]


class _Families(_State):
    """The opcode families, one method each, that `_Machine.run` dispatches by table.

    Example:
        >>> from treetool.io._safety._budget import Budget
        >>> f = _Families(b"K\x07", "f.pkl", True, False, Budget("f.pkl", 2), set())
        >>> f.pos = 1
        >>> f._constants(0x4B)
        >>> f.stack, f.pos
        ([7], 2)
    """

    # -- families --------------------------------------------------------------------------

    def _constants(self, op: int) -> None:
        # NONE, NEWTRUE/NEWFALSE, the binary ints and floats, LONG1/4, text INT/LONG/FLOAT
        data, pos, push = self.data, self.pos, self.stack.append
        if op == 0x4E:  # NONE
            push(None)
        elif op == 0x88 or op == 0x89:  # NEWTRUE, NEWFALSE
            push(op == 0x88)
        elif op == 0x4B:  # BININT1
            self.need(1, pos, "BININT1")
            push(data[pos])
            self.pos = pos + 1
        elif op == 0x4D:  # BININT2
            self.need(2, pos, "BININT2")
            push(self.u16(data, pos)[0])
            self.pos = pos + 2
        elif op == 0x4A:  # BININT
            self.need(4, pos, "BININT")
            push(self.i32(data, pos)[0])
            self.pos = pos + 4
        elif op == 0x47:  # BINFLOAT
            self.need(8, pos, "BINFLOAT")
            push(self.f64(data, pos)[0])
            self.pos = pos + 8
        elif op == 0x8A or op == 0x8B:  # LONG1, LONG4
            w = 1 if op == 0x8A else 4
            self.need(w, pos, _OP_NAMES[op])
            n = data[pos] if w == 1 else self.i32(data, pos)[0]
            pos += w
            self.need(n, pos, _OP_NAMES[op])
            v = int.from_bytes(data[pos : pos + n], "little", signed=True)
            push(v if n <= MAX_INT_BYTES else HugeInt(v))  # shown as `int (N digits)`
            self.pos = pos + n
        else:  # INT, LONG, FLOAT (text)
            line, self.pos = self.read_line(pos, _OP_NAMES[op])
            push(_text_number(op, line, self.pos, self.fail))

    def _strings(self, op: int) -> None:
        # unicode, bytes, bytearray and python 2 str, binary and text; READONLY_BUFFER
        data, pos, push = self.data, self.pos, self.stack.append
        if op == 0x8C or op == 0x43:  # SHORT_BINUNICODE, SHORT_BINBYTES
            n = data[pos]  # IndexError: the data ends here
            self.need(n, pos + 1, _OP_NAMES[op])
            b = data[pos + 1 : pos + 1 + n]
            push(_utf8(b, pos, self.fail) if op == 0x8C else b)
            self.pos = pos + 1 + n
        elif op == 0x42 or op == 0x8E or op == 0x96:  # BINBYTES, BINBYTES8, BYTEARRAY8
            w = 4 if op == 0x42 else 8
            self.need(w, pos, _OP_NAMES[op])
            n = self.u32(data, pos)[0] if w == 4 else self.u64(data, pos)[0]
            pos += w
            self.need(n, pos, _OP_NAMES[op])
            push(self.payload(pos, n, bytearray if op == 0x96 else bytes))
            self.pos = pos + n
        elif op == 0x58 or op == 0x8D:  # BINUNICODE, BINUNICODE8
            w = 4 if op == 0x58 else 8
            self.need(w, pos, _OP_NAMES[op])
            n = self.u32(data, pos)[0] if w == 4 else self.u64(data, pos)[0]
            pos += w
            self.need(n, pos, _OP_NAMES[op])
            push(_utf8(data[pos : pos + n], pos, self.fail))
            self.pos = pos + n
        elif op == 0x54 or op == 0x55:  # BINSTRING, SHORT_BINSTRING (python 2 str)
            w = 4 if op == 0x54 else 1
            self.need(w, pos, _OP_NAMES[op])
            n = self.i32(data, pos)[0] if w == 4 else data[pos]
            pos += w
            self.need(n, pos, _OP_NAMES[op])
            raw = data[pos : pos + n]
            self.pos = pos + n
            push(_ascii_or_bytes(raw))
        elif op == 0x53:  # STRING (text, quoted)
            line, self.pos = self.read_line(pos, "STRING")
            push(_text_string(line, self.pos, self.fail))
        elif op == 0x56:  # UNICODE (text, raw-unicode-escape)
            line, self.pos = self.read_line(pos, "UNICODE")
            try:
                push(line.decode("raw-unicode-escape"))
            except UnicodeDecodeError:
                raise self.fail("bad UNICODE string", self.pos) from None
        else:  # READONLY_BUFFER
            stack = self.stack
            if not stack:
                raise self.fail("READONLY_BUFFER on an empty stack", pos - 1)
            if type(stack[-1]) is bytearray:
                stack[-1] = bytes(stack[-1])

    def _containers(self, op: int) -> None:
        # MARK, tuples, lists, dicts: building, filling, POP, POP_MARK, DUP
        stack, at = self.stack, self.pos - 1
        if op == 0x28:  # MARK
            self.metastack.append(stack)
            self.stack = []
        elif op == 0x29:  # EMPTY_TUPLE
            stack.append(())
        elif op == 0x5D:  # EMPTY_LIST
            stack.append([])
        elif op == 0x7D:  # EMPTY_DICT
            stack.append({})
        elif op == 0x85:  # TUPLE1
            stack[-1] = (stack[-1],)
        elif op == 0x86 or op == 0x87:  # TUPLE2, TUPLE3
            k = op - 0x84
            if len(stack) < k:
                raise self.fail(f"stack underflow in {_OP_NAMES[op]}", at)
            stack[-k:] = [tuple(stack[-k:])]
        elif op == 0x74:  # TUPLE
            items = self.pop_mark()
            self.push(tuple(items))
        elif op == 0x6C:  # LIST
            items = self.pop_mark()
            self.push(items)
        elif op == 0x64:  # DICT
            items = self.pop_mark()
            d: dict = {}
            _setitems(d, items, at, self.fail, self.keycheck)
            self.push(d)
        elif op == 0x73:  # SETITEM
            if len(stack) < 3:
                raise self.fail("stack underflow in SETITEM", at)
            v = stack.pop()
            k = stack.pop()
            _setitems(stack[-1], [k, v], at, self.fail, self.keycheck)
        elif op == 0x75:  # SETITEMS
            items = self.pop_mark()
            if not self.stack:
                raise self.fail("stack underflow in SETITEMS", at)
            _setitems(self.stack[-1], items, at, self.fail, self.keycheck)
        elif op == 0x61:  # APPEND
            if len(stack) < 2:
                raise self.fail("stack underflow in APPEND", at)
            v = stack.pop()
            _appends(stack[-1], [v], at, self.fail)
        elif op == 0x65:  # APPENDS
            items = self.pop_mark()
            if not self.stack:
                raise self.fail("stack underflow in APPENDS", at)
            _appends(self.stack[-1], items, at, self.fail)
        elif op == 0x30:  # POP
            if stack:
                stack.pop()
            else:
                self.pop_mark()
        elif op == 0x31:  # POP_MARK
            self.pop_mark()
        else:  # DUP
            if not stack:
                raise self.fail("DUP on an empty stack", at)
            self.note_shared(stack[-1])
            stack.append(stack[-1])

    def _sets(self, op: int) -> None:
        # EMPTY_SET, ADDITEMS, FROZENSET: items are checked before CPython hashes them
        at = self.pos - 1
        if op == 0x8F:  # EMPTY_SET
            self.budget.charge_alloc(_SET_COST, f"empty sets, at byte {at}")
            self.push(set())
            return
        items = self.pop_mark()
        if op == 0x90 and (not self.stack or type(self.stack[-1]) is not set):  # ADDITEMS
            raise self.fail("ADDITEMS needs a set", at)
        self.keycheck.keys(items, at, self.fail)
        self.budget.charge_alloc(32 * len(items), f"set items, at byte {at}")
        try:
            if op == 0x90:
                self.stack[-1].update(items)
            else:
                self.push(frozenset(items))
        except TypeError:
            kind = "set" if op == 0x90 else "frozenset"
            raise self.fail(f"unhashable {kind} item", at) from None

    def _memo(self, op: int) -> None:
        # PUT/BINPUT/LONG_BINPUT, MEMOIZE, GET/BINGET/LONG_BINGET
        data, pos, stack = self.data, self.pos, self.stack
        if op == 0x94:  # MEMOIZE
            self.memo.append(stack[-1])
        elif op == 0x71 or op == 0x72:  # BINPUT, LONG_BINPUT
            name = _OP_NAMES[op]
            w = 1 if op == 0x71 else 4
            self.need(w, pos, name)
            if not stack:
                raise self.fail(f"{name} on an empty stack", pos - 1)
            self.memo_put(data[pos] if w == 1 else self.u32(data, pos)[0], stack[-1])
            self.pos = pos + w
        elif op == 0x68 or op == 0x6A:  # BINGET, LONG_BINGET
            w = 1 if op == 0x68 else 4
            self.need(w, pos, _OP_NAMES[op])
            v = self.memo_get(data[pos] if w == 1 else self.u32(data, pos)[0])
            self.pos = pos + w
            if v is self.reconstruct and (nxt := self.fast_array(self.pos)):
                self.pos = nxt
            else:
                self.note_shared(v)
                self.push(v)
        else:  # PUT, GET (text)
            line, self.pos = self.read_line(pos, _OP_NAMES[op])
            try:
                idx = int(line)
            except ValueError:
                raise self.fail(f"bad memo key {line[:20]!r}", self.pos) from None
            if op == 0x70:
                if not stack:
                    raise self.fail("PUT on an empty stack", self.pos)
                self.memo_put(idx, stack[-1])
            else:
                v = self.memo_get(idx)
                self.note_shared(v)
                self.push(v)

    def _objects(self, op: int) -> None:
        # GLOBAL/STACK_GLOBAL, REDUCE, BUILD, NEWOBJ/NEWOBJ_EX, INST, OBJ
        stack, at = self.stack, self.pos - 1
        if op == 0x52:  # REDUCE
            if len(stack) < 2:
                raise self.fail("stack underflow in REDUCE", at)
            args = stack.pop()
            stack[-1] = self.call(stack[-1], args, at)
        elif op == 0x62:  # BUILD
            if len(stack) < 2:
                raise self.fail("stack underflow in BUILD", at)
            state = stack.pop()
            inst = stack[-1]
            new = self.build(inst, state, at)
            if new is not inst:
                self.finalize(inst, new)
        elif op == 0x93:  # STACK_GLOBAL
            if len(stack) < 2:
                raise self.fail("stack underflow in STACK_GLOBAL", at)
            name = stack.pop()
            module = stack.pop()
            if type(module) is not str or type(name) is not str:
                raise self.fail("STACK_GLOBAL needs two strings", at)
            stack.append(self.find_class(module, name))
        elif op == 0x81:  # NEWOBJ
            if len(stack) < 2:
                raise self.fail("stack underflow in NEWOBJ", at)
            args = stack.pop()
            if type(args) is not tuple:
                raise self.fail("NEWOBJ arguments are not a tuple", at)
            stack[-1] = self.instantiate(stack[-1], args, None, at)
        elif op == 0x92:  # NEWOBJ_EX
            if len(stack) < 3:
                raise self.fail("stack underflow in NEWOBJ_EX", at)
            kwargs = stack.pop()
            args = stack.pop()
            if type(args) is not tuple or type(kwargs) is not dict:
                raise self.fail("NEWOBJ_EX needs a tuple and a dict", at)
            stack[-1] = self.instantiate(stack[-1], args, kwargs, at)
        elif op == 0x63 or op == 0x69:  # GLOBAL, INST
            name = _OP_NAMES[op]
            line1, pos = self.read_line(self.pos, name)
            line2, pos = self.read_line(pos, name)
            self.pos = pos
            cls = self.find_class(_ascii(line1, pos, self.fail), _ascii(line2, pos, self.fail))
            if op == 0x63:
                stack.append(cls)
            else:
                args = tuple(self.pop_mark())
                self.push(self.instantiate(cls, args, None, pos))
        else:  # OBJ
            items = self.pop_mark()
            if not items:
                raise self.fail("OBJ without a class", at)
            self.push(self.instantiate(items[0], tuple(items[1:]), None, at))

    def _framing(self, op: int) -> None:
        # PROTO, FRAME
        data, pos = self.data, self.pos
        if op == 0x80:  # PROTO
            self.need(1, pos, "PROTO")
            if data[pos] > 5:
                raise self.fail(f"unsupported pickle protocol {data[pos]}", pos - 1)
            self.pos = pos + 1
            return
        self.need(8, pos, "FRAME")
        n = self.u64(data, pos)[0]
        if n > self.end - pos - 8:  # pickle.load refuses it: the file was cut short
            bad = self.fail(
                f"truncated pickle: a FRAME of {n} bytes, {self.end - pos - 8} left", pos - 1
            )
            if not self.partial:
                raise bad
            if self.frame_error is None:
                self.frame_error = str(bad)  # read on: what is there is kept
        self.pos = pos + 8  # frames only group opcodes; each opcode checks its own lengths
        if self.watch is not None and self.watch._wanted():
            offer_snapshot(self)

    def _refused(self, op: int) -> None:
        # EXT1/2/4, PERSID/BINPERSID, NEXT_BUFFER
        if op in (0x82, 0x83, 0x84):
            why = "the copyreg extension registry is not used"
        elif op in (0x50, 0x51):
            why = "persistent ids are not supported"
        else:
            why = "out-of-band buffers are not supported"
        raise UnsafeError(f"{self.path}: refused {_OP_NAMES[op]}: {why} (at byte {self.pos - 1})")

    def _unknown(self, op: int) -> None:
        raise self.fail(f"not a pickle: unknown opcode 0x{op:02x}", self.pos - 1)
