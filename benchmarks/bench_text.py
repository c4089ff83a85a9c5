"""What the one sanitiser (`treetool._text.safe`) costs where it runs per name.

Each row times the same work twice in one run: the anchor with `safe` swapped for the
identity (what the code cost before it had a sanitiser), and ours, then prints the ratio
(target <= 1.10 on plain names):

- `ls` lines: writing `PATH\\tSHAPE\\tDTYPE` for every leaf of a 1e6-path listing;
- labels: `_lowering._labels.label` of every child of a 1e5-leaf dict (the TUI and the rich tree
  label each row they show through it);
- render: `TreeView` of a 1e5-leaf transformer-shaped tree at depth 3, as `inspect --no-tui`;
- hostile names: `safe` on names that all hold escapes (the slow path), per name.

    python benchmarks/bench_text.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import io
import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager

import _rows
import numpy as np
from rich.console import Console

import treetool._lowering._labels as labels_mod
import treetool._lowering._rows as render_text_mod
import treetool._text as text_mod
from treetool._text import all_printable, safe
from treetool._tree._model import view
from treetool._tree._rich import TreeView


def _identity(s: str, *, newlines: bool = False) -> str:
    return s


@contextmanager
def _no_sanitiser():
    """The anchor: every module that calls `safe` gets the identity instead."""
    mods = [text_mod, labels_mod, render_text_mod]
    saved = [m.safe for m in mods]
    for m in mods:
        m.safe = _identity  # type: ignore[assignment]
    try:
        yield
    finally:
        for m, s in zip(mods, saved, strict=True):
            m.safe = s  # type: ignore[assignment]


def _timed(fn: Callable[[], object], patched: bool) -> float:
    gc.collect()
    if patched:
        with _no_sanitiser():
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _pair(
    anchor: Callable[[], object], ours: Callable[[], object], repeat: int, patch: bool = False
) -> tuple[float, float]:
    """Best-of-`repeat` of both, interleaved (the machine's load hits both alike), after one
    warm-up each. `patch`: the anchor is `ours` run with `safe` swapped for the identity."""
    _timed(anchor, patch)
    _timed(ours, False)
    a, o = [], []
    for _ in range(repeat):
        a.append(_timed(anchor, patch))
        o.append(_timed(ours, False))
    return min(a), min(o)


def _row(name: str, anchor: float, ours: float) -> None:
    print(f"{name:<44} {anchor * 1e3:>10.1f} {ours * 1e3:>10.1f} {ours / anchor:>7.2f}")
    plain = not name.startswith("hostile")
    _rows.row(
        f"sanitiser cost: {name}",
        "the same with safe() = identity",
        anchor,
        ours,
        ("ratio<=", 1.10) if plain else None,
    )


#: paths per chunk of `treetool ls` (`_tree._walk` hands them over in lists of 4096)
_LS_CHUNK = 4096


def _ls_lines(paths: list[str], sanitise: Callable[[str], str]) -> None:
    """The loop of `treetool ls` (`_cli._commands._LsRows.text`) on paths and a dtype: one
    `all_printable` check of each chunk of paths (as `leaf_text_chunks` gives them), then
    each path checked only in a chunk that has an unprintable one."""
    out = io.StringIO()
    write = out.write
    dtypes: dict[str, str] = {}
    for k in range(0, len(paths), _LS_CHUNK):
        chunk = paths[k : k + _LS_CHUNK]
        printable = all_printable(chunk)
        for p in chunk:
            path = str(p)
            if not printable and not path.isprintable():
                path = sanitise(path)
            dtype = dtypes.get("float32")
            if dtype is None:
                dtype = dtypes["float32"] = sanitise("float32")
            write(f"{path}\t{[768, 3072]}\t{dtype}\n")


def _ls_anchor(paths: list[str]) -> None:
    """The same loop before the sanitiser."""
    out = io.StringIO()
    write = out.write
    for p in paths:
        write(f"{p}\t{[768, 3072]}\t{'float32'}\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller trees, fewer repeats")
    _rows.add_argument(ap)
    args = ap.parse_args()
    n_paths = 100_000 if args.quick else 1_000_000
    n_wide = 10_000 if args.quick else 100_000
    repeat = 3 if args.quick else 5

    print(f"{'case':<44} {'anchor ms':>10} {'ours ms':>10} {'ratio':>7}")
    paths = [f"['params']['layer_{i}']['attn']['q_proj']['kernel']" for i in range(n_paths)]
    anchor, ours = _pair(lambda: _ls_anchor(paths), lambda: _ls_lines(paths, safe), repeat)
    _row(f"ls lines, {n_paths:,} paths", anchor, ours)

    wide = view({f"w{i}": np.zeros((), np.float32) for i in range(n_wide)})
    kids = wide.children

    def labels() -> None:
        for c in kids:
            labels_mod.label(c)

    anchor, ours = _pair(labels, labels, repeat, patch=True)
    _row(f"label() of {n_wide:,} children", anchor, ours)

    x = np.zeros((), np.float32)
    layers = n_wide // 16
    tree = {
        "params": {
            f"layer_{i}": {
                "attn": {f"{m}_proj": {"kernel": x, "bias": x} for m in "qkvo"},
                "mlp": {"fc1": {"kernel": x, "bias": x}, "fc2": {"kernel": x, "bias": x}},
                "ln": {"scale": x, "bias": x},
            }
            for i in range(layers)
        }
    }

    def render() -> None:
        c = Console(file=io.StringIO(), width=120, color_system=None)
        c.print(TreeView(view(tree), depth=3, width=20))

    anchor, ours = _pair(render, render, repeat, patch=True)
    _row(f"TreeView depth 3, {layers * 16:,} leaves", anchor, ours)

    hostile = [f"k{i}\x1b[2J\u202e\n" for i in range(n_paths // 10)]
    anchor, ours = _pair(
        lambda: [_identity(h) for h in hostile], lambda: [safe(h) for h in hostile], repeat
    )
    per = ours / len(hostile) * 1e9
    _row(f"hostile names, {len(hostile):,} ({per:.0f} ns each)", anchor, ours)
    med = statistics.median([len(safe(h)) for h in hostile[:100]])
    print(f"(a hostile name of {len(hostile[0])} characters is shown in {med:.0f})")
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()
