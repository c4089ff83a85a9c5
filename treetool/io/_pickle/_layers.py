"""The layers of a nested checkpoint, read in one loop by the pickle reader's opcode machine.

A checkpoint such as `{"l0": {"b": f32[8], "w": f32[8,8]}, "l1": {...}, ...}` repeats one layer:
SETITEMS ends a layer's dict, then `key: {` (SHORT_BINUNICODE, MEMOIZE, EMPTY_DICT, MEMOIZE,
MARK) starts the next, whose records are the previous layer's byte for byte but for the data:
the BINGET of each key, the BINGET of numpy's `_reconstruct` and the array's header (memo
indices that cannot change while the machine only appends to the memo). Once the machine has
read one whole layer of such records (`_pickle_machine`), `run_layers` reads the next ones
with one comparison of those bytes per array, and stops at the first byte that differs:
everything before it has had the opcodes' effect on the stacks and the memo, and the machine
reads on from there with all its checks.
"""

from __future__ import annotations

import struct
from typing import Any

from treetool._source import check_stop

__all__ = ["run_layers"]

_U64 = struct.Struct("<Q").unpack_from

_END = b"\x94t\x94b"  # MEMOIZE TUPLE MEMOIZE BUILD: an array's state, set
_OPEN = b"\x94}\x94("  # MEMOIZE EMPTY_DICT MEMOIZE MARK: the next layer's dict, open


def run_layers(
    data: Any,
    pos: int,
    end: int,
    layer: tuple[tuple[Any, ...], ...],
    stack: list[Any],
    metastack: list[list[Any]],
    memo_extend: Any,
    frombuffer: Any,
    ndarray: Any,
    stop: Any,
    path: str,
) -> tuple[int, list[Any]]:
    """Read layers like `layer` (its records: the bytes before the data, their length, the
    key, the array's byte count, dtype, shape, whether it is reshaped and in Fortran order,
    the memo entries of its header) from `pos`, just after a layer's MARK: `stack` is that
    layer's (empty) stack, `metastack[-1][-1]` its dict. Returns the position of the first
    byte that is not more of the same, and the stack then current.

    Example:
        >>> import pickle, numpy as np
        >>> from treetool.io._safety._budget import Budget
        >>> from treetool.io._pickle._machine import _Machine
        >>> tree = {f"l{i}": {"b": np.zeros(2), "w": np.ones((2, 2))} for i in range(5)}
        >>> data = pickle.dumps(tree, protocol=4)
        >>> got = _Machine(data, "f.pkl", True, False, Budget("f.pkl", len(data)), set()).run()
        >>> list(got), got["l4"]["w"].tolist()
        (['l0', 'l1', 'l2', 'l3', 'l4'], [[1.0, 1.0], [1.0, 1.0]])
    """
    while True:
        p = pos
        for prefix, length, key, n, dt, shape, shaped, fortran, t0, head, state in layer:
            at = p + length
            if data[p:at] != prefix or data[at + n : at + n + 4] != _END:
                # a FRAME before the record (pickle starts one every 64 KiB), then the record
                f = _frame(data, p, end)
                if not f:
                    return p, stack  # the records before `p` are made
                p, at = f, f + length
                if data[p:at] != prefix or data[at + n : at + n + 4] != _END:
                    return p, stack
            raw = data[at : at + n]
            if not shaped:
                arr = frombuffer(raw, dt)
            elif fortran:
                arr = ndarray(shape, dt, raw, 0, None, "F")
            else:  # (one call: frombuffer then reshape costs 1.5x as much)
                arr = ndarray(shape, dt, raw)
            stack += (key, arr)
            memo_extend((t0, head, arr, shape, raw, state))
            p = at + n + 4
        pos = p
        # SETITEMS into this layer's dict (its keys are the layer's strings), maybe a FRAME,
        # then `key: {`
        k = pos + 1
        if data[pos:k] != b"u":
            return pos, stack
        if data[k : k + 1] == b"\x95":
            k = _frame(data, k, end)
            if not k:
                return pos, stack
        if k + 2 >= end or data[k] != 0x8C:
            return pos, stack
        q = k + 2 + data[k + 1]
        if data[q : q + 4] != _OPEN:
            return pos, stack
        try:
            name = data[k + 2 : q].decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return pos, stack
        outer = metastack[-1]
        outer[-1].update(zip(stack[::2], stack[1::2]))
        d: dict[Any, Any] = {}
        outer.extend((name, d))  # (the MARK puts `outer` back on the metastack)
        memo_extend((name, d))
        stack = []
        pos = q + 4
        if stop is not None and stop.is_set():
            check_stop(path)


def _frame(data: Any, p: int, end: int) -> int:
    """The position after a FRAME at `p` whose length fits in the file, else 0 (the machine
    reads it, and says what is wrong with it)."""
    if data[p : p + 1] != b"\x95" or p + 9 > end or _U64(data, p + 1)[0] > end - p - 9:
        return 0
    return p + 9
