"""The safe pickle reader over ranged reads: the opcodes that read fixed-width numbers."""

from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np

import treetool as tt


def test_floats_and_ints_of_a_remote_pickle(http: Any, files: dict) -> None:
    # BINFLOAT, BININT, LONG1 and numpy's arrays, read through the block-cached reader
    tree = {"lr": 1e-3, "betas": (0.9, 0.999), "step": 70_000, "big": 2**70, "w": np.ones(3)}
    with open(os.path.join(files["root"], "floats.pkl"), "wb") as fh:
        pickle.dump(tree, fh, protocol=4)
    got = tt.load(f"{http.url}/floats.pkl")
    assert got["lr"] == 1e-3 and got["betas"] == (0.9, 0.999)
    assert got["step"] == 70_000 and got["big"] == 2**70
    assert np.asarray(got["w"]).tolist() == [1.0, 1.0, 1.0]
    assert http.log.requests  # it was read over HTTP
