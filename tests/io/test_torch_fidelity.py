"""Torch fidelity (issue 38): views of one flat storage are not ties, a CUDA-saved file's
verdict names the device, whole modules and TorchScript read under state_dict() names."""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from torch_craft import retag_location

import treetool as tt
import treetool.io as tio
from treetool._tree._totals import totals


def _flat_lstm() -> torch.nn.LSTM:
    torch.manual_seed(0)
    m = torch.nn.LSTM(4, 3, num_layers=2)
    ps = list(m.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in ps])  # one storage, as cuDNN keeps it
    at = 0
    with torch.no_grad():
        for p in ps:
            p.set_(flat.untyped_storage(), at, p.shape, p.stride())
            at += p.numel()
    return m


def test_lstm_flat_storage_is_views_not_ties(tmp_path: os.PathLike) -> None:
    p = str(tmp_path / "lstm.pt")
    torch.save(_flat_lstm().state_dict(), p)
    r = tio.read(p)
    facts = r.facts["torch"]
    assert "tied" not in facts
    (group,) = facts["views"]
    assert group["storage"] == "0"
    assert group["views"] == {
        "['weight_ih_l0']": [0, 192], "['weight_hh_l0']": [192, 336],
        "['bias_ih_l0']": [336, 384], "['bias_hh_l0']": [384, 432],
        "['weight_ih_l1']": [432, 576], "['weight_hh_l1']": [576, 720],
        "['bias_ih_l1']": [720, 768], "['bias_hh_l1']": [768, 816],
    }  # fmt: skip
    agg = totals(r.tree)
    assert (agg.leaves, agg.params, agg.nbytes) == (8, 204, 816)


def test_cuda_saved_file_needs_map_location(tmp_path: os.PathLike) -> None:
    cpu, cuda = str(tmp_path / "cpu.pt"), str(tmp_path / "cuda.pt")
    torch.save({"w": torch.ones(2, 3)}, cpu)
    retag_location(cpu, cuda)
    with pytest.raises(RuntimeError, match="CUDA"):  # what torch does on this CPU machine
        torch.load(cuda, weights_only=True)
    assert torch.load(cuda, weights_only=True, map_location="cpu")["w"].shape == (2, 3)
    report = tio.read(cuda).facts["torch"]["weights_only"]
    assert report["saved_on"] == ["cuda:0"] and report["map_location"] == "needed: saved on cuda:0"
    from treetool.io._torch import fact_lines

    line = fact_lines(tio.read(cuda).facts["torch"])[1]
    assert line.startswith("weights_only: saved on cuda:0: torch.load(weights_only=True) fails")
    assert "map_location='cpu'" in line
    assert "saved_on" in tio.read(cpu).facts["torch"]["weights_only"]
    assert "map_location" not in tio.read(cpu).facts["torch"]["weights_only"]


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.BatchNorm1d(2), torch.nn.Linear(2, 1)
    )


def test_whole_module_reads_as_its_state_dict(tmp_path: os.PathLike) -> None:
    m = _net()
    p = str(tmp_path / "whole.pt")
    torch.save(m, p)
    r = tio.read(p)
    assert list(r.tree) == list(m.state_dict())
    assert list(r.tree)[:3] == ["0.weight", "0.bias", "2.weight"]
    assert r.facts["torch"]["modules"] == ["torch.nn.modules.container.Sequential"]
    assert r.blocked == [
        "torch.nn.modules.activation.ReLU", "torch.nn.modules.batchnorm.BatchNorm1d",
        "torch.nn.modules.container.Sequential", "torch.nn.modules.linear.Linear",
    ]  # fmt: skip
    raw = tt.load(p, raw=True)
    assert type(raw).__name__ == "Opaque"
    paths = [str(k) for k, _ in tt.leaves_with_path(raw) if hasattr(_, "shape")]
    assert "._modules['0']._parameters['weight']" in paths


def test_torchscript_reads_as_its_state_dict(tmp_path: os.PathLike) -> None:
    m = _net().eval()
    p = str(tmp_path / "script.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.13 deprecates jit
        torch.jit.save(torch.jit.script(m), p)
        want = torch.jit.load(p).state_dict()
    r = tio.read(p)
    assert list(r.tree) == list(want)
    assert {k: v.shape for k, v in r.tree.items()} == {k: tuple(v.shape) for k, v in want.items()}
    assert r.facts["torch"]["format"] == "torchscript"
