"""The safe pickle reader in-process vs `pickle.load` on the same files, best of N.

Files: a dict of N small float32 arrays (numpy's pickle, protocol 4/5: the fast array path), a
nested dict/list tree of N python scalars and strings (the opcode loop), and a list of N tuples
(tuple opcodes and dict keys that are tuples). Prints the time of each reader, the ratio
treetool/pickle.load, and the reader's memory per leaf (tracemalloc peak / leaves).

    python benchmarks/bench_pickle_reader.py [--n 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import tempfile
import time
import tracemalloc

import numpy as np

from treetool.io.pickle import read_pickle


def _files(tmp: str, n: int) -> dict[str, tuple[str, int]]:
    arrays = {f"layer{i}": np.full((4,), i, np.float32) for i in range(n)}
    scalars = {f"k{i}": [i, float(i), f"s{i}", None, True] for i in range(n // 5)}
    tuples = {(i, f"t{i}"): (i, i + 1) for i in range(n // 2)}
    out = {}
    for name, obj, leaves in (
        ("arrays", arrays, n),
        ("scalars", scalars, n),
        ("tuple-keys", tuples, n),
    ):
        p = os.path.join(tmp, name + ".pkl")
        with open(p, "wb") as fh:
            pickle.dump(obj, fh, protocol=4)
        out[name] = (p, leaves)
    return out


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        gc.enable()
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = _files(tmp, args.n)
        print(
            f"{'file':<12} {'MB':>7} {'pickle.load':>12} {'treetool':>10} {'ratio':>6} {'B/leaf':>7}"
        )
        for name, (p, leaves) in files.items():

            def plain(p: str = p) -> None:
                with open(p, "rb") as fh:
                    pickle.load(fh)

            t_plain = _best(plain, args.repeat)
            t_tt = _best(lambda p=p: read_pickle(p), args.repeat)
            tracemalloc.start()
            r = read_pickle(p)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            del r
            mb = os.path.getsize(p) / 2**20
            print(
                f"{name:<12} {mb:7.1f} {t_plain:11.3f}s {t_tt:9.3f}s {t_tt / t_plain:6.2f}"
                f" {peak / leaves:7.0f}"
            )


if __name__ == "__main__":
    main()
