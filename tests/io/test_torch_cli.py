"""`treetool` on torch files, as a real subprocess: ls, inspect (text and --json, with the
weights_only report), get, summary, diff (incl. against safetensors and a sharded `.bin` set
against flax msgpack), hostile files as one line, and reading structure reads almost nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.slow


def run(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "treetool.cli", *args],
        capture_output=True, text=True, timeout=120, cwd=cwd, check=False,
    )  # fmt: skip


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)


@pytest.fixture(scope="module")
def d(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("torch_cli")
    w = torch.arange(6.0).reshape(2, 3)
    sd = {
        "layers.0.weight": w,
        "layers.0.bias": torch.ones(3, dtype=torch.bfloat16),
        "col": w[:, 1],
    }
    torch.save(sd, root / "model.pt")
    from safetensors.torch import save_file

    save_file({"layers.0.weight": w, "layers.0.bias": torch.ones(3, dtype=torch.bfloat16),
               "col": w[:, 1].contiguous()}, str(root / "same.safetensors"))  # fmt: skip
    save_file({"layers.0.weight": w + 1, "extra": torch.zeros(2)}, str(root / "other.safetensors"))
    torch.save(Net(), root / "net.pt")  # a whole pickled module of a user's class
    (root / "broken.pt").write_bytes((root / "model.pt").read_bytes()[:300])
    big = {f"t{i}": torch.randn(256, 1024) for i in range(16)}  # 16 MiB of tensors
    torch.save(big, root / "big.pt")
    with warnings.catch_warnings():  # torch 2.13 deprecates torch.jit; archives still exist
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 3)), str(root / "script.pt"))
    return str(root)


def test_torchscript_is_named_in_one_line(d: str) -> None:
    r = run("inspect", "--no-tui", "script.pt", cwd=d)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "torch checkpoint (torchscript format)"
    assert " ".join(r.stdout.split()).startswith(  # the line may wrap
        "torch checkpoint (torchscript format) weights_only: torch.load(weights_only=True) "
        "would refuse this file: a TorchScript archive (torch.load hands it to torch.jit.load)"
    )
    ls = run("ls", "script.pt", cwd=d)
    assert ls.returncode == 0, ls.stderr
    # its state_dict() names, as torch.jit.load(f).state_dict() gives them
    assert ls.stdout.splitlines()[:2] == ["['weight']\t[3, 2]\tfloat32", "['bias']\t[3]\tfloat32"]


def test_ls(d: str) -> None:
    r = run("ls", "model.pt", cwd=d)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "['col']\t[2]\tfloat32",
        "['layers.0.bias']\t[3]\tbfloat16",
        "['layers.0.weight']\t[2, 3]\tfloat32",
    ]


def test_inspect_text_says_weights_only_and_ties(d: str) -> None:
    r = run("inspect", "--no-tui", "model.pt", cwd=d)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:5] == [
        "torch checkpoint (zip format)",
        "weights_only: torch.load(weights_only=True) would accept this file",
        "views of one storage '0': 2 tensors (not tied; bytes counted once)",
        "  ['layers.0.weight']: bytes 0-24",
        "  ['col']: bytes 4-20",
    ]
    assert "['layers.0.weight']  f32[2,3]" in r.stdout


def test_inspect_json_has_the_report(d: str) -> None:
    r = run("inspect", "--json", "net.pt", cwd=d)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    report = out["torch"]["weights_only"]
    assert report["accepted"] is False
    names = {g["global"] for g in report["unsafe_globals"]}
    assert names == set(
        torch.serialization.get_unsafe_globals_in_checkpoint(os.path.join(d, "net.pt"))
    )
    paths = [leaf["path"] for leaf in out["leaves"]]
    assert paths == ["['fc.weight']", "['fc.bias']"]  # its state_dict() names
    raw = json.loads(run("inspect", "--json", "--raw", "net.pt", cwd=d).stdout)
    assert "._modules['fc']._parameters['weight']" in {leaf["path"] for leaf in raw["leaves"]}


def test_get_reads_values(d: str) -> None:
    r = run("get", "model.pt", "['col']", cwd=d)
    assert r.returncode == 0, r.stderr
    assert "[1. 4.]" in r.stdout and "StridedArray" in r.stdout


def test_summary(d: str) -> None:
    r = run("summary", "model.pt", cwd=d)
    assert r.returncode == 0, r.stderr
    total = next(line for line in r.stdout.splitlines() if line.startswith("total"))
    # col is a view of layers.0.weight's storage: counted once (6 + 3 params, 24 + 6 bytes)
    assert total.split() == ["total", "dict", "3", "9", "100%", "30", "B", "float32,", "bfloat16"]
    assert "tied" not in r.stdout and "share memory" not in r.stdout  # a view is not a tie
    js = run("inspect", "--json", "model.pt", cwd=d)
    assert json.loads(js.stdout)["totals"] == {"leaves": 3, "params": 9, "bytes": 30}


def test_diff_against_safetensors(d: str) -> None:
    same = run("diff", "model.pt", "same.safetensors", cwd=d)
    assert same.returncode == 0, same.stdout + same.stderr
    other = run("diff", "--json", "model.pt", "other.safetensors", cwd=d)
    assert other.returncode == 1, other.stderr
    kinds = {c["path"]: c["kind"] for c in json.loads(other.stdout)["changes"]}
    assert kinds == {"['col']": "removed", "['layers.0.bias']": "removed",
                     "['layers.0.weight']": "value", "['extra']": "added"}  # fmt: skip


def test_hostile_file_is_one_line(d: str) -> None:
    r = run("ls", "broken.pt", cwd=d)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("treetool: error: broken.pt")
    assert "Traceback" not in r.stderr


def test_structure_reads_almost_nothing(d: str) -> None:
    """Reading the structure of 16 MiB of tensors reads < 1% of the file."""
    code = (
        "import treetool.io as tio, sys\n"
        "def rchar():\n"
        "    return int(dict(l.split(': ') for l in open('/proc/self/io').read().splitlines())['rchar'])\n"
        "tio.read(sys.argv[2])  # the modules a read imports are read once, before\n"
        "before = rchar(); r = tio.read(sys.argv[1]); after = rchar()\n"
        "print(after - before, len(r.tree), 'torch' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, os.path.join(d, "big.pt"), os.path.join(d, "model.pt")],
                       capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    read, n, imported = r.stdout.split()
    size = os.path.getsize(os.path.join(d, "big.pt"))
    assert int(read) < size // 100 and n == "16" and imported == "False"


def test_sharded_bin_against_flax_msgpack(tmp_path: os.PathLike) -> None:
    from flax.serialization import to_bytes

    sd = {"a.weight": torch.ones(2, 2), "b.weight": torch.zeros(3)}
    torch.save({"a.weight": sd["a.weight"]}, tmp_path / "pytorch_model-00001-of-00002.bin")
    torch.save({"b.weight": sd["b.weight"]}, tmp_path / "pytorch_model-00002-of-00002.bin")
    index = {"metadata": {}, "weight_map": {"a.weight": "pytorch_model-00001-of-00002.bin",
                                            "b.weight": "pytorch_model-00002-of-00002.bin"}}  # fmt: skip
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    flax = {"a": {"kernel": np.ones((2, 2), np.float32)}}
    (tmp_path / "flax_model.msgpack").write_bytes(to_bytes(flax))
    r = run(
        "diff", "--json", "pytorch_model.bin.index.json", "flax_model.msgpack", cwd=str(tmp_path)
    )
    assert r.returncode == 1, r.stderr
    kinds = {c["path"]: c["kind"] for c in json.loads(r.stdout)["changes"]}
    assert kinds == {"['a.weight']": "removed", "['b.weight']": "removed", "['a']": "added"}
    r = run("ls", "pytorch_model.bin.index.json", cwd=str(tmp_path))
    assert r.stdout.splitlines() == ["['a.weight']\t[2, 2]\tfloat32", "['b.weight']\t[3]\tfloat32"]
