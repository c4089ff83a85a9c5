"""PyTorch checkpoints, read safely and lazily without torch: `.pt`, `.pth`, `.bin`, `.ckpt`.

Both of torch's formats are read by treetool's own zip reader and safe pickle machine; torch
is never imported and nothing from the file runs:

- the zip format (torch >= 1.6): `<root>/data.pkl` and `<root>/data/<key>` records;
- the legacy stream format (older files, `_use_new_zipfile_serialization=False`, old HF
  `.bin` files); the older tar format is recognised and named in one line.

A `state_dict` reads as the dict torch saved, its names kept as they are
(`{'layers.0.weight': LazyArray(f32[...]), ...}`); tensors (and Parameters) are `LazyArray`
leaves with torch's dtype names (bfloat16 and float8 through ml_dtypes), a non-contiguous view
a `StridedArray`; classes outside torch's tensor reconstructors (a pickled `nn.Module`,
Lightning callbacks) are `Opaque`. Two names of one tensor (tied weights) are one leaf object,
counted once. `Loaded.facts["torch"]` holds the file's facts: its kind, the `weights_only`
report (would `torch.load(weights_only=True)` accept it, and which globals it refuses), tied
names, and a state_dict's `_metadata`.

Example:
    >>> import io, os, pickle, tempfile, zipfile, treetool as tt
    >>> from treetool.io.torch import looks_like_torch
    >>> p = os.path.join(tempfile.mkdtemp(), "tiny.pt")
    >>> with zipfile.ZipFile(p, "w") as z:
    ...     z.writestr("tiny/data.pkl", pickle.dumps({"step": 3}, protocol=2))
    ...     z.writestr("tiny/byteorder", "little")
    >>> looks_like_torch(p)
    True
    >>> r = tt.io.read(p)
    >>> r.format, r.tree, r.facts["torch"]["weights_only"]["accepted"]
    ('torch', {'step': 3}, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treetool._errors import LoadError
from treetool._leaves._lazy_array import LazyArray
from treetool._paths._path import DictKey, Key, Path, SequenceKey
from treetool._source import Source, source_for
from treetool.io._formats import Format, Probe, ReadOptions
from treetool.io._loaded import Loaded
from treetool.io._opaque import Opaque, opaque_children
from treetool.io._torch._head import first_pkl
from treetool.io._torch._sniff import PREFIX, is_torch_zip
from treetool.io._torch._zip import read_zip_dir

if TYPE_CHECKING:
    from treetool.io._torch._archive import TorchRead

__all__ = ["FORMAT", "looks_like_torch", "read_flat", "torch_kind"]

_TAR_MEMBERS = (b"sys_info", b"pickle", b"tensors", b"storages")


def torch_kind(src: Source, head: bytes) -> str | None:
    """ "zip", "legacy" or "tar" when the file is a torch checkpoint of that format, else None."""
    if head.startswith(PREFIX[:4]) and src.size >= len(PREFIX):
        return "legacy" if src.read(0, len(PREFIX)) == PREFIX else None
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        if src.remote and head[:4] == b"PK\x03\x04" and first_pkl(src) is not None:
            return "zip"  # its first record is a stored data.pkl: no read of the tail
        n = min(src.size, 1 << 16)
        tail = src.read(src.size - n, n)  # read once: the directory and the fallback use it
        try:
            return "zip" if is_torch_zip(read_zip_dir(src, tail=tail)) else None
        except LoadError:
            # a damaged zip: torch's when its directory names a data.pkl (the torch reader
            # then says what is wrong), npz's otherwise
            return "zip" if b"/data.pkl" in tail else None
    return "tar" if _is_torch_tar(src) else None


def _is_torch_tar(src: Source) -> bool:
    """A tar (ustar/pax) whose first members include torch's `sys_info`/`pickle`/`storages`."""
    pos, size = 0, src.size
    for _ in range(16):
        if pos + 512 > size:
            return False
        block = src.read(pos, 512)
        if block[257:262] != b"ustar":
            return False
        if block[:100].rstrip(b"\x00") in _TAR_MEMBERS:
            return True
        try:
            n = int(block[124:136].rstrip(b"\x00 ") or b"0", 8)
        except ValueError:
            return False
        pos += 512 + (n + 511) // 512 * 512
    return False


def looks_like_torch(path: str) -> bool:
    """Whether `path` is a torch checkpoint (zip with `<root>/data.pkl`, legacy, or tar)."""
    src = source_for(path)
    return torch_kind(src, src.read(0, min(64, src.size))) is not None


def _read_torch(path: str, lazy: bool, shard: bool = False) -> TorchRead:
    src = source_for(path)
    kind = torch_kind(src, src.read(0, min(64, src.size)))
    if kind == "tar":
        raise LoadError(
            f"{path}: a torch checkpoint in the old tar format (torch < 0.4): recognised, not "
            "read (load it with torch and save it again)"
        )
    if kind == "legacy":
        from treetool.io._torch._legacy import read_legacy

        return read_legacy(src, lazy)
    if kind == "zip":
        from treetool.io._torch._archive import read_archive, read_deferred

        first = first_pkl(src) if shard and src.remote else None
        if first is not None:  # listed from the first block; the directory read on demand
            return read_deferred(src, lazy, first)

        return read_archive(src, lazy)
    raise LoadError(f"{path}: not a torch checkpoint (neither a zip with data.pkl nor legacy)")


def _sniff(probe: Probe) -> bool:
    """A zip with `<root>/data.pkl`, or the legacy format's first bytes."""
    return torch_kind(probe.src, probe.head) in ("zip", "legacy")


def _guess(probe: Probe) -> bool:
    """The old tar format (no magic at its start): named in one line by the reader."""
    return _is_torch_tar(probe.src)


def _read(src: Source, opts: ReadOptions) -> Loaded:
    """`treetool.io.read` for torch files: a `Loaded` whose `facts["torch"]` says what it is."""
    from treetool.io._save import _materialize
    from treetool.io._torch._weights_only import ALLOWED, saved_on

    path, trust, lazy, format = src.name, opts.trust, opts.lazy, "torch"
    if trust:
        raise LoadError(
            f"{path}: trust=True does not apply to torch files: treetool reads them without "
            "torch and never runs their code (torch.load runs it)"
        )
    r = _read_torch(path, lazy)
    tree = r.tree
    facts: dict[str, Any] = {
        "format": r.kind,
        "weights_only": saved_on(r.weights_only, r.locations),
    }
    if not opts.raw:
        from treetool.io._torch._modules import state_dicts

        tree, modules = state_dicts(tree)
        if modules:
            facts["modules"] = modules
    if r.facts:
        facts["records"] = r.facts
    tied, views = _shared(tree, r.storage_of)
    if tied:
        facts["tied"] = tied
    if views:
        facts["views"] = views
    if r.state_metadata:
        facts["state_dict_metadata"] = r.state_metadata[0]
    # every global the file names that is not a torch reconstructor, wherever it lies (a
    # module's classes hidden under its state_dict names too)
    from treetool.io._pickle._ops import ALLOWED as REBUILT

    unsafe = [str(g["global"]) for g in r.weights_only.get("unsafe_globals", ())]
    blocked = sorted(
        {
            *r.blocked,
            *(g for g in unsafe if g not in ALLOWED and tuple(g.rsplit(".", 1)) not in REBUILT),
        }
    )
    tree = tree if lazy else _materialize(tree, path, refuse_opaque=False)
    return Loaded(tree, format, blocked, facts={"torch": facts})


FORMAT = Format("torch", sniff=_sniff, read=_read, guess=_guess)


def read_flat(src: Source, lazy: bool) -> dict[str, Any]:
    """A shard of a sharded `.bin` set: `{name: leaf}` of its state_dict."""
    tree = _read_torch(src.name, lazy, shard=True).tree
    if type(tree) is not dict and not isinstance(tree, dict):
        raise LoadError(f"{src.name}: a shard must hold a state_dict (a dict of tensors)")
    bad = next((k for k in tree if type(k) is not str), None)
    if bad is not None:
        raise LoadError(f"{src.name}: a shard's state_dict has a key {bad!r} that is not a string")
    return dict(tree)


def _shared(tree: Any, storage_of: dict[int, str]) -> tuple[dict[str, str], list[dict]]:
    """Tensors that share a storage. A tie is the same tensor (storage, offset, shape and
    strides: one leaf object) at two paths: `{path: "same tensor as P"}`. Different tensors
    over one storage (slices of one flat buffer, a transpose, a view) are not ties: one entry
    per such storage, `{"storage": key, "views": {path: [first byte, end byte]}}`, the byte
    range each covers in the storage (a strided view: from its first element to its last)."""
    first: dict[int, str] = {}
    tied: dict[str, str] = {}
    groups: dict[str, dict[str, list[int]]] = {}
    stack: list[tuple[Any, tuple]] = [(tree, ())]
    seen: set[int] = set()
    while stack:
        x, keys = stack.pop()
        t = type(x)
        if isinstance(x, LazyArray):
            text = str(Path(keys))
            prev = first.get(id(x))
            if prev is not None:
                tied[text] = f"same tensor as {prev}"
                continue
            first[id(x)] = text
            key = storage_of.get(id(x))
            if key is not None:
                groups.setdefault(key, {})[text] = _byte_range(x)
            continue
        if id(x) in seen:
            continue
        kids: list[tuple[Key, Any]]
        if isinstance(x, dict):
            seen.add(id(x))
            kids = [(DictKey(k), v) for k, v in x.items()]
        elif t in (list, tuple):
            seen.add(id(x))
            kids = [(SequenceKey(i), v) for i, v in enumerate(x)]
        elif t is Opaque:
            seen.add(id(x))
            kids = list(opaque_children(x))
        else:
            continue
        stack.extend((v, (*keys, k)) for k, v in reversed(kids))
    views = [{"storage": k, "views": v} for k, v in groups.items() if len(v) > 1]
    return dict(sorted(tied.items())), views


def _byte_range(x: LazyArray) -> list[int]:
    """[first byte, end byte) of a tensor in its storage."""
    at = x.view_of[1] if x.view_of is not None else 0
    size = getattr(x, "window", None)
    return [at, at + (x.size * x.itemsize if size is None else size)]
