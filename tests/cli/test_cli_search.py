"""`treetool ls FILE --search QUERY`: the TUI's `/` search from the command line, through the
same leaf index (`treetool._tree._leaf_index`), run as a real subprocess on files written by
the real libraries."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from cli_runner import treetool

import treetool.io as io
from treetool._tree._leaf_index import LeafIndex
from treetool._tree._search import search

pytestmark = pytest.mark.slow


@pytest.fixture
def ckpt(tmp_path):
    tree = {
        "encoder": {f"block{i}": {"w": np.zeros((2, 3), np.float32)} for i in range(12)},
        "decoder": {"Bias": np.ones(4, np.int32), "w": np.zeros(2, np.float16)},
        "hostile\x1b[31mname": {"w": np.zeros(1, np.float32)},
        "step": np.int64(3),
    }
    path = tmp_path / "ckpt.pkl"
    path.write_bytes(pickle.dumps(tree, protocol=4))
    return path


def _paths(stdout: str) -> list[str]:
    return [line.split("\t")[0] for line in stdout.splitlines()]


@pytest.mark.parametrize(
    "query",
    ["block1", "encoder.block1.w", "ENCODER", "bias", "Bias", "block1[*].w", "*.w", "**.w", "red"],
)
def test_ls_search_lists_exactly_what_the_tui_search_finds(ckpt, query):
    out = treetool("ls", ckpt, "--search", query)
    tree = io.read(str(ckpt)).tree
    index = LeafIndex.build(tree)
    _, rows = search(query, index, tree)
    expected = [index.paths[r] for r in rows.tolist()] if rows is not None else []
    if not expected:
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr == f"treetool: error: {ckpt}: no leaf matches --search {query!r}\n"
        return
    assert out.returncode == 0, out.stderr
    assert _paths(out.stdout) == expected


def test_ls_search_lines_text_and_json(ckpt):
    out = treetool("ls", ckpt, "-s", "block1")  # smart case: text without capitals folds
    assert out.returncode == 0, out.stderr
    assert out.stdout == "".join(
        f"['encoder']['block{i}']['w']\t[2, 3]\tfloat32\n" for i in (1, 10, 11)
    )
    out = treetool("ls", ckpt, "-s", "decoder.bias")  # dotted form, folded: finds ['Bias']
    assert out.stdout == "['decoder']['Bias']\t[4]\tint32\n"
    out = treetool("ls", ckpt, "-s", "decoder.Bias", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["leaves"] == [
        {
            "path": "['decoder']['Bias']",
            "shape": [4],
            "dtype": "int32",
            "nbytes": 16,
            "device": "host",
            "type": "ndarray",
        }
    ]
    # the totals are still the whole file's
    assert got["totals"] == {
        "leaves": 16,
        "params": 12 * 6 + 4 + 2 + 1 + 1,
        "bytes": 12 * 24 + 16 + 4 + 4 + 8,
    }


def test_ls_search_prints_a_hostile_path_escaped(ckpt):
    out = treetool("ls", ckpt, "--search", "hostile")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout
    assert out.stdout == "['hostile\\x1b[31mname']['w']\t[1]\tfloat32\n"


def test_ls_search_on_a_safetensors_file(tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    weights = {
        f"encoder.layer.{i}.attention.weight": np.zeros((2, 2), np.float32) for i in range(3)
    }
    save_file({**weights, "encoder.layer.1.mlp.bias": np.zeros(2, np.float16)}, str(path))
    out = treetool("ls", path, "-s", "layer.1.")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        "['encoder.layer.1.attention.weight']\t[2, 2]\tfloat32\n"
        "['encoder.layer.1.mlp.bias']\t[2]\tfloat16\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["w", "--search", "w"], "treetool: error: ls: give GLOB or --search QUERY, not both\n"),
        (["--search", "  "], "treetool: error: ls: --search needs a QUERY (text or a glob)\n"),
    ],
)
def test_ls_search_misuse_is_one_line(ckpt, args, message):
    out = treetool("ls", ckpt, *args)
    assert (out.returncode, out.stdout, out.stderr) == (2, "", message)
