"""Atomic, deliberate writes: every file treetool writes appears whole under its name or not at all.

A write goes to a fresh temporary file in the destination's own folder (created with
`O_CREAT | O_EXCL`, so a link planted at the temporary name is never followed), is flushed and
`fsync`-ed, and only then moved over the final name with `os.replace`. `os.replace` renames the
directory entry: a symbolic link planted at the final name is replaced by the new file, its target
is never opened. A write that fails (an exception, Ctrl-C, a full disk) removes the temporary file
and leaves whatever was under the final name before untouched.

An existing file (or link, or folder) under the final name is refused unless `overwrite=True`;
the refusal is one line, raised before anything is written, and again, without a race, at the
moment of the move (the move is then a hard link that cannot replace anything).

Example:
    >>> import os, tempfile
    >>> from treetool.io._atomic import atomic_write
    >>> p = os.path.join(tempfile.mkdtemp(), "out.bin")
    >>> with atomic_write(p) as fh:
    ...     _ = fh.write(b"hello")
    >>> with open(p, "rb") as fh:
    ...     fh.read()
    b'hello'
    >>> try:
    ...     with atomic_write(p) as fh:
    ...         _ = fh.write(b"again")
    ... except Exception as e:
    ...     print(type(e).__name__, str(e).replace(p, "out.bin"))
    SaveError out.bin: already exists; not replaced (pass overwrite=True to replace it)
    >>> with atomic_write(p, overwrite=True) as fh:
    ...     _ = fh.write(b"again")
    >>> with open(p, "rb") as fh:
    ...     fh.read(), sorted(os.listdir(os.path.dirname(p)))
    (b'again', ['out.bin'])
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator
from typing import BinaryIO

from treetool._errors import SaveError

__all__ = ["atomic_path", "atomic_write", "refuse_existing"]

_DEFAULT_HINT = "pass overwrite=True to replace it"


def refuse_existing(path: str, *, hint: str = _DEFAULT_HINT) -> None:
    """Raise `SaveError` in one line if anything (a file, a link, even a dangling one, a folder)
    is under `path`."""
    if os.path.lexists(path):
        raise SaveError(f"{path}: already exists; not replaced ({hint})")


def _temp_name(path: str) -> str:
    """A hidden name beside `path` that keeps its extension (writers such as `np.savez` add one
    to a name that lacks it)."""
    folder, base = os.path.split(path)
    stem, ext = os.path.splitext(base)
    return os.path.join(folder, f".{stem}.{secrets.token_hex(6)}.tmp{ext}")


def _create_temp(path: str) -> tuple[int, str]:
    """A new temporary file beside `path`, created exclusively (mode 0o666 less the umask, as
    `open(path, "wb")` would make it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(16):
        tmp = _temp_name(path)
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as e:
            raise SaveError(f"{path}: cannot write here ({e.strerror or e})") from None
    raise SaveError(f"{path}: cannot create a temporary file beside it")  # pragma: no cover


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable where the platform allows it (best effort)."""
    try:
        fd = os.open(folder or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _commit(tmp: str, path: str, overwrite: bool, hint: str) -> None:
    """Move `tmp` to `path`: replacing what is there if `overwrite`, else only if nothing is."""
    try:
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path, follow_symlinks=False)  # fails if anything is there, no race
            except FileExistsError:
                raise SaveError(f"{path}: already exists; not replaced ({hint})") from None
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV):
                    raise
                refuse_existing(path, hint=hint)  # a file system without hard links
                os.replace(tmp, path)
            else:
                os.unlink(tmp)
    except IsADirectoryError:
        raise SaveError(f"{path}: is a folder; not replaced") from None
    except OSError as e:
        raise SaveError(f"{path}: cannot write it ({e.strerror or e})") from None
    _fsync_folder(os.path.dirname(path))


def _discard(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str], *, overwrite: bool = False, hint: str = _DEFAULT_HINT
) -> Iterator[BinaryIO]:
    """A binary file to write `path` through: it appears under `path`, whole, when the block
    ends without an exception, and not at all otherwise.

    Args:
        path: the final name.
        overwrite: replace what is under `path`; by default an existing name is refused with a
            one-line `SaveError` (before the block runs, and again at the move).
        hint: what the refusal tells the user to do (the CLI says `use --force`).
    """
    final = os.fspath(path)
    if not overwrite:
        refuse_existing(final, hint=hint)
    fd, tmp = _create_temp(final)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _commit(tmp, final, overwrite, hint)
    except BaseException:
        _discard(tmp)
        raise


@contextlib.contextmanager
def atomic_path(
    path: str | os.PathLike[str], *, overwrite: bool = False, hint: str = _DEFAULT_HINT
) -> Iterator[str]:
    """Like `atomic_write`, for writers that want a name rather than a file: the block writes
    the temporary name it is given (an empty file already created, with the final extension);
    it is synced and moved to `path` when the block ends without an exception.

    Example:
        >>> import os, tempfile, numpy as np
        >>> from treetool.io._atomic import atomic_path
        >>> p = os.path.join(tempfile.mkdtemp(), "a.npz")
        >>> with atomic_path(p) as tmp:
        ...     np.savez(tmp, x=np.arange(3))
        >>> with np.load(p) as z:
        ...     z["x"].tolist(), sorted(os.listdir(os.path.dirname(p)))
        ([0, 1, 2], ['a.npz'])
    """
    final = os.fspath(path)
    if not overwrite:
        refuse_existing(final, hint=hint)
    fd, tmp = _create_temp(final)
    os.close(fd)
    try:
        yield tmp
        try:
            fd = os.open(tmp, os.O_RDONLY)
        except FileNotFoundError:
            raise SaveError(f"{final}: the writer left nothing to move into place") from None
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _commit(tmp, final, overwrite, hint)
    except BaseException:
        _discard(tmp)
        raise
