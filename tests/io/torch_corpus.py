"""The PyTorch corpus of the torch tests: files written by real torch at test time.

`write_corpus(root)` saves each case with `torch.save` (zip from a path and from a buffer,
legacy, views and slices, ties, every dtype incl. float8 and uint16, 0-d and empty tensors,
Parameters, nested containers with python values, an Adam state_dict, a Lightning-like dict, a
module state_dict with BatchNorm/LayerNorm/Embedding, a sharded `.bin` set with its index, a
whole module, a TorchScript archive, a malicious `__reduce__` inside a genuine zip) and returns
`{name: path}`. `torch_leaves(obj)` flattens what torch loads into `(keystr, tensor)` pairs in
the order treetool walks its tree, and `tensor_bytes` gives a tensor's elements as C-ordered
bytes, so both sides compare exactly (bfloat16 and float8 included).
"""

from __future__ import annotations

import io
import json
import os
import warnings
from typing import Any

import torch

#: the file a malicious pickle would create if anything ran
MARKER = "PWNED_BY_TORCH_FILE"


class Evil:
    """Runs a command when unpickled by a plain unpickler (never by treetool)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (os.system, (f"touch {self.marker}",))


def _every_dtype() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(3, 4, generator=g)
    out = {
        f"{dt}".removeprefix("torch."): base.to(dt)
        for dt in (
            torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
            torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64,
            torch.complex128, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
            torch.float8_e5m2fnuz,
        )
    }  # fmt: skip
    ints = torch.tensor([[0, 1, 2], [65535, 7, 9]], dtype=torch.int64)
    out["uint16"] = ints.to(torch.uint16)
    out["uint32"] = (ints * 65537).to(torch.uint32)
    out["uint64"] = (ints * 4294967297).to(torch.uint64)
    out["scalar"] = torch.tensor(3.5)
    out["empty"] = torch.zeros(0, 5)
    out["empty3"] = torch.ones(2, 0, 3, dtype=torch.int32)
    return out


def _views() -> dict[str, torch.Tensor]:
    a = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    return {
        "whole": a,
        "t": a[0].t(),  # Fortran order
        "col": a[:, 1, :],  # strided rows
        "step": a[:, :, ::2],  # every other element
        "perm": a.permute(2, 0, 1),  # a 3-d transpose
        "row": a[2],  # an offset into the storage
        "narrow": a.reshape(-1)[7:19],  # offset, contiguous
        "expand": torch.arange(3.0).expand(4, 3),  # stride 0
    }


def _modules() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Embedding(10, 4),
        torch.nn.Linear(4, 6),
        torch.nn.BatchNorm1d(6),
        torch.nn.LayerNorm(6),
    )


def write_corpus(root: str) -> dict[str, str]:
    """Write every case under `root`; `{case name: file path}`."""
    out: dict[str, str] = {}

    def save(name: str, obj: Any, **kw: Any) -> None:
        path = os.path.join(root, name)
        torch.save(obj, path, **kw)
        out[name] = path

    save("dtypes.pt", _every_dtype())
    # the legacy format has typed storages only: no float8 nor uint16/32/64 (torch cannot
    # load those back from it either)
    legacy = {k: v for k, v in _every_dtype().items() if "float8" not in k and k[:5] != "uint1"}
    legacy = {k: v for k, v in legacy.items() if k not in ("uint32", "uint64")}
    save("dtypes_legacy.pt", legacy, _use_new_zipfile_serialization=False)
    save("views.pt", _views())
    save("views_legacy.pt", _views(), _use_new_zipfile_serialization=False)
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2, 2), "b": torch.zeros(2)}, buf)  # root folder `archive/`
    with open(os.path.join(root, "buffer.pth"), "wb") as fh:
        fh.write(buf.getvalue())
    out["buffer.pth"] = os.path.join(root, "buffer.pth")
    model = _modules()
    model(torch.randint(0, 10, (5,)))  # BatchNorm running stats move
    save("state_dict.bin", model.state_dict())
    emb = torch.nn.Embedding(6, 4)
    head = torch.nn.Linear(4, 6, bias=False)
    head.weight = emb.weight  # tied, as Hugging Face ties lm_head to the embeddings
    tied = torch.nn.ModuleDict({"embed": emb, "lm_head": head})
    save("tied.pt", tied.state_dict())
    lin = torch.nn.Linear(4, 3)
    opt = torch.optim.Adam(lin.parameters(), lr=1e-3)
    lin(torch.ones(2, 4)).sum().backward()
    opt.step()
    save("adam.pt", opt.state_dict())
    save(
        "lightning.ckpt",
        {
            "epoch": 3,
            "global_step": 120,
            "pytorch-lightning_version": "2.4.0",
            "state_dict": lin.state_dict(),
            "optimizer_states": [opt.state_dict()],
            "lr_schedulers": [],
            "hyper_parameters": {"lr": 1e-3, "layers": [4, 3], "name": "tiny"},
            "callbacks": {"ModelCheckpoint{'monitor': 'val_loss'}": {"best_model_score": torch.tensor(0.25)}},
        },
    )  # fmt: skip
    save(
        "nested.pt",
        {
            "params": [torch.nn.Parameter(torch.ones(2, 3)), (torch.zeros(1), 7)],
            "meta": {"name": "x", "ratio": 0.5, "flags": {True, False}, "none": None,
                     "size": torch.Size([2, 3]), "device": torch.device("cpu"), "dtype": torch.float16},
            "step": 12,
        },
    )  # fmt: skip
    save("module.pt", _modules())
    marker = os.path.join(root, MARKER)
    save("evil.pt", {"w": torch.ones(3), "payload": Evil(marker)})
    save(
        "evil_legacy.pt",
        {"w": torch.ones(3), "payload": Evil(marker)},
        _use_new_zipfile_serialization=False,
    )
    with warnings.catch_warnings():  # torch 2.13 deprecates torch.jit; archives still exist
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 3)), os.path.join(root, "script.pt"))
    out["script.pt"] = os.path.join(root, "script.pt")
    shard_dir = os.path.join(root, "sharded")
    os.makedirs(shard_dir)
    sd = model.state_dict()
    names = list(sd)
    half = len(names) // 2
    weight_map = {}
    for i, part in enumerate((names[:half], names[half:]), 1):
        shard = f"pytorch_model-{i:05d}-of-00002.bin"
        torch.save({k: sd[k] for k in part}, os.path.join(shard_dir, shard),
                   _use_new_zipfile_serialization=(i == 1))  # fmt: skip
        weight_map.update(dict.fromkeys(part, shard))
    with open(os.path.join(shard_dir, "pytorch_model.bin.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, fh)
    out["sharded"] = os.path.join(shard_dir, "pytorch_model.bin.index.json")
    return out


def _key(k: Any) -> str:
    return f"[{k!r}]"


def torch_leaves(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(keystr, tensor or python value) of what torch loaded, in dict/list order."""
    if isinstance(obj, torch.Tensor):
        return [(prefix, obj)]
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in torch_leaves(v, prefix + _key(k))]
    if isinstance(obj, torch.Size):
        return [(prefix + f"[{i}]", v) for i, v in enumerate(obj)]
    if isinstance(obj, (list, tuple)):
        return [x for i, v in enumerate(obj) for x in torch_leaves(v, prefix + f"[{i}]")]
    return [(prefix, obj)]


def tensor_bytes(t: torch.Tensor) -> str:
    """The tensor's elements in C order, as hex."""
    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes().hex() if flat.numel() else ""


def torch_dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")
