"""Whether the read under way lists structure (the CLI's `ls`, `summary`, `inspect --json`).

Within `listing()`, pickles make a `HostArray` (no numpy) of each array whose bytes they hold
inline (`treetool.io._pickle._numpy_rebuild`). The flag lives apart from the pickle machinery so that
the CLI sets it for every read without importing that machinery for a file of another format.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["in_listing", "listing"]

_READ = threading.local()  # per thread: whether arrays held inline are `HostArray`s


@contextlib.contextmanager
def listing() -> Iterator[None]:
    """Within it, pickles read in this thread make a `HostArray` (no numpy) of each array
    whose bytes they hold inline: for commands that list structure, shapes, dtypes and bytes.

    Example:
        >>> import pickle, tempfile, os, numpy as np
        >>> from treetool.io.pickle import read_pickle
        >>> f = os.path.join(tempfile.mkdtemp(), "small.pkl")
        >>> with open(f, "wb") as fh:
        ...     pickle.dump({"b": np.zeros(3, np.float32)}, fh)
        >>> with listing():
        ...     b = read_pickle(f).tree["b"]
        >>> type(b).__name__, b.dtype_name, b.listed_as, np.asarray(b).tolist()
        ('HostArray', 'float32', ('array', 'ndarray', 'host'), [0.0, 0.0, 0.0])
    """
    before = getattr(_READ, "listing", False)
    _READ.listing = True
    try:
        yield
    finally:
        _READ.listing = before


def in_listing() -> bool:
    """Whether this thread is within `listing()`."""
    return getattr(_READ, "listing", False)
