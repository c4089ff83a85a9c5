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
safetensors     header only (+ `__metadata__`); payloads on  `treetool.io.safetensors`
                disk
msgpack         `flax.serialization.to_bytes`                `treetool.io.msgpack`
equinox         `eqx.tree_serialise_leaves` (+ `like=`)      `treetool.io.equinox`
orbax           checkpoints, runs (`run@STEP`), composites:  `treetool.io.orbax`
                structure from metadata, values on demand
sharded         `*.safetensors.index.json`, flax msgpack,    `treetool.io.sharded`
                `pytorch_model.bin.index.json` indexes: one
                tree over the shards
torch           PyTorch `.pt/.pth/.bin/.ckpt`: zip and       `treetool.io.torch`
                legacy formats, without torch; the
                `weights_only` report
==============  ===========================================  =================================

Every reader reads through a `Source` (`treetool.io._sources._source`), so a target may also be an
`s3://`, `gs://` or `http(s)://` URL: headers and structure come from ranged reads and array
payloads stay remote until read (`treetool.io._sources._remote`, the `treetool[remote]` extra).

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

from treetool._errors import LoadError
from treetool._leaves._arrays import set_url_source
from treetool.io._opaque import GlobalRef, Opaque, ensure_jax_registration
from treetool.io._partial import PartialWatch
from treetool.io._sources._source import is_url, session, source_for

set_url_source(source_for)  # URL-backed LazyArrays read through the sources (no import upward)

__all__ = [
    "FORMATS",
    "GlobalRef",
    "Loaded",
    "Opaque",
    "detect",
    "load",
    "materialize",
    "read",
    "save",
    "split_step",
]

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
    "torch": "treetool.io.torch",
}
_SUBMODULES = frozenset(
    {"pickle", "npz", "safetensors", "msgpack", "equinox", "orbax", "sharded", "torch"}
)


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
        metadata: the file's own metadata where the format has some (safetensors
            `__metadata__`: a dict of strings), else None.
        step: for an orbax CheckpointManager run, the step that was read; else None.
        steps: for an orbax run, all its steps in increasing order; else None.
        facts: what a format knows about the file beyond its tree, by format (`torch`: its
            kind, the `weights_only` report, tied names); else None.
    """

    tree: Any
    format: str
    blocked: list[str] = field(default_factory=list)
    error: str | None = None
    metadata: dict[str, Any] | None = None
    step: int | None = None
    steps: list[int] | None = None
    facts: dict[str, Any] | None = None


def _header(path: str, n: int = 64) -> bytes:
    src = source_for(path)
    return src.read(0, min(n, src.size))


def _is_opcode(byte: int) -> bool:
    import pickletools

    return chr(byte) in {op.code for op in pickletools.opcodes}


def _ends_with_stop(path: str) -> bool:
    src = source_for(path)
    return src.read(src.size - 1, 1) == b"."


def _looks_like_old_pickle(path: str, head: bytes) -> bool:
    """Protocol 0/1 pickles have no header: an opcode first and STOP last."""
    import pickletools

    if head[:1].decode("latin1") not in {op.code for op in pickletools.opcodes}:
        return False
    return _ends_with_stop(path)


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
        from treetool.io.sharded import check_remote_target

        if check_remote_target(path) == "orbax":
            return "orbax"
    elif os.path.isdir(path):
        from treetool.io.orbax import is_orbax_dir

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
        from treetool.io.npz import is_npy_sequence

        return "equinox" if is_npy_sequence(path) else "npy"
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        # a torch zip also starts with PK: it has a `<root>/data.pkl` record, an npz `*.npy`
        from treetool.io.torch import looks_like_torch

        return "torch" if looks_like_torch(path) else "npz"
    if head.startswith(b"\x80\x02\x8a\x0a"):  # PROTO 2, LONG1: a legacy torch magic number?
        from treetool.io.torch import looks_like_torch

        if looks_like_torch(path):
            return "torch"
    # safetensors before pickle: a header length whose low byte is 0x80 (e.g. 1,408) starts
    # like a protocol-5 pickle; the safetensors check (length fits the file, `{`...`}`) and the
    # pickle check (PROTO 2-5, then an opcode) each look at the file's own consistency
    from treetool.io.safetensors import looks_like_safetensors

    if looks_like_safetensors(path, head):
        return "safetensors"
    if head[0] == 0x80 and len(head) > 2 and 2 <= head[1] <= 5 and _is_opcode(head[2]):
        return "pickle"  # PROTO n, then an opcode (a truncated pickle still reads as one)
    from treetool.io.msgpack import looks_like_flax_msgpack

    if looks_like_flax_msgpack(head):
        return "msgpack"
    from treetool.io.sharded import looks_like_index

    if looks_like_index(head):
        return "sharded"
    if _looks_like_old_pickle(path, head):
        return "pickle"
    from treetool.io.torch import looks_like_torch

    if looks_like_torch(path):  # the old tar format: named in one line by the reader
        return "torch"
    shown = head[:8].hex(" ")
    raise LoadError(
        f"{path}: unknown file format (starts with bytes {shown}); formats: {', '.join(sorted(set(FORMATS)))}"
    )


#: what a damaged file makes the libraries below the readers raise (zlib, zipfile, struct,
#: numpy, ast, tensorstore); `read` turns each into one `LoadError` line
_MALFORMED = (
    OSError,
    ValueError,
    KeyError,
    TypeError,
    IndexError,
    ArithmeticError,
    SyntaxError,
    EOFError,
    NotImplementedError,
    RuntimeError,
    UnicodeError,
    LookupError,
    AttributeError,
)


def split_step(path: str) -> tuple[str, int | None]:
    """`run@1200` -> `("run", 1200)` when `run@1200` itself does not exist; else `(path, None)`.

    Example:
        >>> split_step("/no/such/run@1200")
        ('/no/such/run', 1200)
    """
    base, at, step = path.rpartition("@")
    if not at or not step.isdigit() or not base or os.path.exists(path):
        return path, None
    return base, int(step)


def read(
    path: str | os.PathLike,
    *,
    trust: bool = False,
    lazy: bool = True,
    format: str | None = None,
    like: Any = None,
    partial: bool = False,
    watch: PartialWatch | None = None,
) -> Loaded:
    """Load a checkpoint and report what was not executed; `load` returns just the tree.

    Args:
        path: a file, or an orbax checkpoint directory; `run@1200` reads step 1200 of an
            orbax CheckpointManager run (the latest step without it).
        trust: run the file's code (pickle only: the plain `pickle.load`).
        lazy: keep array payloads in the file as `LazyArray` leaves.
        format: skip detection (one of `FORMATS`).
        like: a skeleton tree (equinox `tree_serialise_leaves` files load into it).
        partial: on a damaged file, return the tree read up to the error (see `Loaded.error`)
            instead of raising, where the format allows it.
        watch: a `treetool.io._partial.PartialWatch`: while this read runs in a worker
            thread, it hands out snapshots of the tree read so far (pickle only; the other
            formats read fast and ignore it).

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
        return _read(
            path, trust=trust, lazy=lazy, format=format, like=like, partial=partial, watch=watch
        )


def _read(
    path: str,
    *,
    trust: bool,
    lazy: bool,
    format: str | None,
    like: Any,
    partial: bool,
    watch: PartialWatch | None = None,
) -> Loaded:
    ensure_jax_registration()
    path, step = split_step(path)
    if step is not None and format not in (None, "orbax"):
        raise LoadError(
            f"{path}@{step}: @STEP picks a step of an orbax run, not of a {format} file"
        )
    fmt = format if format is not None else detect(path)
    if step is not None and fmt != "orbax":
        raise LoadError(f"{path}@{step}: @STEP picks a step of an orbax run; this is a {fmt} file")
    if fmt not in FORMATS:
        from treetool._paths._path import suggest

        hint = suggest(fmt, FORMATS)
        more = f" Did you mean {hint[0]!r}?" if hint else ""
        raise LoadError(f"{path}: unknown format {fmt!r}.{more}")
    if not is_url(path) and not os.path.exists(path):
        raise LoadError(f"{path}: no such file or directory")
    module = importlib.import_module(FORMATS[fmt])
    from treetool._tree._model import no_gc

    extra: dict[str, Any] = {"step": step} if step is not None else {}
    if watch is not None and fmt == "pickle":
        extra["watch"] = watch
    try:
        with no_gc():  # readers make many small objects: collection passes cost ~40%
            out = module.read(
                path, trust=trust, lazy=lazy, like=like, partial=partial, format=fmt, **extra
            )
    except LoadError:
        raise
    except MemoryError:
        raise LoadError(f"{path}: out of memory while reading the {fmt} file") from None
    except RecursionError:
        raise LoadError(f"{path}: the {fmt} file is nested too deeply to read") from None
    except _MALFORMED as e:
        # a reader's check that missed a case still ends as one line, never a traceback
        msg = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise LoadError(f"{path}: not a valid {fmt} file: {msg}") from None
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

    A `LazyArray` reads itself where numpy, `jnp.asarray` (so flax layers) or an operator
    (`w @ x`, `w + b`) needs its data: `model.apply(tt.load(p), x)` runs, and so does an
    equinox model loaded with `like=`. `jax.jit` arguments, `lax` primitives and other `jnp`
    functions accept only real arrays: load with `lazy=False` (numpy arrays, read now) or call
    `materialize(tree)`.

    Example:
        >>> import numpy as np, pickle, tempfile, os, treetool as tt
        >>> p = os.path.join(tempfile.mkdtemp(), "ckpt.pkl")
        >>> with open(p, "wb") as fh:
        ...     pickle.dump({"params": {"w": np.ones((3, 4), np.float32)}, "step": 10}, fh)
        >>> tree = tt.load(p)
        >>> [(str(path), leaf) for path, leaf in tt.leaves_with_path(tree)]
        [("['params']['w']", array(...)), ("['step']", 10)]
    """
    return read(path, trust=trust, lazy=lazy, format=format, like=like).tree


def materialize(tree: Any) -> Any:
    """The tree with every `LazyArray` leaf read into a numpy array; everything else kept.

    What `load(..., lazy=False)` gives, for a tree already loaded lazily: use it before
    handing loaded params to `jax.jit` or `lax` primitives. The input is not changed.

    Example:
        >>> import numpy as np, tempfile, os, treetool as tt
        >>> p = os.path.join(tempfile.mkdtemp(), "w.npz")
        >>> tt.save({"w": np.ones((2, 2), np.float32)}, p)
        >>> type(tt.materialize(tt.load(p))["w"]).__name__
        'ndarray'
    """
    from treetool.io._save import _materialize

    return _materialize(tree, "", refuse_opaque=False)


def save(tree: Any, path: str | os.PathLike, format: str | None = None) -> None:
    """Write a pytree of arrays to safetensors, npz or pickle (`format` or the file extension).

    npz names each leaf by its key path (`['params']['w']`). safetensors names it by its
    dotted path (`params.w`, `layers.0.weight`: the names Hugging Face and `safetensors.flax`
    use) and keeps the key paths in `__metadata__["treetool_paths"]`; when two paths would get
    one dotted name, the key paths are the names. Either way `load` gives back the nested dicts
    and lists. `LazyArray` leaves are read; `Opaque` nodes are refused. What cannot be saved
    raises `SaveError` (one line naming the file and the path in the tree).

    Example:
        >>> import numpy as np, tempfile, os, treetool as tt
        >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> tt.save({"layers": [{"w": np.zeros((2, 2), np.float32)}]}, p)
        >>> tt.load(p)["layers"][0]["w"].shape
        (2, 2)
    """
    from treetool.io._save import save as _save

    _save(tree, os.fspath(path), format)
