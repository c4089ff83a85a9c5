"""Reading a pickle of equinox objects vs a safetensors file: time, and whether jax is imported.

Issue 16 measured 2.2 s for `treetool ls model.pkl` (a pickle holding equinox modules, which
imported jax) against 0.5 s for the same arrays in safetensors. This script writes both files
(an equinox Sequential of two Linear layers; deleted at the end), runs each command as a fresh process (best of 5
wall times), reports whether jax/equinox were imported, and prints the ratio pickle/safetensors
(the anchor: safetensors, which imports neither). A pickle of equinox objects imports equinox
(and so jax) on purpose: treetool imports the classes of well-known libraries, never calling
them, to give the placeholders the key paths of the live objects.

    python benchmarks/bench_read_imports.py
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time

import _rows

_PROBE = """
import sys
from treetool.cli import main
main(["ls", sys.argv[1]])
print("IMPORTED", "jax" in sys.modules, "equinox" in sys.modules, file=sys.stderr)
"""


def _time(path: str) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "treetool.cli", "ls", path],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        best = min(best, time.perf_counter() - t0)
    return best


def _imports(path: str) -> str:
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, path],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("IMPORTED")][-1]
    _, jax, eqx = line.split()
    return f"jax imported: {jax}, equinox imported: {eqx}"


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _rows.add_argument(ap)
    args = ap.parse_args()
    import equinox as eqx
    import jax
    import numpy as np
    from safetensors.numpy import save_file

    d = tempfile.mkdtemp()
    try:
        k1, k2 = jax.random.split(jax.random.key(0))
        model = eqx.nn.Sequential([eqx.nn.Linear(784, 128, key=k1), eqx.nn.Linear(128, 10, key=k2)])
        pkl = os.path.join(d, "model.pkl")
        with open(pkl, "wb") as fh:
            pickle.dump({"model": model, "step": 1000}, fh)
        st = os.path.join(d, "model.safetensors")
        arrays = {
            f"layers.{i}.{name}": np.asarray(getattr(layer, name))
            for i, layer in enumerate(model.layers)
            for name in ("weight", "bias")
        }
        save_file(arrays, st)
        t_pkl, t_st = _time(pkl), _time(st)
        print(f"treetool ls model.pkl (equinox objects): {t_pkl:.3f} s  ({_imports(pkl)})")
        print(f"treetool ls model.safetensors (anchor):  {t_st:.3f} s  ({_imports(st)})")
        print(f"ratio pickle / safetensors: {t_pkl / t_st:.2f}x")
        _rows.row(
            "treetool ls of a pickle of equinox objects",
            "treetool ls of the same arrays in safetensors",
            t_st,
            t_pkl,
            note=f"pickle: {_imports(pkl)}; safetensors: {_imports(st)}",
        )
        _rows.dump(args.rows_json)
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
