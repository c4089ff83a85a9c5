"""Torch zip files made by hand for the hostile tests: `craft` pickles a tree whose tensors are
`Fake` stand-ins with the storage facts a test wants (numel, offset, size, stride), through
torch's real `_rebuild_tensor_v2` and storage classes, and zips it with the records given."""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from typing import Any

import torch


class FakeStorage:
    def __init__(self, key: str, numel: int, kind: Any = None) -> None:
        self.key, self.numel, self.kind = key, numel, kind or torch.FloatStorage


class Fake:
    """Pickles as `_rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())`."""

    def __init__(self, storage: FakeStorage, offset: int, size: tuple, stride: tuple) -> None:
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self) -> Any:
        return (torch._utils._rebuild_tensor_v2, self.args)


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, FakeStorage):
            return ("storage", obj.kind, obj.key, "cpu", obj.numel)
        return None


def data_pkl(tree: Any) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=2).dump(tree)
    return buf.getvalue()


def craft(path: str, tree: Any, records: dict[str, bytes], *, root: str = "x",
          method: int = zipfile.ZIP_STORED) -> None:  # fmt: skip
    """Write `root/data.pkl` (the tree) and `root/<name>` for each record."""
    with zipfile.ZipFile(path, "w", compression=method) as z:
        z.writestr(f"{root}/data.pkl", data_pkl(tree))
        z.writestr(f"{root}/byteorder", "little")
        for name, data in records.items():
            z.writestr(f"{root}/{name}", data)


def retag_location(src: str, dst: str, location: str = "cuda:0") -> None:
    """Copy the torch zip `src` (written by `torch.save` on the CPU) to `dst` with every
    storage's saved location rewritten from 'cpu' to `location` in its data.pkl: the file a
    GPU run writes, without a GPU. Each record keeps its name, order and bytes."""
    old = b"X\x03\x00\x00\x00cpu"
    new = b"X" + len(location).to_bytes(4, "little") + location.encode()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("/data.pkl"):
                assert old in data, "no 'cpu' location in the pickle"
                data = data.replace(old, new)
            zout.writestr(info, data)
