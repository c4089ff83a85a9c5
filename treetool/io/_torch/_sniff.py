"""What tells a torch checkpoint from other files, cheaply (detection imports only this and
the zip directory reader): the legacy format's first bytes, a zip's `<root>/data.pkl`."""

from __future__ import annotations

from treetool._errors import LoadError
from treetool.io._torch._zip import ZipDir

__all__ = ["MAGIC", "PREFIX", "is_torch_zip", "zip_root"]

MAGIC = 0x1950A86A20F9469CFC6C
#: how a legacy file starts: PROTO 2, LONG1 of the magic number, STOP, then PROTO 2, 1001
PREFIX = b"\x80\x02\x8a\x0a" + MAGIC.to_bytes(10, "little") + b".\x80\x02M\xe9\x03."


def zip_root(zd: ZipDir) -> str:
    """The archive's root folder: the prefix of its first entry (never assumed)."""
    first = next(iter(zd.records), "")
    root, slash, _ = first.partition("/")
    if not slash or not root:
        raise LoadError(f"{zd.src.name}: a zip whose first entry {first!r} is not in a folder")
    return root


def is_torch_zip(zd: ZipDir) -> bool:
    """A zip with a `<root>/data.pkl` record (an npz's members are `*.npy`)."""
    try:
        root = zip_root(zd)
    except LoadError:
        return False
    return f"{root}/data.pkl" in zd.records
