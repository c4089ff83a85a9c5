"""The totals of a tree as each consumer computes them, on the same trees, in one process.

The totals (leaves, params, bytes, dtypes, devices, tied arrays once, errors), as
each consumer computes them: `Node.aggregates`, `summary`, `ls --json`, the HTML header and
the TUI's leaf index. Best of 5 per case (CPU seconds of this process, steadier than wall time on a shared machine), in one process, on the same trees.

    python benchmarks/bench_totals.py [--quick]     # 1e4 (and 1e5 without --quick) leaves

Each figure is seconds per call; the ratio column is each consumer against `Node.aggregates`
on the same tree (what a consumer adds to the one pass: its per-leaf records).
"""

from __future__ import annotations

import argparse
import os
import pickle
import tempfile
import time
from collections.abc import Callable
from typing import Any

import _rows
import numpy as np


def build(leaves: int) -> dict:
    """`leaves // 10` layers of ten distinct f32 arrays (the HTML benchmark's tree)."""
    return {
        f"layer{i:06d}": {f"w{k}": np.full(k + 1, i, np.float32) for k in range(10)}
        for i in range(leaves // 10)
    }


def best(fn: Callable[[], Any], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def html_header(tree: Any) -> Any:
    """The HTML header's totals: the one pass with the header's leaf limit (older checkouts:
    `html_tree.totals`)."""
    try:
        from treetool._tree import _html as html_tree
    except ImportError:  # older checkouts
        from treetool.render import html_tree  # type: ignore[no-redef]

    old = getattr(html_tree, "totals", None)
    if old is not None and old.__module__ == html_tree.__name__:
        return old(tree)
    from treetool._tree._totals import totals

    return totals(tree, None, html_tree.TOTALS_LEAVES)


def cases(tree: Any) -> dict[str, Callable[[], Any]]:
    import treetool as tt
    from treetool._cli._json import _json_listing
    from treetool._summary._summary import summary
    from treetool._tree._leaf_index import LeafIndex

    out: dict[str, Callable[[], Any]] = {
        "Node.aggregates": lambda: tt.view(tree).aggregates,
        "summary": lambda: summary(tree, depth=1),
        "ls --json": lambda: _json_listing(tree, "pickle", None),
        "HTML header": lambda: html_header(tree),
        "TUI index": lambda: LeafIndex.build(tree),
    }
    try:
        from treetool._tree._totals import totals
    except ImportError:
        return out
    return {"totals (one pass)": lambda: totals(tree), **out}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="1e4 leaves only")
    _rows.add_argument(ap)
    args = ap.parse_args()
    import treetool.io as io

    sizes = [10_000] if args.quick else [10_000, 100_000]
    print(f"{'tree':<22}{'leaves':>8}  {'consumer':<20}{'seconds':>10}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            tree = build(n)
            path = os.path.join(tmp, f"t{n}.pkl")
            with open(path, "wb") as f:
                pickle.dump(tree, f)
            lazy = io.read(path).tree
            for name, t in (("numpy in memory", tree), ("lazy (pickle file)", lazy)):
                anchor = None
                for consumer, fn in cases(t).items():
                    s = best(fn)
                    if consumer == "Node.aggregates":
                        anchor = s
                    ratio = f"{s / anchor:.2f}" if anchor else "-"
                    print(f"{name:<22}{n:>8}  {consumer:<20}{s:>10.4f}{ratio:>8}")
                    if consumer != "Node.aggregates":
                        _rows.row(
                            f"totals: {consumer}, {name}, {n:,} leaves",
                            "Node.aggregates (CPU s)",
                            anchor,
                            s,
                        )
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()
