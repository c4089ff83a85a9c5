"""Cross-format diffs compare content: dict-like containers by keys and values.

A torch state dict (`OrderedDict` with `_metadata`) and its safetensors conversion (a `dict`),
an `OrderedDict` and a `dict` in another order, a flax `FrozenDict` and a `dict`: equal when their
keys and values are; the container type is a change only under `strict_types=True`
(`treetool diff --strict-types`).
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

import treetool as tt
from treetool.cli import main

torch = pytest.importorskip("torch")


@pytest.fixture
def torch_pair(tmp_path):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    sd = m.state_dict()
    assert hasattr(sd, "_metadata")  # torch's own OrderedDict with _metadata
    pt = tmp_path / "model.pt"
    torch.save(sd, pt)
    st = tmp_path / "model.safetensors"
    safetensors_torch = pytest.importorskip("safetensors.torch")
    safetensors_torch.save_file(sd, str(st))
    return pt, st


def test_pt_and_its_safetensors_conversion_diff_clean(torch_pair):
    pt, st = torch_pair
    a, b = tt.load(pt), tt.load(st)
    assert type(a) is collections.OrderedDict and type(b) is dict
    d = tt.diff(a, b)
    assert not d, [c.summary for c in d]
    assert d.changes == []


def test_strict_types_reports_the_container_type(torch_pair):
    pt, st = torch_pair
    d = tt.diff(tt.load(pt), tt.load(st), strict_types=True)
    assert [(c.path, c.kind, c.before, c.after) for c in d] == [
        ("", "node_type", "OrderedDict[4]", "dict[4]")
    ]


def test_a_value_change_is_still_found_across_container_types(torch_pair, tmp_path):
    pt, _ = torch_pair
    sd = torch.load(pt, weights_only=True)
    sd["1.bias"] = sd["1.bias"] + 1
    st = tmp_path / "changed.safetensors"
    pytest.importorskip("safetensors.torch").save_file(dict(sd), str(st))
    d = tt.diff(tt.load(pt), tt.load(st))
    assert [(c.path, c.kind) for c in d] == [("['1.bias']", "value")]


def test_ordered_dict_in_another_order_against_dict():
    a = collections.OrderedDict([("b", np.ones(2)), ("a", np.zeros(3))])
    b = {"a": np.zeros(3), "b": np.ones(2)}
    assert not tt.diff(a, b)
    assert not tt.diff(b, a)
    d = tt.diff(a, {"a": np.zeros(3), "b": np.ones(2), "c": 1})
    assert [(c.path, c.kind) for c in d] == [("['c']", "added")]
    assert [c.kind for c in tt.diff(a, b, strict_types=True)] == ["node_type"]


def test_frozendict_against_dict():
    from flax.core import FrozenDict

    a = FrozenDict({"params": {"w": np.ones((2, 2), np.float32)}})
    b = {"params": {"w": np.ones((2, 2), np.float32)}}
    assert not tt.diff(a, b)
    assert not tt.diff({"m": a}, {"m": b})
    assert [(c.path, c.kind, c.before, c.after) for c in tt.diff(a, b, strict_types=True)] == [
        ("", "node_type", "FrozenDict", "dict[1]")
    ]
    changed = {"params": {"w": np.zeros((2, 2), np.float32)}}
    assert [(c.path, c.kind) for c in tt.diff(a, changed)] == [("['params']['w']", "value")]


def test_a_dict_against_a_list_is_still_a_node_type_change():
    d = tt.diff({"0": np.ones(2)}, [np.ones(2)])
    assert [c.kind for c in d] == ["node_type"]


def test_cli_strict_types(torch_pair, capsys):
    pt, st = torch_pair
    assert main(["diff", str(pt), str(st)]) == 0
    capsys.readouterr()
    assert main(["diff", "--strict-types", str(pt), str(st)]) == 1
    out = capsys.readouterr().out
    assert "node_type" in out and "OrderedDict[4]" in out
