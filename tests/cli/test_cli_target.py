"""What a command read travels as a `Target`: no side table keyed by `id(tree)`."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from safetensors.numpy import save_file

import treetool._cli._files as files
import treetool._cli._targets as targets
from treetool._cli._target import CliError, Target


class Thing:
    """Pickled by reference: a class the safe reader does not run."""

    def __init__(self) -> None:
        self.w = np.ones(2, np.float32)


def test_a_file_s_facts_travel_with_its_tree(tmp_path, capsys):
    path = tmp_path / "w.safetensors"
    save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, str(path), {"step": "7"})
    got = targets.load_target(str(path))
    assert isinstance(got, Target)
    assert (got.format, got.facts, got.note, got.reported) == (
        "safetensors",
        {"metadata": {"step": "7"}},
        None,
        True,
    )
    assert got.tree["w"].shape == (2, 3) and str(got.tree["w"].dtype) == "float32"
    assert capsys.readouterr().err == ""
    # the same tree read again is a new Target with its own facts: nothing is remembered
    again = targets.load_target(str(path))
    assert again is not got and again.facts == got.facts
    assert not hasattr(files, "LOADED") and not hasattr(files, "remember")
    assert not hasattr(targets, "_TUI_NOTES") and not hasattr(targets, "_NOTED")


def test_a_pickle_s_unexecuted_classes_are_its_note(tmp_path, capsys):
    path = tmp_path / "m.pkl"
    path.write_bytes(pickle.dumps({"thing": Thing(), "b": np.zeros(3, np.float32)}))
    got = targets.load_target(str(path))
    assert got.format == "pickle" and got.facts == {}
    assert got.note == "1 class not executed: pass --trust to run them"
    assert got.reported  # the read said so on stderr already: the command does not repeat it
    err = capsys.readouterr().err
    assert err.count("not executed (shown as opaque placeholders)") == 1
    assert "Thing" in err and "pass --trust to run the file's code" in err


def test_a_live_object_is_a_python_target_not_yet_reported():
    got = targets.load_target("cli_targets:small")
    assert (got.format, got.facts, got.note, got.reported) == ("python", {}, None, False)
    assert sorted(got.tree["params"]["dense"]) == ["bias", "kernel"]
    with pytest.raises(CliError, match="no such file or directory"):
        targets.load_target("no/such/file.npz")
