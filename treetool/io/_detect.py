"""Format detection from content: a `Probe` of the target, asked of each row of the table.

Never from the file name: the first bytes (magic numbers, a header that fits the file),
directory markers, a zip's member names.
"""

from __future__ import annotations

import os

from treetool._errors import LoadError
from treetool._public import set_module
from treetool._source import is_url
from treetool.io._formats import TABLE, Probe, names

__all__ = ["detect"]


@set_module("treetool.io")
def detect(path: str | os.PathLike) -> str:
    """The format of a file or directory, from its content.

    Each row of `treetool.io._formats.TABLE` that admits the target (its first bytes, or a
    directory) is asked in order whether the target is in its format (`sniff`); when none
    says so, the formats with headerless variants are asked again (`guess`).

    Example:
        >>> import numpy as np, tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
        >>> np.save(p + ".npy", np.zeros(3)); os.rename(p + ".npy", p)
        >>> detect(p)
        'npy'
    """
    path = os.fspath(path)
    if not is_url(path) and not os.path.exists(path):
        raise LoadError(f"{path}: no such file or directory")
    probe = Probe(path)
    for row in TABLE:
        if row.admits(probe) and row.format().sniff(probe):
            return row.name
    if probe.is_dir:
        what = "a prefix (directory)" if probe.remote else "a directory"
        kinds = [row.format() for row in TABLE if row.dirs]
        expected = " or ".join(
            f"{'an' if f.name[0] in 'aeiou' else 'a'} {f.name} checkpoint"
            + (f" (no {f.expects})" if f.expects else "")
            for f in kinds
        )
        raise LoadError(f"{path}: {what} that is not {expected}")
    for row in TABLE:
        if row.guesses and row.format().guess(probe):
            return row.name
    shown = probe.head[:8].hex(" ")
    raise LoadError(
        f"{path}: unknown file format (starts with bytes {shown}); formats: {', '.join(names())}"
    )
