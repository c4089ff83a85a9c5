"""Checkpoint files: safe, lazy loading of every format JAX users have, and saving.

`load(path)` detects the format from the content (magic bytes, directory markers), never from
the file name, and returns a pytree built of builtin containers, `Opaque` placeholders and
`LazyArray` leaves. Nothing in a file is executed unless `trust=True`. Reading a file's
structure does not import jax.

Formats (one module each, imported on first use through PEP 562):

==============  ===========================================  =================================
format          what it reads                                module
==============  ===========================================  =================================
pickle          protocols 0-5, cloudpickle; restricted       `treetool.io.pickle`
npy / npz       `np.save`, `np.savez[_compressed]`           `treetool.io.npz`
safetensors     header only; payloads stay on disk           `treetool.io.safetensors`
msgpack         `flax.serialization.to_bytes`                `treetool.io.msgpack`
equinox         `eqx.tree_serialise_leaves` (+ `like=`)      `treetool.io.equinox`
orbax           checkpoint directories, from metadata only   `treetool.io.orbax`
sharded         `*.safetensors.index.json`, flax msgpack     `treetool.io.sharded`
                indexes: one tree over the shards
==============  ===========================================  =================================

Every reader reads through a `Source` (`treetool.io._source`), so a target may also be an
`s3://`, `gs://` or `http(s)://` URL: headers and structure come from ranged reads and array
payloads stay remote until read (`treetool.io._remote`, the `treetool[remote]` extra).

Example:
    >>> import numpy as np, tempfile, os, treetool as tt
    >>> path = os.path.join(tempfile.mkdtemp(), "params.npz")
    >>> tt.save({"dense": {"kernel": np.ones((2, 3), np.float32)}}, path)
    >>> tree = tt.load(path)
    >>> tree["dense"]["kernel"]
    LazyArray(f32[2,3], file=..., offset=...)
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any

from .._errors import LoadError
from ._opaque import GlobalRef, Opaque, ensure_jax_registration
from ._source import is_url, session, source_for

__all__ = ["FORMATS", "GlobalRef", "Loaded", "Opaque", "detect", "load", "read", "save"]

#: format name -> module that reads it
FORMATS: dict[str, str] = {
    "pickle": "treetool.io.pickle",
    "npy": "treetool.io.npz",
    "npz": "treetool.io.npz",
    "safetensors": "treetool.io.safetensors",
    "msgpack": "treetool.io.msgpack",
    "equinox": "treetool.io.equinox",
    "orbax": "treetool.io.orbax",
    "sharded": "treetool.io.sharded",
}
_SUBMODULES = frozenset({"pickle", "npz", "safetensors", "msgpack", "equinox", "orbax", "sharded"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"treetool.io.{name}")
    raise AttributeError(f"module 'treetool.io' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBMODULES)


@dataclass
class Loaded:
    """The result of `read`: the tree, its format, what was not executed, and any error.

    Attributes:
        tree: the loaded pytree.
        format: the detected (or given) format name.
        blocked: sorted class paths of the objects that were not executed (`Opaque` nodes).
        error: with `partial=True`, the error that stopped reading (the tree is what was read
            up to that point); None when the file was read to the end.
    """

    tree: Any
    format: str
    blocked: list[str] = field(default_factory=list)
    error: str | None = None


def _header(path: str, n: int = 64) -> bytes:
    src = source_for(path)
    return src.read(0, min(n, src.size))


def _looks_like_old_pickle(path: str, head: bytes) -> bool:
    """Protocol 0/1 pickles have no header: an opcode first and STOP last."""
    import pickletools

    if head[:1].decode("latin1") not in {op.code for op in pickletools.opcodes}:
        return False
    src = source_for(path)
    return src.read(src.size - 1, 1) == b"."


def detect(path: str | os.PathLike) -> str:
    """The format of a file or directory, from its content.

    Example:
        >>> import numpy as np, tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
        >>> np.save(p + ".npy", np.zeros(3)); os.rename(p + ".npy", p)
        >>> detect(p)
        'npy'
    """
    path = os.fspath(path)
    if is_url(path):
        from .sharded import check_remote_target

        check_remote_target(path)
    elif os.path.isdir(path):
        from .orbax import is_orbax_dir

        if is_orbax_dir(path):
            return "orbax"
        raise LoadError(
            f"{path}: a directory that is not an orbax checkpoint (no _METADATA, _CHECKPOINT_METADATA or step directories)"
        )
    if not is_url(path) and not os.path.exists(path):
        raise LoadError(f"{path}: no such file or directory")
    try:
        head = _header(path)
    except OSError as e:
        raise LoadError(f"{path}: {e.strerror or e}") from None
    if not head:
        raise LoadError(f"{path}: empty file")
    if head[:6] == b"\x93NUMPY":
        from .npz import is_npy_sequence

        return "equinox" if is_npy_sequence(path) else "npy"
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "npz"
    from .safetensors import looks_like_safetensors

    # before pickle: a header length like 0x0280 starts with the bytes of a pickle protocol 2
    if looks_like_safetensors(path, head):
        return "safetensors"
    if head[0] == 0x80 and len(head) > 1 and head[1] <= 5:
        return "pickle"
    from .msgpack import looks_like_flax_msgpack

    if looks_like_flax_msgpack(head):
        return "msgpack"
    from .sharded import looks_like_index

    if looks_like_index(head):
        return "sharded"
    if _looks_like_old_pickle(path, head):
        return "pickle"
    shown = head[:8].hex(" ")
    raise LoadError(
        f"{path}: unknown file format (starts with bytes {shown}); formats: {', '.join(sorted(set(FORMATS)))}"
    )


def read(
    path: str | os.PathLike,
    *,
    trust: bool = False,
    lazy: bool = True,
    format: str | None = None,
    like: Any = None,
    partial: bool = False,
) -> Loaded:
    """Load a checkpoint and report what was not executed; `load` returns just the tree.

    Args:
        path: a file, or an orbax checkpoint directory.
        trust: run the file's code (pickle only: the plain `pickle.load`).
        lazy: keep array payloads in the file as `LazyArray` leaves.
        format: skip detection (one of `FORMATS`).
        like: a skeleton tree (equinox `tree_serialise_leaves` files load into it).
        partial: on a damaged file, return the tree read up to the error (see `Loaded.error`)
            instead of raising, where the format allows it.

    Example:
        >>> import pickle, tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "evil.pkl")
        >>> with open(p, "wb") as fh:
        ...     _ = fh.write(b"\\x80\\x04cos\\nsystem\\n\\x8c\\x04echo\\x85R.")
        >>> r = read(p)
        >>> r.tree, r.blocked
        (Opaque('os.system', fields=['[0]']), ['os.system'])
    """
    path = os.fspath(path)
    with session():
        return _read(path, trust=trust, lazy=lazy, format=format, like=like, partial=partial)


def _read(
    path: str, *, trust: bool, lazy: bool, format: str | None, like: Any, partial: bool
) -> Loaded:
    ensure_jax_registration()
    fmt = format if format is not None else detect(path)
    if fmt not in FORMATS:
        from .._paths import suggest

        hint = suggest(fmt, FORMATS)
        more = f" Did you mean {hint[0]!r}?" if hint else ""
        raise LoadError(f"{path}: unknown format {fmt!r}.{more}")
    if not is_url(path) and not os.path.exists(path):
        raise LoadError(f"{path}: no such file or directory")
    module = importlib.import_module(FORMATS[fmt])
    from .._model import no_gc

    try:
        with no_gc():  # readers make many small objects: collection passes cost ~40%
            out = module.read(path, trust=trust, lazy=lazy, like=like, partial=partial, format=fmt)
    except LoadError:
        raise
    except MemoryError:
        raise LoadError(f"{path}: out of memory while reading the {fmt} file") from None
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        raise LoadError(f"{path}: not a valid {fmt} file: {e}") from None
    out.format = fmt
    return out


def load(
    path: str | os.PathLike,
    *,
    trust: bool = False,
    lazy: bool = True,
    format: str | None = None,
    like: Any = None,
) -> Any:
    """Load a checkpoint as a pytree, safely: nothing in the file is executed unless `trust=True`.

    Array payloads stay in the file as `LazyArray` leaves (`np.asarray(leaf)` reads one);
    objects of classes that were not run are `Opaque` nodes with the same key paths as the live
    objects. `read` also tells which classes were not run.

    Example:
        >>> import numpy as np, pickle, tempfile, os, treetool as tt
        >>> p = os.path.join(tempfile.mkdtemp(), "ckpt.pkl")
        >>> with open(p, "wb") as fh:
        ...     pickle.dump({"params": {"w": np.ones((3, 4), np.float32)}, "step": 10}, fh)
        >>> tree = tt.load(p)
        >>> [(str(path), leaf) for path, leaf in tt.leaves_with_paths(tree)]
        [("['params']['w']", array(...)), ("['step']", 10)]
    """
    return read(path, trust=trust, lazy=lazy, format=format, like=like).tree


def save(tree: Any, path: str | os.PathLike, format: str | None = None) -> None:
    """Write a pytree of arrays to safetensors, npz or pickle (`format` or the file extension).

    Leaves are written under their key paths (`['params']['w']`); `load` rebuilds nested
    dicts and lists from them. `LazyArray` leaves are read; `Opaque` nodes are refused.

    Example:
        >>> import numpy as np, tempfile, os, treetool as tt
        >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> tt.save({"layers": [{"w": np.zeros((2, 2), np.float32)}]}, p)
        >>> tt.load(p)["layers"][0]["w"].shape
        (2, 2)
    """
    from ._save import save as _save

    _save(tree, os.fspath(path), format)
