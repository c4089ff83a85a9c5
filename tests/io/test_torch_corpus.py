"""Every file of the torch corpus, written by real torch, read by treetool in a subprocess that
never imports torch: paths, shapes, dtypes and values equal what `torch.load` gives, nothing
ran, and the weights_only report equals torch's own verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from torch_corpus import MARKER, tensor_bytes, torch_dtype_name, torch_leaves, write_corpus

pytestmark = pytest.mark.slow

# read in a child process: what treetool gives for every file, and whether torch got imported
_READER = r"""
import json, sys
import numpy as np
import treetool as tt
import treetool.io as tio

out = {}
for name, path in json.loads(sys.argv[1]).items():
    try:
        r = tio.read(path)
    except Exception as e:  # a LoadError: its one line
        out[name] = {"error": str(e)}
        continue
    leaves = []
    for p, x in tt.leaves_with_path(r.tree):
        if isinstance(x, tt.LazyArray):
            a = np.ascontiguousarray(np.asarray(x))
            leaves.append([str(p), list(x.shape), x.dtype_name, a.tobytes().hex(), type(x).__name__])
        else:
            leaves.append([str(p), None, type(x).__name__, repr(x), type(x).__name__])
    facts = (r.facts or {}).get("torch", {})
    out[name] = {"leaves": leaves, "blocked": r.blocked, "facts": facts, "format": r.format}
out["_torch_imported"] = "torch" in sys.modules
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_corpus(str(tmp_path_factory.mktemp("torch_corpus")))


@pytest.fixture(scope="module")
def read(corpus: dict[str, str]) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _READER, json.dumps(corpus)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_treetool_never_imports_torch(read: dict) -> None:
    assert read["_torch_imported"] is False


def test_nothing_in_the_files_ran(read: dict, corpus: dict[str, str]) -> None:
    root = os.path.dirname(corpus["evil.pt"])
    assert not os.path.exists(os.path.join(root, MARKER))
    assert read["evil.pt"]["blocked"] == ["posix.system"]
    assert read["evil_legacy.pt"]["blocked"] == ["posix.system"]


_PLAIN = [
    "dtypes.pt", "dtypes_legacy.pt", "views.pt", "views_legacy.pt", "buffer.pth",
    "state_dict.bin", "tied.pt", "adam.pt", "lightning.ckpt", "nested.pt", "sharded",
]  # fmt: skip


def _torch_side(name: str, path: str) -> list[list]:
    if name == "sharded":
        obj: dict = {}
        with open(path) as fh:
            index = json.load(fh)["weight_map"]
        for shard in sorted(set(index.values())):
            obj.update(torch.load(os.path.join(os.path.dirname(path), shard), weights_only=True))
        obj = {k: obj[k] for k in sorted(obj)}
    else:
        obj = torch.load(path, weights_only=False)
    out = []
    for p, x in torch_leaves(obj):
        if isinstance(x, torch.Tensor):
            out.append([p, list(x.shape), torch_dtype_name(x), tensor_bytes(x)])
        else:
            out.append([p, None, type(x).__name__, x])
    return out


@pytest.mark.parametrize("name", _PLAIN)
def test_paths_shapes_dtypes_values_equal_torch(name: str, corpus: dict, read: dict) -> None:
    got = read[name]
    assert "error" not in got, got
    ours = {p: (shape, dt, val) for p, shape, dt, val, _ in got["leaves"]}
    theirs = _torch_side(name, corpus[name])
    tensors = [(p, s, d, v) for p, s, d, v in theirs if s is not None]
    # (treetool walks a dict in sorted key order, as jax does; torch in insertion order)
    assert sorted(p for p, *_ in tensors) == sorted(
        p for p, s, *_ in got["leaves"] if s is not None
    )
    for p, shape, dt, value in tensors:
        assert ours[p] == (shape, dt, value), p
    for p, shape, kind, value in theirs:  # python values: equal, except torch's own objects
        if shape is None and kind in (
            "bool",
            "int",
            "float",
            "str",
        ):  # (None is an empty node: no leaf)
            assert ours[p][2] == repr(value), p


def test_dtypes_cover_float8_and_unsigned(read: dict) -> None:
    dts = {p: dt for p, _, dt, _, _ in read["dtypes.pt"]["leaves"]}
    assert dts["['float8_e4m3fn']"] == "float8_e4m3fn"
    assert dts["['float8_e5m2fnuz']"] == "float8_e5m2fnuz"
    assert dts["['uint16']"] == "uint16" and dts["['uint64']"] == "uint64"
    assert dts["['bfloat16']"] == "bfloat16" and dts["['scalar']"] == "float32"


def test_views_are_strided_where_torch_views_are(read: dict) -> None:
    kinds = {p: k for p, *_, k in read["views.pt"]["leaves"]}
    assert kinds == {
        "['whole']": "LazyArray", "['t']": "LazyArray", "['col']": "StridedArray",
        "['step']": "StridedArray", "['perm']": "StridedArray", "['row']": "LazyArray",
        "['narrow']": "LazyArray", "['expand']": "StridedArray",
    }  # fmt: skip
    facts = read["views.pt"]["facts"]
    assert "tied" not in facts  # views of one storage are not ties
    (group,) = facts["views"]  # `expand` has a storage of its own
    assert group["views"]["['col']"] == [20, 200]  # a[:, 1, :]: elements 5 to 49
    assert group["views"]["['whole']"] == [0, 240] and "['expand']" not in group["views"]


def test_ties_are_named_and_counted_once(read: dict) -> None:
    facts = read["tied.pt"]["facts"]
    assert facts["tied"] == {"['lm_head.weight']": "same tensor as ['embed.weight']"}


def test_state_dict_names_are_kept_flat(read: dict, corpus: dict) -> None:
    names = sorted(p for p, *_ in read["state_dict.bin"]["leaves"])
    want = sorted(f"[{k!r}]" for k in torch.load(corpus["state_dict.bin"]))
    assert names == want and "['2.running_mean']" in names
    assert read["state_dict.bin"]["facts"]["state_dict_metadata"][""] == {"version": 1}


def test_whole_module_lists_its_parameters(read: dict) -> None:
    got = read["module.pt"]
    paths = {p: dt for p, _, dt, _, _ in got["leaves"]}
    # its state_dict() names, in torch's order: those of the same model's state_dict file
    assert list(paths) == [p for p, *_ in read["state_dict.bin"]["leaves"]]
    assert paths["['1.weight']"] == "float32" and paths["['2.running_var']"] == "float32"
    assert "torch.nn.modules.container.Sequential" in got["blocked"]


def test_torchscript_lists_its_tensors(read: dict) -> None:
    got = read["script.pt"]
    assert got["facts"]["format"] == "torchscript"
    assert [p for p, s, *_ in got["leaves"] if s is not None] == ["['weight']", "['bias']"]


_ZIPS = ["dtypes.pt", "views.pt", "buffer.pth", "state_dict.bin", "tied.pt", "adam.pt",
         "lightning.ckpt", "nested.pt", "module.pt", "evil.pt"]  # fmt: skip


@pytest.mark.parametrize("name", [*_ZIPS, "dtypes_legacy.pt", "evil_legacy.pt", "script.pt"])
def test_weights_only_report_equals_torch(name: str, corpus: dict, read: dict) -> None:
    report = read[name]["facts"]["weights_only"]
    path = corpus[name]
    if name in _ZIPS:
        unsafe = set(torch.serialization.get_unsafe_globals_in_checkpoint(path))
        assert {g["global"] for g in report["unsafe_globals"]} == unsafe
    try:
        torch.load(path, weights_only=True)
        accepted = True
    except Exception:  # torch's refusal (an UnpicklingError, or a RuntimeError for TorchScript)
        accepted = False
    assert report["accepted"] is accepted
    assert not os.path.exists(os.path.join(os.path.dirname(path), MARKER))


def test_weights_only_names_what_it_refuses(read: dict) -> None:
    report = read["evil.pt"]["facts"]["weights_only"]
    assert report["unsafe_globals"] == [
        {
            "global": "posix.system",
            "what": "runs commands or code when loaded (a malicious or unsafe file)",
        }
    ]
    assert report["reason"] == "1 global not on the allow-list"


def test_allow_list_is_torchs(read: dict) -> None:
    from torch._weights_only_unpickler import _get_allowed_globals

    from treetool.io._torch import ALLOWED

    assert set(_get_allowed_globals()) == ALLOWED
