"""`tt.load`, `tt.materialize`, `treetool.io.read` and `detect` on files written by real torch
(in-process: torch writes, treetool reads), and the TUI details rows of a torch file."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
import torch

import treetool as tt
import treetool.io as tio
from treetool import LoadError


@pytest.fixture
def pt(tmp_path: os.PathLike) -> str:
    p = str(tmp_path / "model.pt")
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    torch.save({"layers.0.weight": w, "layers.0.bias": torch.ones(4, dtype=torch.bfloat16),
                "head.weight": w, "t": w.t()}, p)  # fmt: skip
    return p


def test_load_is_a_flat_dict_of_lazy_arrays(pt: str) -> None:
    tree = tt.load(pt)
    assert list(tree) == ["layers.0.weight", "layers.0.bias", "head.weight", "t"]
    assert isinstance(tree["layers.0.weight"], tt.LazyArray)
    assert tree["head.weight"] is tree["layers.0.weight"]  # one tensor, two names: one leaf
    assert tree["layers.0.bias"].dtype_name == "bfloat16"
    assert tree["t"].fortran_order and tree["t"].shape == (4, 3)


def test_materialize_gives_numpy(pt: str) -> None:
    tree = tt.load(pt)
    out = tt.materialize(tree)
    assert type(out["t"]) is np.ndarray
    np.testing.assert_array_equal(out["t"], np.arange(12, dtype=np.float32).reshape(3, 4).T)
    assert isinstance(tree["t"], tt.LazyArray)  # the input is not changed
    eager = tt.load(pt, lazy=False)
    assert (
        type(eager["layers.0.bias"]) is np.ndarray
        and str(eager["layers.0.bias"].dtype) == "bfloat16"
    )


def test_totals_count_a_tie_once(pt: str) -> None:
    out = tt.summary(tt.load(pt)).to_dict()
    # head.weight is layers.0.weight (tied), t its transpose (a view, not tied): 12 floats
    assert out["totals"]["params"] == 12 + 4 and out["totals"]["bytes"] == 48 + 8
    assert out["tied"] == [{"paths": ["['head.weight']", "['layers.0.weight']"], "params": 12}]


def test_read_facts(pt: str) -> None:
    r = tio.read(pt)
    facts = r.facts["torch"]
    assert r.format == "torch" and facts["format"] == "zip"
    assert facts["weights_only"]["accepted"] is True
    # head.weight is the same tensor (a tie); t is another view of its storage (not a tie)
    assert facts["tied"] == {"['head.weight']": "same tensor as ['layers.0.weight']"}
    assert facts["views"] == [
        {"storage": "0", "views": {"['layers.0.weight']": [0, 48], "['t']": [0, 48]}}
    ]
    assert facts["records"]["version"] == "3"


def test_detect_by_content(tmp_path: os.PathLike) -> None:
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf)
    (tmp_path / "weights.bin").write_bytes(buf.getvalue())
    torch.save({"w": torch.ones(2)}, tmp_path / "legacy.bin", _use_new_zipfile_serialization=False)
    np.savez(tmp_path / "plain.npz", w=np.ones(2))
    assert tio.detect(tmp_path / "weights.bin") == "torch"
    assert tio.detect(tmp_path / "legacy.bin") == "torch"
    assert tio.detect(tmp_path / "plain.npz") == "npz"
    assert list(tt.load(tmp_path / "weights.bin")) == ["w"]


def test_trust_does_not_apply(pt: str) -> None:
    with pytest.raises(LoadError, match="trust=True does not apply to torch files"):
        tt.load(pt, trust=True)


def test_tui_details_rows(pt: str) -> None:
    from treetool.tui.widgets.details import _file_rows, _tied_row

    from treetool._cli._files import file_facts

    r = tio.read(pt)
    facts = file_facts(r)
    rows = _file_rows(facts)
    assert rows[0] == ("torch", "torch checkpoint (zip format)")
    assert ("", "weights_only: torch.load(weights_only=True) would accept this file") in rows
    assert _tied_row(facts, "['head.weight']") == ("tied", "same tensor as ['layers.0.weight']")
    assert _tied_row(facts, "['t']") is None  # a view of its storage, not a tie
    assert _tied_row(facts, "['layers.0.weight']") is None
    i = rows.index(("", "views of one storage '0': 2 tensors (not tied; bytes counted once)"))
    assert rows[i + 1 : i + 3] == [("", "  ['layers.0.weight']: bytes 0-48"), ("", "  ['t']: bytes 0-48")]


def test_odd_tensors_are_opaque_with_their_facts(tmp_path: os.PathLike) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates quantized and nested tensors
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
        quantized = torch.quantize_per_tensor(torch.arange(4.0), 0.5, 0, torch.qint8)
        half_complex = torch.zeros(2, dtype=torch.complex32)
    p = str(tmp_path / "odd.pt")
    torch.save({
        "q": quantized,
        "sp": torch.eye(3).to_sparse(),
        "meta": torch.empty(3, 4, device="meta"),
        "nt": nested,
        "c32": half_complex,
    }, p)  # fmt: skip
    r = tio.read(p)
    t = r.tree
    assert {k: v.class_path for k, v in t.items()} == {
        "q": "torch.Tensor[quantized]", "sp": "torch.Tensor[sparse]", "meta": "torch.Tensor[meta]",
        "nt": "torch.Tensor[nested]", "c32": "torch.Tensor[complex32]",
    }  # fmt: skip
    assert t["q"].qscheme == "torch.per_tensor_affine" and t["q"].params == (0.5, 0)
    assert t["meta"].shape == (3, 4) and t["meta"].dtype == "torch.float32"
    assert t["sp"].layout == "torch.sparse_coo"
    assert np.asarray(t["sp"].parts[1]).tolist() == [1.0, 1.0, 1.0]
    assert r.facts["torch"]["weights_only"]["accepted"] is True
