"""Ties in the totals (issue 38): only the same tensor (storage, offset, shape, strides) is
tied; disjoint or overlapping views of one storage (an LSTM's flat weights) count each element
once but are not tied paths, in `totals`, `Tally`, `tt.summary` and `treetool summary`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import treetool as tt
import treetool.io as tio
from treetool._tree._totals import totals


def _flat_lstm() -> torch.nn.LSTM:
    """An nn.LSTM whose 8 parameters are disjoint views of one storage (as cuDNN's
    flatten_parameters keeps them on a GPU), built on the CPU."""
    torch.manual_seed(0)
    m = torch.nn.LSTM(4, 3, num_layers=2)
    ps = list(m.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in ps])
    at = 0
    with torch.no_grad():
        for p in ps:
            p.set_(flat.untyped_storage(), at, p.shape, p.stride())
            at += p.numel()
    return m


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("tied_totals")
    m = _flat_lstm()
    m.flatten_parameters()  # a no-op on the CPU: the storage stays the one flat buffer
    sd = m.state_dict()
    assert len({t.untyped_storage().data_ptr() for t in sd.values()}) == 1
    out = {"lstm": str(root / "lstm.pt"), "tied": str(root / "tied.pt")}
    torch.save(sd, out["lstm"])
    emb = torch.nn.Embedding(5, 3)
    head = torch.nn.Linear(3, 5, bias=False)
    head.weight = emb.weight  # tied embeddings: the same tensor under two names
    net = torch.nn.ModuleDict({"embed": emb, "lm_head": head})
    torch.save(net.state_dict(), out["tied"])
    return out


def test_lstm_views_are_counted_once_and_not_tied(files: dict[str, str]) -> None:
    tree = tt.load(files["lstm"])
    agg = totals(tree)
    assert (agg.leaves, agg.arrays, agg.params, agg.nbytes, agg.tied) == (8, 1, 204, 816, 0)
    s = tt.summary(tree)
    assert s.tied == []
    assert (s.total.leaves, s.total.params, s.total.nbytes) == (8, 204, 816)
    assert s.to_dict()["tied"] == []
    assert "tied" not in str(s) and "share memory" not in str(s)
    assert tt.view(tree).aggregates.tied == 0


def test_a_real_tie_is_still_tied(files: dict[str, str]) -> None:
    tree = tt.load(files["tied"])
    assert tio.read(files["tied"]).facts["torch"]["tied"] == {
        "['lm_head.weight']": "same tensor as ['embed.weight']"
    }
    agg = totals(tree)
    assert (agg.leaves, agg.arrays, agg.params, agg.nbytes, agg.tied) == (2, 1, 15, 60, 1)
    s = tt.summary(tree)
    assert s.tied == [(["['embed.weight']", "['lm_head.weight']"], 15)]
    assert (s.total.params, s.total.nbytes) == (15, 60)


def test_a_tie_among_views_keeps_its_own_params(tmp_path: os.PathLike) -> None:
    t = torch.arange(24.0)
    p = str(tmp_path / "mixed.pt")
    torch.save({"a": t[:6], "b": t[6:], "a2": t[:6]}, p)  # a2 is a: tied; b a view
    tree = tt.load(p)
    agg = totals(tree)
    assert (agg.leaves, agg.arrays, agg.params, agg.nbytes, agg.tied) == (3, 1, 24, 96, 1)
    assert tt.summary(tree).tied == [(["['a']", "['a2']"], 6)]


def _cli(*args: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "treetool.cli", *args],
        capture_output=True, text=True, timeout=120, cwd=cwd, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_cli_summary_lines(files: dict[str, str]) -> None:
    r = _cli("summary", "lstm.pt", cwd=os.path.dirname(files["lstm"]))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    total = next(line for line in lines if line.startswith("total"))
    assert total.split() == ["total", "OrderedDict", "8", "204", "100%", "816", "B", "float32"]
    assert lines[1].split() == ["['weight_ih_l0']", "f32[12,4]", "1", "48", "23.5%", "192", "B",
                                "float32"]  # fmt: skip
    assert not [line for line in lines if "tied" in line or "share memory" in line]
    r = _cli("summary", "tied.pt", cwd=os.path.dirname(files["tied"]))
    assert r.returncode == 0, r.stderr
    assert (
        "tied: 2 paths share memory (['embed.weight'], ['lm_head.weight']), 15 params counted "
        "once in the total"
    ) in " ".join(r.stdout.split())
