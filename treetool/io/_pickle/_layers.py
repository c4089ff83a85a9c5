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

It reads in batches: first every byte of a batch of layers is checked (the same comparisons,
array by array, layer by layer), then the arrays of each record of the layer (every layer's
bias, then every layer's kernel) are made at once: the batch's array bytes are copied into one
new block per record by one numpy call, and each array is a view of its own rows of it (not
overlapping any other), read-only as the arrays the reader makes from the file's bytes
elsewhere. Then the stacks, the memo and the dicts get the opcodes' effect, layer by layer.
The memo keeps a `_RAW` placeholder where the opcodes keep an array's bytes: `memo_special`
makes them from the array if the file ever asks for them.
"""

from __future__ import annotations

import struct
from typing import Any

from treetool._source import check_stop
from treetool.io._pickle import _numpy_rebuild as nr
from treetool.io._pickle._state import _RAW

__all__ = ["run_layers"]

_U64 = struct.Struct("<Q").unpack_from

_END = b"\x94t\x94b"  # MEMOIZE TUPLE MEMOIZE BUILD: an array's state, set
_OPEN = b"\x94}\x94("  # MEMOIZE EMPTY_DICT MEMOIZE MARK: the next layer's dict, open

#: arrays of at most this many bytes are made as views of a block (bigger ones: one each)
BLOCK_MAX = 1 << 16
#: a batch ends once its layers span this many bytes of the file (the copy it makes)
SPAN_MAX = 1 << 20


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
    # each record's check: the bytes before its data, and the bytes after it (what ends an
    # array, then the next record's bytes before its data, or SETITEMS after the last): one
    # comparison of the bytes between two arrays, or of what ends one, the first time
    prefixes = [rec[0] for rec in layer]
    checks = [
        (rec[0], rec[1], rec[3], _END + (prefixes[r + 1] if r + 1 < len(layer) else b"u"))
        for r, rec in enumerate(layer)
    ]
    opened = _OPEN + prefixes[0]  # the next layer's dict, open, and its first record
    while True:
        ats: list[int] = []  # where each array's bytes start, layer by layer
        names: list[str] = []  # the key of the layer each complete layer's SETITEMS opens
        start = pos
        p = pos
        done = False  # the batch ends at a byte that is not more of the same
        ok = False  # the bytes before the data at `p` are checked already
        while True:
            for prefix, length, n, tail in checks:
                at = p + length
                if not ok and data[p:at] != prefix:
                    # a FRAME before the record (pickle starts one every 64 KiB), then it
                    f = _frame(data, p, end)
                    if not f:
                        done = True  # the records before `p` are made
                        break
                    p, at = f, f + length
                    if data[p:at] != prefix:
                        done = True
                        break
                e = at + n
                ok = data[e : e + len(tail)] == tail
                if not ok and data[e : e + 4] != _END:
                    done = True
                    break
                ats.append(at)
                p = e + 4
            if done:
                break
            # SETITEMS into this layer's dict (its keys are the layer's strings; checked
            # above when `ok`), maybe a FRAME, then `key: {`
            k = p + 1
            if not ok and data[p:k] != b"u":
                done = True
                break
            if data[k : k + 1] == b"\x95":
                k = _frame(data, k, end)
                if not k:
                    done = True
                    break
            if k + 2 >= end or data[k] != 0x8C:
                done = True
                break
            q = k + 2 + data[k + 1]
            ok = data[q : q + len(opened)] == opened
            if not ok and data[q : q + 4] != _OPEN:
                done = True
                break
            try:
                names.append(data[k + 2 : q].decode("utf-8", "surrogatepass"))
            except UnicodeDecodeError:
                done = True
                break
            p = q + 4
            if stop is not None and stop.is_set():
                check_stop(path)
            if p - start > SPAN_MAX:
                break
        stack = _apply(data, layer, ats, names, stack, metastack, memo_extend, frombuffer, ndarray)
        if done:
            return p, stack
        pos = p


def _apply(
    data: Any,
    layer: tuple[tuple[Any, ...], ...],
    ats: list[int],
    names: list[str],
    stack: list[Any],
    metastack: list[list[Any]],
    memo_extend: Any,
    frombuffer: Any,
    ndarray: Any,
) -> list[Any]:
    """Make the arrays of a checked batch (`ats`: where each one's bytes start, record after
    record, layer after layer; `names`: the layers each complete layer opens), then give the
    stacks, the memo and the dicts the opcodes' effect. Returns the stack then current."""
    nrec = len(layer)
    if not ats:
        return stack
    cols: list[list[Any]] = []  # the arrays of each record, layer by layer
    raws: list[list[Any] | None] = []  # their bytes in the memo (None: `_RAW` placeholders)
    chunk = None
    lo = ats[0]
    hi = ats[-1] + layer[(len(ats) - 1) % nrec][3]
    # the batch's bytes are copied once for its blocks: only while they are few (a layer of
    # many arrays, or of big ones made one by one, would copy more than the blocks hold)
    small = hi - lo <= 2 * SPAN_MAX
    for r, (_, _, _, n, dt, shape, shaped, fortran, *_) in enumerate(layer):
        where = ats[r::nrec]
        if fortran or not 0 < n <= BLOCK_MAX or not where or not small:
            got = [data[at : at + n] for at in where]
            if not shaped:
                cols.append([frombuffer(raw, dt) for raw in got])
            elif fortran:
                cols.append([ndarray(shape, dt, raw, 0, None, "F") for raw in got])
            else:
                cols.append([ndarray(shape, dt, raw) for raw in got])
            raws.append(got)
            continue
        if chunk is None:  # the batch's bytes, once (never a view of the file: it is closed)
            chunk = data[lo:hi]
        np = nr.numpy()
        # every n-byte window of the chunk (a view), then the rows at the arrays' offsets:
        # one new block, its rows the arrays' bytes in order
        windows = ndarray((len(chunk) - n + 1, n), np.uint8, chunk, 0, (1, 1))
        idx = np.array(where, np.intp)
        idx -= lo
        block = windows[idx]
        block.flags.writeable = False  # as the arrays made from the file's bytes elsewhere
        cols.append(list(block.view(dt).reshape((len(where), *shape))))
        raws.append(None)
    outer = metastack[-1]
    cur = outer[-1]
    keys = [rec[2] for rec in layer]
    # the memo entries of one layer: each record's (t0, header, arr, shape, raw, state), then
    # the next layer's key and dict
    entries: list[Any] = []
    for _, _, _, _, _, shape, _, _, t0, head, state in layer:
        entries += (t0, head, None, shape, _RAW, state)
    entries += (None, None)
    kept = [(r, raw) for r, raw in enumerate(raws) if raw is not None]
    j = 0
    for row, name in zip(zip(*cols), names):
        cur.update(zip(keys, row))  # SETITEMS
        entries[2::6] = row
        for r, raw in kept:
            entries[6 * r + 4] = raw[j]
        cur = {}
        entries[-2] = name
        entries[-1] = cur
        memo_extend(entries)
        outer += (name, cur)  # (the MARK puts `outer` back on the metastack)
        j += 1
    # the last layer's records so far: on its stack (its SETITEMS is not read yet)
    stack = [] if names else stack
    for r in range(len(ats) - nrec * len(names)):
        arr = cols[r][j]
        stack += (keys[r], arr)
        own = raws[r]
        e = entries[6 * r : 6 * r + 6]
        e[2] = arr
        if own is not None:
            e[4] = own[j]
        memo_extend(e)
    return stack


def _frame(data: Any, p: int, end: int) -> int:
    """The position after a FRAME at `p` whose length fits in the file, else 0 (the machine
    reads it, and says what is wrong with it)."""
    if data[p : p + 1] != b"\x95" or p + 9 > end or _U64(data, p + 1)[0] > end - p - 9:
        return 0
    return p + 9
