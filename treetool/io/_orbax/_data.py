"""Reading orbax array data safely: paths kept inside the checkpoint, bounded slices, and no
read that claims far more bytes than the checkpoint stores (unless asked with `allow_fill`).

tensorstore opens `file://` URLs percent-decoded, so every kvstore spec here is a JSON dict
with a plain `path`; every path is checked to resolve (symlinks followed) under the item's
directory before tensorstore sees it.

Example:
    >>> list(c_order_blocks((4, 3), 6))
    [(slice(0, 2, None),), (slice(2, 4, None),)]
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import threading
from collections.abc import Iterator

from treetool._errors import LoadError
from treetool._source import is_url

__all__ = [
    "FILL_READ_MIN",
    "FILL_RATIO",
    "allow_fill",
    "c_order_blocks",
    "check_component",
    "check_data_files",
    "inside",
    "stored_bytes",
]

#: a read of an array may claim up to this many bytes whatever the checkpoint stores
FILL_READ_MIN = 256 << 20
#: beyond that, at most this many times the bytes stored for it (zstd packs a zero array
#: about 30,000 times: reading one of those past 256 MiB needs `allow_fill`)
FILL_RATIO = 4096

_ALLOW_FILL: contextvars.ContextVar[bool] = contextvars.ContextVar("allow_fill", default=False)


@contextlib.contextmanager
def allow_fill() -> Iterator[None]:
    """Allow reads of orbax arrays whose chunks are missing (filled with the fill value).

    By default, reading an array whose size is beyond 256 MiB and more than 4096 times the
    bytes its checkpoint stores raises `LoadError`: a small directory can claim a huge array
    and make a read allocate and fill it. The CLI's `--allow-fill` does the same.

    Example:
        >>> from treetool.io.orbax import allow_fill
        >>> with allow_fill():
        ...     pass  # np.asarray(leaf), tt.stats(leaf), tt.diff(a, b) read sparse arrays here
    """
    token = _ALLOW_FILL.set(True)
    try:
        yield
    finally:
        _ALLOW_FILL.reset(token)


def fill_allowed() -> bool:
    """Whether `allow_fill` is active."""
    return _ALLOW_FILL.get()


def inside(root: str, path: str) -> bool:
    """Whether `path` resolves (symlinks followed) to `root` or below it."""
    if is_url(root):  # object storage has no links: the names decide
        return path == root or path.startswith(root.rstrip("/") + "/")
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def check_component(name: str, where: str) -> str:
    """`name` if it is a relative path that stays below its directory (no `..`, no `/` first)."""
    if (
        not name
        or "\0" in name
        or name.startswith(("/", "\\"))
        or any(part in ("..", ".") for part in name.replace("\\", "/").split("/"))
    ):
        raise LoadError(f"{where}: array name {name!r} leaves the checkpoint directory")
    return name


def check_data_files(root: str, top: str, where: str, limit: int = 1_000_000) -> int:
    """Check every file below `top` stays in `root` (symlinks included); returns their bytes."""
    if not inside(root, top):
        raise LoadError(f"{where}: {top} resolves outside the checkpoint {root}")
    total = 0
    seen = 0
    for dirpath, dirs, files in os.walk(top):
        for name in dirs + files:
            full = os.path.join(dirpath, name)
            seen += 1
            if seen > limit:
                raise LoadError(f"{where}: more than {limit} files under {top}")
            if os.path.islink(full) and not inside(root, full):
                raise LoadError(
                    f"{where}: {os.path.relpath(full, root)} is a link to outside the checkpoint"
                )
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(dirpath, name)).st_size
    return total


def stored_bytes(item: str, param: str, ocdbt: bool) -> int:
    """Bytes the checkpoint stores for one array (for OCDBT: all of the item's data files),
    after checking that none of those files leads out of the item's directory."""
    if is_url(item):
        return _remote_stored_bytes(item, param, ocdbt)
    if ocdbt:
        key = (item, *_mtimes(item))
        known = _ocdbt_bytes.get(key)
        if known is None:
            known = _ocdbt_bytes[key] = _ocdbt_stored_bytes(item)
        return known
    top = os.path.join(item, check_component(param, item))
    return check_data_files(item, top, item) if os.path.lexists(top) else 0


#: (item directory, its and its data directory's mtimes) -> bytes of its OCDBT data files,
#: checked once for all the arrays that share them
_ocdbt_bytes: dict[tuple, int] = {}
_ocdbt_lock = threading.Lock()


def _remote_stored_bytes(item: str, param: str, ocdbt: bool) -> int:
    """`stored_bytes` of a checkpoint in object storage, from the listing of its prefix."""
    from treetool.io._orbax._fs import sizes_under

    if not ocdbt:
        return sum(sizes_under(f"{item}/{check_component(param, item)}").values())
    key = (item, 0, 0)
    known = _ocdbt_bytes.get(key)
    if known is None:
        known = sum(
            size
            for name, size in sizes_under(item).items()
            if name.startswith(("d/", "ocdbt.process_"))
        )
        with _ocdbt_lock:  # a diff reads both sides in threads of their own
            _ocdbt_bytes[key] = known
            while len(_ocdbt_bytes) > 256:
                del _ocdbt_bytes[next(iter(_ocdbt_bytes))]
    return known


def _mtimes(item: str) -> tuple[int, int]:
    out = []
    for d in (item, os.path.join(item, "d")):
        try:
            out.append(os.stat(d).st_mtime_ns)
        except OSError:
            out.append(0)
    return out[0], out[1]


def _ocdbt_stored_bytes(item: str) -> int:
    tops = [os.path.join(item, "d")]
    with contextlib.suppress(OSError):
        tops += [os.path.join(item, n) for n in os.listdir(item) if n.startswith("ocdbt.process_")]
    manifest = os.path.join(item, "manifest.ocdbt")
    if os.path.lexists(manifest) and not inside(item, manifest):
        raise LoadError(f"{item}: manifest.ocdbt is a link to outside the checkpoint")
    return sum(check_data_files(item, t, item) for t in tops if os.path.lexists(t))


def check_claim(nbytes: int, stored: int, where: str, what: str) -> None:
    """Refuse reading `nbytes` when the checkpoint stores far fewer, unless `allow_fill`."""
    if nbytes <= max(FILL_READ_MIN, FILL_RATIO * stored) or fill_allowed():
        return
    raise LoadError(
        f"{where}: {what} claims {nbytes} bytes but the checkpoint stores {stored} for it "
        "(missing chunks would be filled); pass --allow-fill (or use "
        "treetool.io.orbax.allow_fill()) to read it anyway"
    )


def c_order_blocks(shape: tuple[int, ...], max_elems: int) -> Iterator[tuple[int | slice, ...]]:
    """Index tuples that cover an array of `shape` in C order, each at most `max_elems`
    elements and contiguous in memory (so their flattened values concatenate in order)."""
    n = len(shape)
    if n == 0:
        yield ()
        return
    if 0 in shape:
        return
    # k: the first axis whose trailing block fits; split axis k-1 into runs of rows
    k = n
    while k > 0 and math.prod(shape[k - 1 :]) <= max_elems:
        k -= 1
    if k == 0:
        rows = max(1, max_elems // math.prod(shape[1:]))
        for a in range(0, shape[0], rows):
            yield (slice(a, min(a + rows, shape[0])),)
        return
    axis = k - 1  # split this axis; every axis before it is walked one index at a time
    inner = math.prod(shape[axis + 1 :])
    step = max(1, max_elems // inner)
    for outer in _indices(shape[:axis]):
        for a in range(0, shape[axis], step):
            yield (*outer, slice(a, min(a + step, shape[axis])))


def _indices(shape: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    if not shape:
        yield ()
        return
    idx = [0] * len(shape)
    while True:
        yield tuple(idx)
        i = len(shape) - 1
        while i >= 0:
            idx[i] += 1
            if idx[i] < shape[i]:
                break
            idx[i] = 0
            i -= 1
        if i < 0:
            return
