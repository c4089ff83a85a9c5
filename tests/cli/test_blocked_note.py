"""The CLI's "not executed" note (issue 38): every global the file references, grouped by
package as the torch reader's report is, and what the tree really shows in their place."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
import torch

import treetool.io as tio
from treetool._cli._targets import report_loaded

n = torch.nn
HEAD = "treetool: note: seq.pt: 12 globals not executed (treetool reads torch files without torch "


@pytest.fixture(scope="module")
def seq(tmp_path_factory: pytest.TempPathFactory) -> str:
    p = str(tmp_path_factory.mktemp("blocked") / "seq.pt")
    m = n.Sequential(
        n.Linear(2, 2), n.ReLU(), n.Tanh(), n.GELU(), n.Sigmoid(), n.Softplus(), n.ELU(),
        n.SiLU(), n.Dropout(), n.LayerNorm(2), n.Identity(),
    )  # fmt: skip
    torch.save(m, p)  # a whole module: 12 torch.nn classes, more than the old 8
    return p


WANT = [
    "and never runs their code); the whole nn.Module torch.nn.modules.container.Sequential is "
    "shown by its state_dict() names (the modules inside included), any other object as an "
    "opaque placeholder of its saved attributes:",
    "  torch: 12 globals, a torch.nn class: the file holds a pickled nn.Module (save its "
    "state_dict):",
    "    nn.modules.activation.ELU, nn.modules.activation.GELU, nn.modules.activation.ReLU,",
    "    nn.modules.activation.SiLU, nn.modules.activation.Sigmoid, nn.modules.activation.Softplus,",
    "    nn.modules.activation.Tanh, nn.modules.container.Sequential, nn.modules.dropout.Dropout,",
    "    nn.modules.linear.Identity, nn.modules.linear.Linear, nn.modules.normalization.LayerNorm",
]


def test_every_global_named_grouped(seq: str, capsys: pytest.CaptureFixture) -> None:
    loaded = tio.read(seq)
    assert len(loaded.blocked) == 12
    report_loaded("seq.pt", loaded)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == HEAD + WANT[0]
    assert err[1:] == WANT[1:]
    named = " ".join(err[2:])
    assert all(g.removeprefix("torch.") in named for g in loaded.blocked)


def test_raw_read_says_placeholders(seq: str, capsys: pytest.CaptureFixture) -> None:
    report_loaded("seq.pt", tio.read(seq, raw=True))
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        HEAD + "and never runs their code); each object is shown as an opaque placeholder of "
        "its saved attributes:"
    )
    assert err[1:] == WANT[1:]


class A:
    pass


class B:
    pass


class C:
    pass


class D:
    pass


def test_pickle_few_one_line_many_grouped(
    tmp_path: os.PathLike, capsys: pytest.CaptureFixture
) -> None:
    few, many = str(tmp_path / "few.pkl"), str(tmp_path / "many.pkl")
    with open(few, "wb") as fh:
        pickle.dump({"a": A()}, fh)
    with open(many, "wb") as fh:
        pickle.dump({"a": A(), "b": B(), "c": C(), "d": D()}, fh)
    report_loaded("few.pkl", tio.read(few))
    assert capsys.readouterr().err.splitlines() == [
        f"treetool: note: few.pkl: not executed (shown as opaque placeholders): {__name__}.A; "
        "pass --trust to run the file's code"
    ]
    report_loaded("many.pkl", tio.read(many))
    top, _, rest = __name__.partition(".")
    sub = f"{rest}." if rest else ""
    assert capsys.readouterr().err.splitlines() == [
        "treetool: note: many.pkl: 4 globals not executed (shown as opaque placeholders); pass "
        "--trust to run the file's code:",
        f"  {top}: 4 globals, not executed:",
        f"    {sub}A, {sub}B, {sub}C, {sub}D",
    ]


@pytest.mark.slow
def test_cli_note(seq: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "treetool.cli", "ls", "seq.pt"],
        capture_output=True, text=True, timeout=120, cwd=os.path.dirname(seq), check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [HEAD + WANT[0], *WANT[1:]]
    assert r.stdout.splitlines()[0].split("\t") == ["['0.weight']", "[2, 2]", "float32"]
