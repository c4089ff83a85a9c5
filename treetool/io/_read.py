"""The shared plumbing of `read` and `load`: options checked once, the format detected or
looked up in the table, its `Format.read` run, and whatever a damaged file makes the libraries
below raise turned into one `LoadError` line.

Importing this module is cheap: detection, the table of formats and the tree model are
imported by `read` after a remote file's first GET is on its way (`_sources/_early.py`), so
that the request's round trip and those imports overlap.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from treetool._errors import LoadError
from treetool._public import set_module
from treetool._source import is_url, session, source_for

if TYPE_CHECKING:
    from treetool.io._loaded import Loaded
    from treetool.io._partial import PartialWatch

__all__ = ["load", "read", "split_step"]


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


@set_module("treetool.io")
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


@set_module("treetool.io")
def read(
    path: str | os.PathLike,
    *,
    trust: bool = False,
    lazy: bool | None = None,
    format: str | None = None,
    like: Any = None,
    partial: bool = False,
    watch: PartialWatch | None = None,
    raw: bool = False,
) -> Loaded:
    """Load a checkpoint and report what was not executed; `load` returns just the tree.

    Args:
        path: a file, or an orbax checkpoint directory; `run@1200` reads step 1200 of an
            orbax CheckpointManager run (the latest step without it).
        trust: run the file's code (pickle only: the plain `pickle.load`).
        lazy: keep array payloads in the file as `LazyArray` leaves. By default True
            without `like` (inspection) and False with it (see `load`).
        format: skip detection (one of `FORMATS`).
        like: a skeleton tree to fill (equinox `tree_serialise_leaves` files load into it);
            unless `lazy=True`, its leaves come back read: jax arrays where `like` had jax
            arrays, numpy arrays elsewhere.
        partial: on a damaged file, return the tree read up to the error (see `Loaded.error`)
            instead of raising, where the format allows it.
        raw: torch only: a pickled `nn.Module` or a TorchScript archive by its attributes
            (`._modules['0']._parameters['weight']`) instead of its `state_dict()` names.
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
    if lazy is None:
        lazy = like is None
    with session():
        if format is None and is_url(path):
            _first_get_now(path)
        return _read(
            path, trust=trust, lazy=lazy, format=format, like=like, partial=partial, watch=watch,
            raw=raw,
        )  # fmt: skip


def _read(
    path: str,
    *,
    trust: bool,
    lazy: bool,
    format: str | None,
    like: Any,
    partial: bool,
    watch: PartialWatch | None = None,
    raw: bool = False,
) -> Loaded:
    from treetool.io._detect import detect
    from treetool.io._formats import ReadOptions, format_for
    from treetool.io._opaque import ensure_jax_registration

    ensure_jax_registration()
    path, step = split_step(path)
    if step is not None and format not in (None, "orbax"):
        raise LoadError(
            f"{path}@{step}: @STEP picks a step of an orbax run, not of a {format} file"
        )
    fmt = format if format is not None else detect(path)
    if step is not None and fmt != "orbax":
        raise LoadError(f"{path}@{step}: @STEP picks a step of an orbax run; this is a {fmt} file")
    reader = format_for(fmt, path)
    if not is_url(path) and not os.path.exists(path):
        raise LoadError(f"{path}: no such file or directory")
    from treetool._tree._model import no_gc

    options = ReadOptions(
        trust=trust, lazy=lazy, like=like, partial=partial, step=step, watch=watch, raw=raw
    )
    try:
        with no_gc():  # readers make many small objects: collection passes cost ~40%
            out = reader.read(source_for(path), options)
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
    if like is not None and not lazy:
        out.tree = fill_eager(out.tree, like)
    return out


def fill_eager(tree: Any, like: Any) -> Any:
    """A result in `like`'s structure with its array leaves read now, each the kind of array
    `like` has at its path (`like_leaf`): what `load(path, like=model)` returns, ready for
    `jit`, `vmap`, `grad` and `lax` primitives. Leaves at paths `like` lacks are numpy."""
    import jax
    import numpy as np

    from treetool._leaves._lazy_array import LazyArray

    keystr = jax.tree_util.keystr
    like_at = {keystr(p): x for p, x in jax.tree_util.tree_flatten_with_path(like)[0]}
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    out = []
    for p, x in flat:
        if isinstance(x, LazyArray):
            x = np.asarray(x)
        if isinstance(x, np.ndarray | np.generic):
            x = like_leaf(x, like_at.get(keystr(p)))
        out.append(x)
    return jax.tree_util.tree_unflatten(treedef, out)


def like_leaf(value: Any, target: Any) -> Any:
    """`value` (a numpy array) as the kind of array `target` is: a jax array where `target`
    is a jax array or a `jax.ShapeDtypeStruct` (a typed PRNG key again from its key data,
    placed by `target`'s sharding when that spans more than one device); else `value`."""
    if not type(target).__module__.startswith("jax"):
        return value
    import jax
    import jax.numpy as jnp

    if isinstance(target, jax.Array) and jax.dtypes.issubdtype(target.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(value, impl=jax.random.key_impl(target))
    sharding = getattr(target, "sharding", None)
    if sharding is not None and len(getattr(sharding, "device_set", ())) > 1:
        return jax.device_put(value, sharding)
    return jnp.asarray(value)


def _first_get_now(path: str) -> None:
    """Send the first GET of the remote file `path` (not `run@STEP`) before the modules that
    read it are imported; it becomes the read's source (this session's, by URL)."""
    if split_step(path)[1] is not None:
        return
    from treetool.io._sources._early import start

    start(source_for(path))


@set_module("treetool.io")
def load(
    path: str | os.PathLike,
    *,
    trust: bool = False,
    lazy: bool | None = None,
    format: str | None = None,
    like: Any = None,
    raw: bool = False,
) -> Any:
    """Load a checkpoint as a pytree, safely: nothing in the file is executed unless `trust=True`.

    Array payloads stay in the file as `LazyArray` leaves (`np.asarray(leaf)` reads one);
    objects of classes that were not run are `Opaque` nodes with the same key paths as the live
    objects. `read` also tells which classes were not run.

    With `like=` (a skeleton: the freshly built model), the result has `like`'s structure and
    is read now: jax arrays where `like` had jax arrays, numpy arrays elsewhere, so the model
    runs at once, called or under `jit`, `vmap`, `grad` and `lax.scan`; `lazy=True` keeps the
    leaves in the file instead. Without `like`, the tree is lazy (inspection costs no reads).
    A `LazyArray` reads itself where numpy, `jnp.asarray` (so flax layers) or an operator
    (`w @ x`, `w + b`) needs its data; `jax.jit` arguments, `lax` primitives (a conv, an
    embedding lookup under `vmap`) and `lax.scan` accept only real arrays: load with
    `lazy=False` (numpy arrays, read now) or call `materialize(tree)`.

    Example:
        >>> import numpy as np, pickle, tempfile, os, treetool as tt
        >>> p = os.path.join(tempfile.mkdtemp(), "ckpt.pkl")
        >>> with open(p, "wb") as fh:
        ...     pickle.dump({"params": {"w": np.ones((3, 4), np.float32)}, "step": 10}, fh)
        >>> tree = tt.load(p)
        >>> [(str(path), leaf) for path, leaf in tt.leaves_with_path(tree)]
        [("['params']['w']", array(...)), ("['step']", 10)]
    """
    return read(path, trust=trust, lazy=lazy, format=format, like=like, raw=raw).tree
