"""The safe pickle reader in-process vs `pickle.load` on the same files, best of N.

Files: a dict of N small float32 arrays (numpy's pickle, protocol 4/5: the fast array path), a
nested dict/list tree of N python scalars and strings (the opcode loop), a list of N tuples
(tuple opcodes and dict keys that are tuples), the TUI benchmark's flat dict
`{f"k{i}": np.full(1, i, np.float32)}` ("flat-1elem"), and N/2 layers of two small float32
arrays, `{f"l{i}": {"b": (8,), "w": (8, 8)}}` ("nested": keys from the memo, another header at
every other array). Prints the time of each reader, the ratio treetool/pickle.load, the
reader's memory per leaf (tracemalloc peak / leaves) and the RSS the kept tree adds per leaf
(process RSS after the read, minus before). Times are CPU times (`time.process_time`): both
readers are single-threaded, and CPU time does not count the waits of a machine shared with
other work.

Targets: "nested" <= 1.5x pickle.load, the flat files of arrays ("arrays", "flat-1elem")
<= 1.1x.

    python benchmarks/bench_pickle_reader.py [--n 1000000] [--repeat 3] [--only flat-1elem]
    python benchmarks/bench_pickle_reader.py --quick    # --n 100000 (1e5 arrays)
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import resource
import tempfile
import time
import tracemalloc

import _rows
import numpy as np

from treetool.io.pickle import read_pickle


def _files(tmp: str, n: int, only: list[str]) -> dict[str, tuple[str, int]]:
    arrays = {f"layer{i}": np.full((4,), i, np.float32) for i in range(n)}
    scalars = {f"k{i}": [i, float(i), f"s{i}", None, True] for i in range(n // 5)}
    tuples = {(i, f"t{i}"): (i, i + 1) for i in range(n // 2)}
    flat = {f"k{i}": np.full(1, i, np.float32) for i in range(n)}  # bench_tui_terminal's file
    nested = {
        f"l{i}": {"b": np.full(8, i, np.float32), "w": np.full((8, 8), i, np.float32)}
        for i in range(n // 2)
    }
    out = {}
    for name, obj, leaves in (
        ("arrays", arrays, n),
        ("scalars", scalars, n),
        ("tuple-keys", tuples, n),
        ("flat-1elem", flat, n),
        ("nested", nested, n),
    ):
        if only and name not in only:
            continue
        p = os.path.join(tmp, name + ".pkl")
        with open(p, "wb") as fh:
            pickle.dump(obj, fh, protocol=4)
        out[name] = (p, leaves)
    return out


GOALS = {"nested": ("ratio<=", 1.5), "arrays": ("ratio<=", 1.1), "flat-1elem": ("ratio<=", 1.1)}


def _once(fn) -> float:
    """CPU seconds of one call, the garbage collector off (as `timeit` does)."""
    gc.collect()
    gc.disable()
    t0 = time.process_time()
    fn()
    spent = time.process_time() - t0
    gc.enable()
    return spent


def _best_pair(anchor, ours, repeat: int) -> tuple[float, float]:
    """Best-of-`repeat` CPU seconds of both, interleaved (anchor, ours, anchor, ...), so that
    a change in the machine's state during the run (another job, the CPU's clock, the
    allocator's) hits both alike rather than one."""
    a, o = [], []
    for _ in range(repeat):
        a.append(_once(anchor))
        o.append(_once(ours))
    return min(a), min(o)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", action="append", default=[], help="a file name (repeatable)")
    ap.add_argument("--quick", action="store_true", help="--n 100000")
    _rows.add_argument(ap)
    args = ap.parse_args()
    if args.quick:
        args.n = 100_000
    with tempfile.TemporaryDirectory() as tmp:
        files = _files(tmp, args.n, args.only)
        print(
            f"{'file':<12} {'MB':>7} {'pickle.load':>12} {'treetool':>10} {'ratio':>6}"
            f" {'B/leaf':>7} {'RSS/leaf':>8}"
        )
        for name, (p, leaves) in files.items():

            def plain(p: str = p) -> None:
                with open(p, "rb") as fh:
                    pickle.load(fh)

            t_plain, t_tt = _best_pair(plain, lambda p=p: read_pickle(p), args.repeat)
            gc.collect()
            rss0 = _rss()
            kept = read_pickle(p)
            rss = _rss() - rss0
            del kept
            gc.collect()
            tracemalloc.start()
            r = read_pickle(p)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            del r
            mb = os.path.getsize(p) / 2**20
            print(
                f"{name:<12} {mb:7.1f} {t_plain:11.3f}s {t_tt:9.3f}s {t_tt / t_plain:6.2f}"
                f" {peak / leaves:7.0f} {rss / leaves:8.0f}"
            )
            _rows.row(
                f"safe pickle read: {name}, {leaves:,} leaves, {mb:.0f} MB",
                "pickle.load (CPU s)",
                t_plain,
                t_tt,
                GOALS.get(name),
                note=f"reader peak {peak / leaves:.0f} B/leaf",
            )
    _rows.dump(args.rows_json)


def _rss() -> int:
    """The process's resident memory now, in bytes (Linux /proc; else the peak so far)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


if __name__ == "__main__":
    main()
