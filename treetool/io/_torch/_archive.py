"""A torch zip checkpoint (torch >= 1.6): `<root>/data.pkl` over `<root>/data/<key>` records.

The root folder is the first entry's prefix (`archive/` from a buffer, the file's stem from a
path), never assumed. `byteorder` (absent: little), `version`, `.format_version`,
`.storage_alignment` and `.data/serialization_id` are read as facts. A TorchScript archive
(`code/`, `constants.pkl`) is read the same way: its module classes stay `Opaque`, its tensors
are listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from treetool._errors import LoadError
from treetool._source import Source
from treetool.io._safety._budget import Budget
from treetool.io._torch._head import Deferred, DeferredRecord
from treetool.io._torch._rebuild import STORAGE_DTYPES, TensorMaker, TorchStorage
from treetool.io._torch._record_io import RecordSource, inflating_opener
from treetool.io._torch._sniff import zip_root
from treetool.io._torch._unpickle import TorchMachine, check_tree, run_pickle
from treetool.io._torch._weights_only import WeightsOnly, verdict
from treetool.io._torch._zip import Record, ZipDir, local_data_offset, read_zip_dir

__all__ = ["TorchRead", "read_archive", "read_deferred"]

_MAX_PKL = 1 << 30  # a data.pkl larger than this is refused (it is metadata only)
_PKL_PER_BYTE = 64  # a deflated data.pkl may inflate to 64 bytes per byte of the file (+16 MiB),
# and never past the file's allocation budget (64 MiB + 16 per byte), charged below
_FACT_RECORDS = ("version", ".format_version", ".storage_alignment", ".data/serialization_id")


@dataclass
class TorchRead:
    """What reading a torch file gave: the tree and the facts `inspect` shows."""

    tree: Any
    blocked: list[str]
    kind: str  # "zip", "legacy", "torchscript"
    weights_only: WeightsOnly
    facts: dict[str, Any] = field(default_factory=dict)
    state_metadata: list[Any] = field(default_factory=list)
    storage_of: dict[int, str] = field(default_factory=dict)  # id of a leaf -> storage key
    locations: list[str] = field(default_factory=list)  # the devices its tensors were saved on


def read_archive(src: Source, lazy: bool, zd: ZipDir | None = None) -> TorchRead:
    """Read a torch zip file's structure; tensors stay in the file."""
    name = src.name
    zd = zd or read_zip_dir(src)
    root = zip_root(zd)
    pkl_rec = _check_dir(zd, root)
    recs = zd.records
    facts: dict[str, Any] = {}
    small = [recs[f"{root}/{k}"] for k in _FACT_RECORDS if f"{root}/{k}" in recs]
    facts.update({r.name[len(root) + 1 :]: _text(zd, r) for r in small})
    scripted = f"{root}/constants.pkl" in recs or any(r.startswith(f"{root}/code/") for r in recs)
    where = f"{name}[{pkl_rec.name}]"
    limit = min(_MAX_PKL, (16 << 20) + _PKL_PER_BYTE * src.size)
    budget = None
    if pkl_rec.method != 0 and pkl_rec.size <= limit:  # (past the limit: zd.read says so)
        # what a deflated data.pkl inflates to is allocated, not read: charged to the file's
        # allocation budget (64 MiB + 16 per file byte) before anything is inflated; the
        # pickle is then read against what is left of that same budget
        budget = Budget(where, src.size)
        budget.charge_alloc(pkl_rec.size, f"{pkl_rec.name} inflates to {pkl_rec.size:,} bytes")
    pkl = zd.read(pkl_rec, limit)
    base = pkl_rec.data if pkl_rec.method == 0 and not src.remote else None
    storages: dict[str, TorchStorage] = {}

    def persistent_load(pid: Any) -> Any:
        return _storage(pid, zd, root, storages, where)

    return _run(pkl, where, lazy, base, persistent_load, scripted, facts, budget)


def read_deferred(src: Source, lazy: bool, first: tuple[str, int, bytes]) -> TorchRead:
    """A remote shard listed from its first block (`_head.first_pkl`): its zip directory is
    read, and checked as `read_archive` checks it, when a value is first read."""
    root, start, pkl = first
    where = f"{src.name}[{root}/data.pkl]"
    wanted: dict[str, tuple[str, Any, int]] = {}  # key -> (type, numel, nbytes)

    def check(zd: ZipDir) -> None:
        if zip_root(zd) != root:
            raise LoadError(f"{src.name}: the zip's first entry is not {root}/data.pkl")
        rec = _check_dir(zd, root)
        if (rec.header, rec.method, rec.size, rec.data) != (0, 0, len(pkl), start):
            raise LoadError(f"{where}: the zip directory and the first record disagree")
        for key, (type_path, numel, nbytes) in wanted.items():
            _record(zd, root, key, type_path, numel, nbytes, where)

    deferred = Deferred(src, check)
    storages: dict[str, TorchStorage] = {}

    def persistent_load(pid: Any) -> Any:
        key, type_path, location, numel, nbytes = _pid(pid, where)
        got = storages.get(key)
        if got is None:
            wanted[key] = (type_path, numel, nbytes)
            late = DeferredRecord(deferred, f"{root}/data/{key}")
            got = TorchStorage(key, type_path, location, nbytes, src.name, 0, source=late)
            storages[key] = got
        return got

    return _run(pkl, where, lazy, None, persistent_load, False, {})


def _check_dir(zd: ZipDir, root: str) -> Record:
    """`<root>/data.pkl` of a torch zip whose entries all lie in `root`, little-endian."""
    name, recs = zd.src.name, zd.records
    for r in recs:
        if not r.startswith(root + "/"):
            raise LoadError(f"{name}: zip entry {r!r} is outside the archive folder {root!r}")
    pkl_rec = recs.get(f"{root}/data.pkl")
    if pkl_rec is None:
        raise LoadError(f"{name}: a zip without {root}/data.pkl: not a torch checkpoint")
    order_rec = recs.get(f"{root}/byteorder")
    order = _text(zd, order_rec) if order_rec is not None else "little"
    if order != "little":
        raise LoadError(f"{name}: a {order!r}-endian checkpoint; only little-endian is read")
    if pkl_rec.data < 0:
        local_data_offset(zd.src, pkl_rec, zd.tail)
    return pkl_rec


def _run(
    pkl: bytes,
    where: str,
    lazy: bool,
    base: int | None,
    persistent_load: Any,
    scripted: bool,
    facts: dict[str, Any],
    budget: Budget | None = None,
) -> TorchRead:
    budget = budget if budget is not None else Budget(where, len(pkl))
    maker = TensorMaker(where)
    machine = TorchMachine(pkl, where, lazy, budget, persistent_load, maker, base)
    tree, _ = run_pickle(machine)
    blocked = check_tree(tree, budget)
    kind = "torchscript" if scripted else "zip"
    refuse = "a TorchScript archive (torch.load hands it to torch.jit.load)" if scripted else None
    report = verdict([pkl], refuse=refuse)
    return TorchRead(
        tree, blocked, kind, report, facts, machine.state_metadata, maker.storage_of,
        list(maker.locations),
    )  # fmt: skip


def _text(zd: ZipDir, rec: Record) -> str:
    raw = zd.read(rec, 4096)
    try:
        return raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise LoadError(f"{zd.src.name}[{rec.name}]: not text") from None


def storage_type_name(g: Any, where: str) -> str:
    from treetool.io._opaque import GlobalRef

    if type(g) is not GlobalRef or g.name not in STORAGE_DTYPES:
        raise LoadError(
            f"{where}: a persistent id whose storage type is {g!r}, not a torch storage class"
        )
    return g.class_path


_ITEM = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
         "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16}  # fmt: skip


def storage_nbytes(type_path: str, numel: Any, where: str) -> int:
    if type(numel) is not int or numel < 0 or numel > 1 << 50:
        raise LoadError(f"{where}: a storage size {numel!r} is not an int >= 0")
    dt = STORAGE_DTYPES[type_path.rsplit(".", 1)[-1]]
    return numel * _ITEM.get(dt or "uint8", 1)


def _pid(pid: Any, where: str) -> tuple[str, str, str, Any, int]:
    """(key, storage type, location, numel, nbytes) of a storage's persistent id, checked."""
    if type(pid) is not tuple or len(pid) != 5 or pid[0] != "storage":
        raise LoadError(
            f"{where}: a persistent id {str(pid)[:80]} is not ('storage', type, key, location, numel)"
        )
    _, stype, key, location, numel = pid
    if type(key) is not str or type(location) is not str:
        raise LoadError(f"{where}: a persistent id whose key or location is not a string")
    type_path = storage_type_name(stype, where)
    return key, type_path, location, numel, storage_nbytes(type_path, numel, where)


def _record(
    zd: ZipDir, root: str, key: str, type_path: str, numel: Any, nbytes: int, where: str
) -> Record:
    """The record of storage `key`, which must hold its `nbytes`."""
    rec = zd.records.get(f"{root}/data/{key}")
    if rec is None:
        raise LoadError(
            f"{where}: storage key {key!r} is not in the archive (no {root}/data/{key})"
        )
    if rec.size < nbytes:
        raise LoadError(
            f"{zd.src.name}[{rec.name}]: storage record of {rec.size} bytes, shorter than its "
            f"{numel} elements of {type_path} ({nbytes} bytes)"
        )
    return rec


def _storage(pid: Any, zd: ZipDir, root: str, seen: dict[str, TorchStorage], where: str) -> Any:
    key, type_path, location, numel, nbytes = _pid(pid, where)
    got = seen.get(key)
    if got is not None:
        return got
    rec = _record(zd, root, key, type_path, numel, nbytes, where)
    src = zd.src
    if rec.method == 0 and src.remote:  # offsets from the record's start; its header read later
        st = TorchStorage(
            key, type_path, location, nbytes, src.name, 0, source=RecordSource(src, rec)
        )
    elif rec.method == 0:
        st = TorchStorage(key, type_path, location, nbytes, src.name, rec.data)
    else:
        st = TorchStorage(
            key, type_path, location, nbytes, src.name, 0, opener=inflating_opener(src, rec, 0)
        )
    seen[key] = st
    return st
