"""Benchmark of the terminal UI, headless (App.run_test): first paint, memory, cursor, expand.

Anchor: an eager `textual.widgets.Tree` with every node of the pytree added up front (what a
naive pytree browser does). Ours: `treetool.tui.TreetoolApp`, which adds rows lazily, one page
at a time, and indexes leaves in a worker thread.

Each measurement runs in a fresh subprocess, so peak memory (ru_maxrss) is its own.

    python benchmarks/bench_tui.py            # 1e3, 1e5, 1e6 leaves (eager anchor up to 1e5)
    python benchmarks/bench_tui.py --quick    # 1e3, 1e4 leaves
    python benchmarks/bench_tui.py --terminal [--quick] [--compare OLD_CHECKOUT]
        # the CLI in a real terminal (a pty): see bench_tui_terminal.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time

import _rows
import numpy as np

LEAVES_PER_BLOCK = 10


def make_tree(n: int) -> dict:
    """n leaves: `{"blocks": [{"w0".."w9": f32[4]}, ...], "wide": [f32[2] x 10,000]}`-like."""
    blocks = n // LEAVES_PER_BLOCK
    proto = np.zeros(4, np.float32)
    return {
        "blocks": [{f"w{j}": proto.copy() for j in range(LEAVES_PER_BLOCK)} for _ in range(blocks)],
        "bias": np.zeros(3, np.float32),
    }


async def _wait(flag: list, timeout: float = 120.0) -> None:
    end = time.perf_counter() + timeout
    while not flag:
        if time.perf_counter() > end:
            raise TimeoutError("the app never painted")
        await asyncio.sleep(0.001)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _ours(n: int) -> dict:
    from treetool.tui import TreetoolApp

    tree = make_tree(n)
    base = _rss_mb()
    painted: list[float] = []

    class Timed(TreetoolApp):
        def on_ready(self) -> None:  # Textual also calls TreetoolApp.on_ready
            painted.append(time.perf_counter())

    t0 = time.perf_counter()
    app = Timed(tree, title="bench")
    async with app.run_test(size=(120, 40)) as pilot:
        await _wait(painted)
        paint = painted[0] - t0
        paint_rss = _rss_mb() - base
        await app.workers.wait_for_complete()
        ready = time.perf_counter() - t0
        from treetool.tui.tabs import tabs_for

        t = time.perf_counter()
        tabs_for(tree)  # the registered tabs' applies(), run while the app is built
        tabs = time.perf_counter() - t
        # cursor move: median of 20 presses
        moves = []
        for _ in range(20):
            t = time.perf_counter()
            await pilot.press("down")
            moves.append(time.perf_counter() - t)
        return {
            "paint": paint,
            "paint_mb": paint_rss,
            "move": float(np.median(moves)),
            "ready": ready,
            "peak_mb": _rss_mb() - base,
            "tabs": tabs,
        }


async def _eager(n: int) -> dict:
    from textual.app import App, ComposeResult
    from textual.widgets import Tree

    from treetool._leaves._arrays import leaf_info

    tree = make_tree(n)
    base = _rss_mb()

    painted: list[float] = []

    class Eager(App):
        def on_ready(self) -> None:
            painted.append(time.perf_counter())

        def compose(self) -> ComposeResult:
            t: Tree = Tree("root")
            stack = [(t.root, tree)]
            while stack:
                parent, obj = stack.pop()
                items = obj.items() if isinstance(obj, dict) else enumerate(obj)
                for k, v in items:
                    if isinstance(v, (dict, list)):
                        stack.append((parent.add(str(k), expand=True), v))
                    else:
                        parent.add_leaf(f"{k}  {leaf_info(v).label}")
            t.root.expand()
            yield t

    t0 = time.perf_counter()
    app = Eager()
    async with app.run_test(size=(120, 40)) as pilot:
        await _wait(painted)
        paint = painted[0] - t0
        app.query_one(Tree).focus()
        moves = []
        for _ in range(20):
            t = time.perf_counter()
            await pilot.press("down")
            moves.append(time.perf_counter() - t)
        return {
            "paint": paint,
            "paint_mb": _rss_mb() - base,
            "move": float(np.median(moves)),
            "ready": paint,
            "peak_mb": _rss_mb() - base,
        }


async def _wide(width: int) -> dict:
    """Expand a node with `width` children: ours (paged) vs adding them all to a Tree."""
    from textual.app import App, ComposeResult
    from textual.widgets import Tree
    from treetool.tui import TreetoolApp

    tree = {"wide": [np.zeros(2, np.float32) for _ in range(width)]}
    app = TreetoolApp(tree, title="bench")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("down")
        await pilot.pause()
        floor = []
        for _ in range(10):  # what Pilot itself costs: a key nothing is bound to
            t = time.perf_counter()
            await pilot.press("f19")
            await pilot.pause()
            floor.append(time.perf_counter() - t)
        t = time.perf_counter()
        await pilot.press("right")
        await pilot.pause()
        ours = time.perf_counter() - t
        moves = []
        for _ in range(20):
            t = time.perf_counter()
            await pilot.press("down")
            moves.append(time.perf_counter() - t)

    class Eager(App):
        def compose(self) -> ComposeResult:
            yield Tree("root")

    app2 = Eager()
    async with app2.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        tr = app2.query_one(Tree)
        t = time.perf_counter()
        node = tr.root.add("wide")
        for i, x in enumerate(tree["wide"]):
            node.add_leaf(f"[{i}]  f32{list(x.shape)}")
        node.expand()
        await pilot.pause()
        eager = time.perf_counter() - t
    return {
        "ours": ours,
        "eager": eager,
        "move": float(np.median(moves)),
        "floor": float(np.median(floor)),
    }


def _child(kind: str, n: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if "--terminal" in sys.argv:  # the real-terminal mode has its own options
        import os

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_tui_terminal import main as terminal_main

        terminal_main([a for a in sys.argv[1:] if a != "--terminal"])
        return
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--child", nargs=2)
    _rows.add_argument(p)
    args = p.parse_args()
    if args.child:
        kind, n = args.child[0], int(args.child[1])
        fn = {"ours": _ours, "eager": _eager, "wide": _wide}[kind]
        print(json.dumps(asyncio.run(fn(n))))
        return
    sizes = [1_000, 10_000] if args.quick else [1_000, 100_000, 1_000_000]
    eager_max = 10_000 if args.quick else 100_000
    print(
        f"{'leaves':>9} | {'eager Tree paint':>16} | {'ours paint':>10} | {'ratio':>6} | "
        f"{'eager MB':>8} | {'ours MB (paint/indexed)':>23} | {'index ready':>11} | {'cursor move':>22} | "
        "tabs' applies()"
    )
    print("-" * 120)
    for n in sizes:
        ours = _child("ours", n)
        if n <= eager_max:
            eager = _child("eager", n)
            e_paint = f"{eager['paint']:.2f} s"
            ratio = f"{eager['paint'] / ours['paint']:.1f}x"
            e_mb = f"{eager['peak_mb']:.0f}"
        else:
            e_paint, ratio, e_mb = "not run", "-", "-"
        move = f"{ours['move'] * 1000:.0f} ms"
        if n <= eager_max:
            move += f" (eager {eager['move'] * 1000:.0f} ms)"
        print(
            f"{n:>9,} | {e_paint:>16} | {ours['paint']:>8.2f} s | {ratio:>6} | {e_mb:>8} | "
            f"{ours['paint_mb']:>10.0f} / {ours['peak_mb']:<10.0f} | {ours['ready']:>9.2f} s | "
            f"{move:>22} | {ours['tabs']:.2f} s"
        )
        _rows.row(
            f"TUI first paint (headless), {n:,} leaves",
            "eager textual Tree" if n <= eager_max else None,
            eager["paint"] if n <= eager_max else None,
            ours["paint"],
            peak_mb=ours["peak_mb"],
            note=f"index ready {ours['ready']:.2f} s",
        )
    wide = _child("wide", 10_000)
    print()
    print(
        f"{'expand a 10,000-child node':<30} | eager Tree (all rows) {wide['eager'] * 1000:.0f} ms | "
        f"ours (paged) {wide['ours'] * 1000:.0f} ms | ratio {wide['eager'] / wide['ours']:.1f}x | "
        f"cursor move after it {wide['move'] * 1000:.1f} ms"
        f" | Pilot's own cost per key (an unbound key) {wide['floor'] * 1000:.0f} ms"
    )
    _rows.row("TUI: expand a 10,000-child node", "eager textual Tree", wide["eager"], wide["ours"])
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()
