"""The legacy torch stream format (torch < 1.6, `_use_new_zipfile_serialization=False`).

One file of consecutive pickles, then raw bytes: the magic number 0x1950a86a20f9469cfc6c,
the protocol version 1001, `sys_info` (endianness, type sizes), the object pickle (storages
as persistent ids `('storage', type, key, location, numel, view_metadata)`), the sorted list
of storage keys, then each storage in that order: an int64 element count and its data,
little-endian. The storages' offsets are known only after the object pickle, so it is run
twice: once to find its end and its storages, once to make the leaves.
"""

from __future__ import annotations

import struct
from typing import Any

from treetool._errors import LoadError
from treetool._source import Source
from treetool.io._safety._budget import Budget
from treetool.io._torch._archive import TorchRead, storage_nbytes, storage_type_name
from treetool.io._torch._rebuild import TensorMaker, TorchStorage
from treetool.io._torch._sniff import MAGIC
from treetool.io._torch._unpickle import TorchMachine, check_tree, run_pickle
from treetool.io._torch._weights_only import verdict

__all__ = ["read_legacy"]


def read_legacy(src: Source, lazy: bool) -> TorchRead:
    """Read a legacy torch file's structure; tensors stay in the file."""
    name = src.name
    size = src.size
    data = src.buffer()
    try:
        return _read(src, data, name, size, lazy)
    finally:
        data.close()


def _read(src: Source, data: Any, name: str, size: int, lazy: bool) -> TorchRead:
    budget = Budget(name, size)
    maker = TensorMaker(name)

    def plain(pid: Any) -> Any:
        raise LoadError(f"{name}: a persistent id outside the object pickle")

    head = TorchMachine(data, name, lazy, budget, plain, maker, 0)
    magic, pos = run_pickle(head, 0)
    if magic != MAGIC:
        raise LoadError(f"{name}: not a legacy torch file (magic number {str(magic)[:40]})")
    proto, pos = run_pickle(head, pos)
    if proto != 1001:
        raise LoadError(f"{name}: legacy torch protocol {str(proto)[:40]}, expected 1001")
    sys_info, pos = run_pickle(head, pos)
    if type(sys_info) is dict and sys_info.get("little_endian") is False:
        raise LoadError(f"{name}: a big-endian legacy checkpoint; only little-endian is read")
    start = pos
    declared: dict[str, tuple[str, int, str]] = {}  # root key -> (type, numel, location)
    views: dict[str, tuple[str, int, int]] = {}  # view key -> (root key, offset, numel)

    def first(pid: Any) -> Any:
        if _is_module(pid):
            return pid[1]
        root, type_path, numel, location, view = _pid(pid, name)
        declared.setdefault(root, (type_path, numel, location))
        if view is not None:
            views.setdefault(view[0], (root, view[1], view[2]))
        st = TorchStorage(
            root, type_path, location, storage_nbytes(type_path, numel, name), name, 0
        )
        return st if view is None else _view(st, view, name)

    m1 = TorchMachine(data, name, lazy, Budget(name, size), first, TensorMaker(name), 0)
    _, end = run_pickle(m1, start)
    keys, after = run_pickle(head, end)
    if type(keys) is not list or any(type(k) is not str for k in keys):
        raise LoadError(f"{name}: the storage key list is not a list of strings")
    offsets: dict[str, int] = {}
    at = after
    for key in keys:
        if key not in declared:
            raise LoadError(f"{name}: storage key {key!r} is listed but no tensor uses it")
        type_path, numel, _ = declared[key]
        if at + 8 > size:
            raise LoadError(f"{name}: storage {key!r}: the file ends before its size")
        (count,) = struct.unpack("<q", bytes(data[at : at + 8]))
        if count != numel:
            raise LoadError(
                f"{name}: storage {key!r} holds {count} elements, its tensors say {numel}"
            )
        nbytes = storage_nbytes(type_path, numel, name)
        offsets[key] = at + 8
        at += 8 + nbytes
        if at > size:
            raise LoadError(
                f"{name}: storage {key!r}: {nbytes} bytes at offset {offsets[key]}, the file has {size}"
            )
    missing = sorted(set(declared) - set(offsets))
    if missing:
        raise LoadError(f"{name}: storage key {missing[0]!r} is not in the file's storage list")
    remote = src if src.remote else None

    def second(pid: Any) -> Any:
        if _is_module(pid):
            return pid[1]
        root, type_path, numel, location, view = _pid(pid, name)
        nbytes = storage_nbytes(type_path, numel, name)
        st = TorchStorage(root, type_path, location, nbytes, name, offsets[root], source=remote)
        return st if view is None else _view(st, view, name)

    m2 = TorchMachine(data, name, lazy, budget, second, maker, 0)
    tree, _ = run_pickle(m2, start)
    blocked = check_tree(tree, budget)
    report = verdict([bytes(data[start:end])])
    return TorchRead(
        tree, blocked, "legacy", report, {}, m2.state_metadata, maker.storage_of,
        list(maker.locations),
    )  # fmt: skip


def _pid(pid: Any, name: str) -> tuple[str, str, int, str, tuple | None]:
    if type(pid) is not tuple or len(pid) != 6 or pid[0] != "storage":
        raise LoadError(f"{name}: a persistent id {str(pid)[:80]} is not a legacy storage id")
    _, stype, root, location, numel, view = pid
    if type(root) is not str or type(location) is not str:
        raise LoadError(f"{name}: a persistent id whose key or location is not a string")
    type_path = storage_type_name(stype, name)
    storage_nbytes(type_path, numel, name)
    if view is not None and (
        type(view) is not tuple
        or len(view) != 3
        or type(view[0]) is not str
        or any(type(v) is not int or v < 0 for v in view[1:])
    ):
        raise LoadError(f"{name}: a storage view {str(view)[:80]} is not (key, offset, numel)")
    return root, type_path, numel, location, view


def _view(root: TorchStorage, view: tuple, name: str) -> TorchStorage:
    key, offset, numel = view
    from treetool.io._torch._archive import _ITEM

    item = _ITEM.get(root.storage_dtype or "uint8", 1)
    if (offset + numel) * item > root.shape[0]:
        raise LoadError(f"{name}: storage view {key!r} lies past its storage {root.key!r}")
    st = TorchStorage(
        key, root.storage_type, root.location, numel * item, root.file,
        root.offset + offset * item, source=root.source,
    )  # fmt: skip
    st.root = (root.key, offset * item)
    return st


def _is_module(pid: Any) -> bool:
    """`('module', class, source file, source)`: a whole module's class, saved with its source."""
    return type(pid) is tuple and len(pid) == 4 and pid[0] == "module"
