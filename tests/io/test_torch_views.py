"""Views of one torch storage (a slice and its base, `view`, `.T`, columns, ties), written by
real torch in both formats: not tied (only the same tensor is) but counted once, as the union of the elements they
cover, by every totals pass (`tt.summary`, `totals`, the `--json` listing's `Tally`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import treetool as tt
import treetool.io as tio
from treetool._cli._json import _json_listing
from treetool._tree._totals import totals

T = torch.arange(24, dtype=torch.float32).reshape(4, 6)  # 24 floats, 96 bytes


def _cases() -> dict[str, tuple[Callable[[], dict[str, Any]], int, int, int, dict, list]]:
    """name -> (the dict torch saves, params, bytes, tied, the `tied` facts, the byte ranges
    of the `views` facts: different tensors over one storage are views, not ties)."""
    t = T.clone()
    b = torch.arange(10, dtype=torch.bfloat16)
    return {
        # a slice and its base: the slice lies inside the base
        "slice": (
            lambda: {"a": t, "b": t[2:]}, 24, 96, 0, {}, [{"['a']": [0, 96], "['b']": [48, 96]}]
        ),
        # view and transpose of the same 24 elements, and the same tensor twice (a tie)
        "view_T": (
            lambda: {"a": t, "v": t.view(6, 4), "T": t.T, "tie": t},
            24,
            96,
            1,
            {"['tie']": "same tensor as ['a']"},
            [{"['a']": [0, 96], "['v']": [0, 96], "['T']": [0, 96]}],
        ),
        # two columns: 8 distinct elements, not their windows (14)
        "columns": (
            lambda: {"c0": t[:, 0], "c1": t[:, 1]},
            8,
            32,
            0,
            {},
            [{"['c0']": [0, 76], "['c1']": [4, 80]}],
        ),
        # disjoint rows: the union is 12 elements, not the storage's 24
        "rows": (
            lambda: {"x": t[:1], "y": t[3:]},
            12,
            48,
            0,
            {},
            [{"['x']": [0, 24], "['y']": [72, 96]}],
        ),
        # overlapping slices [0, 6) and [4, 10) of a bfloat16 storage: 10 elements
        "overlap": (
            lambda: {"p": b[:6], "q": b[4:]},
            10,
            20,
            0,
            {},
            [{"['p']": [0, 12], "['q']": [8, 20]}],
        ),
        # a lone slice counts its own elements, whatever its storage holds
        "lone": (lambda: {"s": t[1:3], "other": torch.ones(3)}, 12 + 3, 48 + 12, 0, {}, []),
    }


CASES = _cases()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    root = tmp_path_factory.mktemp("torch_views")
    out = {}
    for name, (make, *_) in CASES.items():
        for fmt in ("zip", "legacy"):
            p = str(root / f"{name}_{fmt}.pt")
            torch.save(make(), p, _use_new_zipfile_serialization=fmt == "zip")
            out[name, fmt] = p
    return out


@pytest.mark.parametrize("fmt", ["zip", "legacy"])
@pytest.mark.parametrize("name", list(CASES))
def test_views_of_one_storage_count_once(
    files: dict[tuple[str, str], str], name: str, fmt: str
) -> None:
    _, params, nbytes, tied, facts, views = CASES[name]
    path = files[name, fmt]
    r = tio.read(path)
    assert r.facts["torch"].get("tied", {}) == facts
    got = r.facts["torch"].get("views", [])
    assert [g["views"] for g in got] == views
    assert all(type(g["storage"]) is str for g in got)
    tree = r.tree
    agg = totals(tree)
    assert (agg.params, agg.nbytes, agg.tied, agg.leaves) == (params, nbytes, tied, len(tree))
    assert sum(agg.dtype_bytes.values()) == nbytes and agg.device_bytes == {"file": nbytes}
    s = tt.summary(tree).to_dict()
    assert (s["totals"]["params"], s["totals"]["bytes"]) == (params, nbytes)
    listing = _json_listing(tree, "torch", None)  # the `--json` totals: Tally.add_sized
    assert listing["totals"] == {"leaves": len(tree), "params": params, "bytes": nbytes}
    assert tt.view(tree).aggregates.params == params  # the node model (inspect's header, TUI)
    # the values are still each view's own, as torch loads them
    want = torch.load(path, weights_only=True)
    got = tt.materialize(tree)
    assert sorted(got) == sorted(want)
    for k, v in got.items():
        assert v.shape == tuple(want[k].shape)
        np.testing.assert_array_equal(v.astype(np.float32), want[k].float().numpy())


def test_summary_lists_only_the_same_tensor_as_tied(files: dict[tuple[str, str], str]) -> None:
    s = tt.summary(tt.load(files["view_T", "zip"])).to_dict()
    assert s["tied"] == [{"paths": ["['a']", "['tie']"], "params": 24}]  # v, T: views


def test_two_files_with_the_same_keys_are_not_merged(files: dict[tuple[str, str], str]) -> None:
    # storage "0" of one file is not storage "0" of another
    tree = {"one": tt.load(files["slice", "zip"]), "two": tt.load(files["slice", "legacy"])}
    agg = totals(tree)
    assert (agg.params, agg.nbytes, agg.tied, agg.arrays) == (48, 192, 0, 2)


def test_hf_style_tie_and_module_state_dict(tmp_path: os.PathLike) -> None:
    emb = torch.nn.Embedding(5, 3)
    head = torch.nn.Linear(3, 5, bias=False)
    head.weight = emb.weight
    net = torch.nn.ModuleDict({"embed": emb, "lm_head": head, "norm": torch.nn.LayerNorm(3)})
    p = str(tmp_path / "tied.bin")
    torch.save(net.state_dict(), p)
    r = tio.read(p)
    assert r.facts["torch"]["tied"] == {"['lm_head.weight']": "same tensor as ['embed.weight']"}
    agg = totals(r.tree)
    assert (agg.params, agg.nbytes, agg.tied) == (15 + 3 + 3, 4 * 21, 1)


def _elements(v: torch.Tensor) -> set[int]:
    """The storage elements a torch view covers, from its own offset and strides."""
    idx = torch.arange(v.untyped_storage().nbytes() // v.element_size())
    return set(idx.as_strided(v.shape, v.stride(), v.storage_offset()).reshape(-1).tolist())


_VIEWS: list[Callable[[torch.Tensor], torch.Tensor]] = [
    lambda t: t,
    lambda t: t[5:17],
    lambda t: t[::3],
    lambda t: t.view(4, 6).T,
    lambda t: t.view(4, 6)[:, 2],
    lambda t: t.view(4, 6)[1:3, 1:5],
    lambda t: t.view(2, 3, 4).permute(2, 0, 1),
    lambda t: t.view(2, 3, 4)[:, ::2, 1:3],
    lambda t: t[20:],
    lambda t: t[:0],
]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(range(len(_VIEWS))), min_size=2, max_size=4, unique=True))
def test_totals_are_the_union_of_the_elements(picks: list[int]) -> None:
    import tempfile

    t = torch.arange(24, dtype=torch.float32)
    views = {f"v{i}": _VIEWS[i](t) for i in picks}
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "views.pt")
        torch.save(views, p)
        agg = totals(tt.load(p))
    shown = [v for v in views.values() if v.numel()]
    union = set().union(*map(_elements, shown)) if len(shown) > 1 else None
    want = len(union) if union is not None else sum(v.numel() for v in shown)
    assert (agg.params, agg.nbytes) == (want, 4 * want)


def test_a_view_with_many_runs_counts_its_window(tmp_path: os.PathLike) -> None:
    t = torch.zeros(5000, 4)  # a column has 5000 runs: past 4096, its window counts
    p = str(tmp_path / "tall.pt")
    torch.save({"c0": t[:, 0], "c1": t[:, 1]}, p)
    agg = totals(tt.load(p))
    assert agg.params == 4 * 4999 + 2  # the two windows, gaps included (documented)
    torch.save({"t": t, "c1": t[:, 1]}, p)
    agg = totals(tt.load(p))
    assert (agg.params, agg.nbytes) == (20000, 80000)  # the matrix covers the column's window


def test_many_strided_views_are_bounded(tmp_path: os.PathLike) -> None:
    """100 different column views of one storage, ~4000 runs each: past the tree's budget of
    runs, views count by their windows (a hostile file's views cost a bounded walk)."""
    from treetool._tree._shared_views import _TREE_RUNS, _spans

    t = torch.zeros(4000, 2)
    p = str(tmp_path / "columns.pt")
    torch.save({f"c{i}": t[i:, i % 2] for i in range(100)}, p)
    tree = tt.load(p)
    assert sum(4000 - i for i in range(100)) > _TREE_RUNS  # the budget runs out
    agg = totals(tree)
    # exact: column 0 from row 0 and column 1 from row 1 (7999); the windows of views past
    # the budget may add column 1's first element
    assert agg.params in (7999, 8000) and agg.tied == 0
    assert len(_spans(tree["c0"], [_TREE_RUNS])) == 4000  # within the budget: every run
    assert _spans(tree["c0"], [0]) == [(0, 4 * 7999)]  # past it: the window
