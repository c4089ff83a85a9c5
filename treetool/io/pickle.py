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

The reader is split by concept: `_pickle_machine` runs the opcodes (`_Machine`: the hot
families inline, numpy's per-array opcode sequence replayed in one step, runs of such arrays
read in one loop; the rest through a table of `_pickle_families`, one method per family),
`_pickle_imitations` imitates the allow-listed globals (a table), `_pickle_ops` holds the
allow-list, the key check and `walk_check` (the one pass over the finished tree: no cycles, at
most `MAX_DEPTH` levels), and `_pickle_salvage` what a partial read keeps. This module is the public entry: `read_pickle` and `read`.

Budgets (`treetool.io._safety._budget`): what a file of N bytes may make the reader build. Every
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

import pickle as _stdlib_pickle
from typing import Any

from treetool._errors import LoadError, UnsafeError
from treetool._source import Source, source_for
from treetool.io._formats import Format, Probe, ReadOptions
from treetool.io._loaded import Loaded
from treetool.io._partial import PartialWatch
from treetool.io._pickle import _numpy_rebuild as nr
from treetool.io._pickle._functions import collapse_functions, needs_collapse
from treetool.io._pickle._machine import _Fail, _Machine
from treetool.io._pickle._ops import MAX_DEPTH, WalkResult, walk_check
from treetool.io._pickle._salvage import _salvage, _what_fits
from treetool.io._pickle._state import LAZY_MIN_BYTES
from treetool.io._safety._budget import Budget, BudgetError

__all__ = [
    "FORMAT",
    "LAZY_MIN_BYTES",
    "MAX_DEPTH",
    "ParseResult",
    "WalkResult",
    "read_pickle",
    "walk_check",
]


class ParseResult:
    """What a safe read produced: the tree, the blocked class paths, and an error if partial."""

    __slots__ = ("blocked", "error", "tree")

    def __init__(self, tree: Any, blocked: list[str], error: str | None = None) -> None:
        self.tree = tree
        self.blocked = blocked
        self.error = error


def read_pickle(
    path: str,
    *,
    trust: bool = False,
    lazy: bool = True,
    partial: bool = False,
    watch: PartialWatch | None = None,
) -> ParseResult:
    """Read a pickle file; never runs its code unless `trust=True`.

    `watch` (a `PartialWatch`) gets snapshots of the tree read so far when it asks for them.

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
    # standard dtypes stay numpy-free (`PlainDtype`) unless a dtype object is itself in the
    # tree: then the file is read again with numpy's dtypes (snapshots a `watch` shows during
    # the read would show them: none then)
    plain = watch is None
    while True:
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
        nr.plain_dtypes(plain)
        try:
            tree, error, object_arrays = _walk(mm, path, lazy, partial, budget, shared, watch)
        finally:
            mm.close()
            escaped = nr.plain_escaped()
        if not escaped:
            break
        plain, tree = False, None  # (the tree goes before the file is read again)
    try:
        # after an error (partial), salvage may have shared anything: no shortcut then
        checked = walk_check(tree, budget, None if error else shared, object_arrays)
    except BudgetError as e:
        if not partial or e.what != "expanded":
            raise
        tree = _what_fits(tree, budget)
        checked = walk_check(tree, budget, None, object_arrays)
        error = str(e).split("; `--partial`")[0]
    blocked = checked.blocked
    if needs_collapse(blocked):  # functions become one leaf each, named, never opened
        tree, blocked = collapse_functions(tree)
    return ParseResult(tree, blocked, error)


def _walk(
    mm: Any,
    path: str,
    lazy: bool,
    partial: bool,
    budget: Budget,
    shared: set[int],
    watch: PartialWatch | None = None,
) -> tuple[Any, str | None, bool]:
    """Run the opcodes. Returns (tree, None) or, with partial=True, (partial tree, error), and
    whether a numpy array of dtype object was made."""
    machine = _Machine(mm, path, lazy, partial, budget, shared, watch)
    try:
        tree = machine.run()
        return tree, machine.frame_error, machine.object_arrays
    except (_Fail, LoadError) as e:
        msg = str(e)
        if isinstance(e, LoadError) and not msg.startswith(path):
            msg = f"{path}: {msg}"
        err = UnsafeError(msg) if isinstance(e, UnsafeError) else LoadError(msg)
        if not partial:
            raise err from None
        return _salvage(machine), msg.split("; `--partial`")[0], machine.object_arrays
    except Exception as e:
        # not expected (every opcode checks its input): still one LoadError, never a traceback
        msg = f"{path}: malformed pickle ({type(e).__name__}: {nr._short(str(e))})"
        if not partial:
            raise LoadError(msg) from None
        return _salvage(machine), msg, machine.object_arrays


def _opcodes() -> frozenset[str]:
    import pickletools

    return frozenset(op.code for op in pickletools.opcodes)


def _sniff(probe: Probe) -> bool:
    """PROTO 2-5, then an opcode (a truncated pickle still reads as one)."""
    head = probe.head
    return head[0] == 0x80 and len(head) > 2 and 2 <= head[1] <= 5 and chr(head[2]) in _opcodes()


def _guess(probe: Probe) -> bool:
    """Protocols 0 and 1 have no header: an opcode first and STOP last."""
    if probe.head[:1].decode("latin1") not in _opcodes():
        return False
    src = probe.src
    return src.read(src.size - 1, 1) == b"."


def _read(src: Source, opts: ReadOptions) -> Loaded:
    """`treetool.io.read` for pickle files: a `Loaded` with the blocked class paths."""
    r = read_pickle(
        src.name, trust=opts.trust, lazy=opts.lazy, partial=opts.partial, watch=opts.watch
    )
    return Loaded(r.tree, "pickle", r.blocked, r.error)


FORMAT = Format("pickle", sniff=_sniff, read=_read, guess=_guess)
