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

Each format is a `Format` (`treetool.io._formats`: a name, a content sniffer, a reader) that its
module defines, listed in one ordered table that detection walks. Every reader reads through a
`Source` (`treetool._source`), so a target may also be an `s3://`, `gs://` or `http(s)://`
URL: headers and structure come from ranged reads and array payloads stay remote until read
(`treetool.io._sources`, the `treetool[remote]` extra).

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
from typing import TYPE_CHECKING, Any

from treetool._errors import LoadError as LoadError  # `treetool.io.LoadError`, as before
from treetool.io._read import load, read, split_step

if TYPE_CHECKING:
    from treetool.io._detect import detect as detect
    from treetool.io._loaded import Loaded as Loaded
    from treetool.io._opaque import GlobalRef as GlobalRef
    from treetool.io._opaque import Opaque as Opaque
    from treetool.io._opaque import ensure_jax_registration as ensure_jax_registration

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

#: names imported on first use (PEP 562), so that `import treetool.io` and a remote `read`'s
#: start import neither the table of formats nor the tree model (`read` imports them once its
#: first request is on its way): name -> its module
_LAZY = {
    "detect": "treetool.io._detect",
    "Loaded": "treetool.io._loaded",
    "GlobalRef": "treetool.io._opaque",
    "Opaque": "treetool.io._opaque",
    "ensure_jax_registration": "treetool.io._opaque",  # the CLI's
}


def _format_modules() -> dict[str, str]:
    """format name -> module that reads it (from the table of formats, `treetool.io._formats`)."""
    from treetool.io._formats import TABLE

    return {row.name: row.module for row in TABLE}


def _submodules() -> frozenset[str]:
    from treetool.io._formats import TABLE

    return frozenset(row.module.rpartition(".")[2] for row in TABLE)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    if name == "FORMATS":
        #: format name -> module that reads it (from the table of formats)
        globals()["FORMATS"] = value = _format_modules()
        return value
    if name in _submodules():
        return importlib.import_module(f"treetool.io.{name}")
    raise AttributeError(f"module 'treetool.io' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"FORMATS"} | _submodules())


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


def save(
    tree: Any, path: str | os.PathLike, format: str | None = None, *, overwrite: bool = True
) -> None:
    """Write any pytree to safetensors, npz, an equinox `.eqx` file or a pickle (`format`:
    'safetensors', 'npz', 'equinox', 'pickle', or from the extension).

    safetensors and npz store each array leaf (jax, numpy, `LazyArray`: read) under its
    dotted path (`layers.0.bias`, the names Hugging Face, `safetensors.numpy.load_file` and
    `np.load` show) and a structure record of the rest (in the safetensors `__metadata__`,
    in the npz member `__treetool_tree__`): containers, classes and functions by their import
    names (never code), Python scalars, strings and None. `load` rebuilds the same tree from it
    with jax's paths, without a skeleton (classes as inert `Opaque` nodes, functions as
    `OpaqueFunction` leaves), or fills `like=` with it. `.eqx` is written as
    `eqx.tree_serialise_leaves` writes it (equinox reads it back; loading it needs `like=`).

    The file is written to a temporary name beside `path` and moved into place whole: a
    failed save leaves nothing behind and what was there untouched. `overwrite` (default
    True) replaces an existing file; False refuses it in one line. What cannot be saved
    raises `SaveError` (one line naming the file and the path in the tree).

    Example:
        >>> import numpy as np, tempfile, os, treetool as tt
        >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> tt.save({"layers": [{"w": np.zeros((2, 2), np.float32)}]}, p)
        >>> tt.load(p)["layers"][0]["w"].shape
        (2, 2)
        >>> from safetensors.numpy import load_file
        >>> sorted(load_file(p))
        ['layers.0.w']
    """
    from treetool.io._save import save as _save

    _save(tree, os.fspath(path), format, overwrite=overwrite)
