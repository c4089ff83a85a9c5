"""Notebook HTML: `to_html` against `treescope.render_to_html` on the same trees, one run each.

The trees are the worst case for a budgeted view: dicts of dicts of distinct small numpy
arrays (`{"layer000012": {"w0": f32[1], …, "w9": f32[10]}}`), so no run of identical siblings
folds away. treescope renders every node (it is slow: 1e3 and 1e4 leaves by default, 1e5 with
`--full`, never 1e6); it runs in a subprocess with a timeout.

    python benchmarks/bench_html.py            # 1e3, 1e4, 1e5, 1e6 leaves; treescope to 1e5
                                               # (about 70 s, 2 GB at 1e5)
    python benchmarks/bench_html.py --quick    # 1e3 and 1e4 only

Targets: >= 10x faster than treescope at 1e4 leaves, >= 100x at 1e5, every size in < 1 s and
< 2 MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import _rows
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PER_LAYER = 10

#: speed-up over treescope that each size must reach (the others: < 1 s)
SPEEDUP_GOALS = {10_000: ("speedup>=", 10.0), 100_000: ("speedup>=", 100.0)}


def build(leaves: int) -> dict:
    """`leaves // 10` layers of ten distinct f32 arrays of shapes (1,) … (10,)."""
    return {
        f"layer{i:06d}": {f"w{k}": np.full(k + 1, i, np.float32) for k in range(PER_LAYER)}
        for i in range(leaves // PER_LAYER)
    }


def _treescope_child(leaves: int) -> None:
    import treescope

    tree = build(leaves)
    t = time.perf_counter()
    html = treescope.render_to_html(tree)
    print(json.dumps({"time": time.perf_counter() - t, "size": len(html)}))


def treescope_run(leaves: int, timeout: float) -> dict | str:
    """treescope's time and size in a fresh process, or why there are none."""
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--treescope-child", str(leaves)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return f"timeout {timeout:.0f}s"
    if proc.returncode != 0:
        return "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:60]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _size(n: int) -> str:
    from treetool.render.labels import fmt_bytes

    return fmt_bytes(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help=argparse.SUPPRESS)  # now the default
    ap.add_argument("--quick", action="store_true", help="1e3 and 1e4 leaves only")
    ap.add_argument("--timeout", type=float, default=240.0, help="treescope seconds per call")
    ap.add_argument("--treescope-child", type=int, help=argparse.SUPPRESS)
    _rows.add_argument(ap)
    args = ap.parse_args()
    if args.treescope_child:
        _treescope_child(args.treescope_child)
        return

    from treetool.render.html import to_html

    to_html(build(100))  # imports (rich, the renderers) are paid once, not by the first size
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000, 1_000_000]
    print(
        f"{'leaves':>10}  {'ours':>8}  {'our size':>9}  {'treescope':>12}  "
        f"{'ts size':>9}  {'speed-up':>9}"
    )
    ok = True
    for n in sizes:
        tree = build(n)
        t = time.perf_counter()
        html = to_html(tree)
        ours = time.perf_counter() - t
        del tree
        ok &= ours < 1.0 and len(html) < 2_000_000
        run_ts = n <= 100_000
        ts = treescope_run(n, args.timeout) if run_ts else "skipped"
        if isinstance(ts, dict):
            ts_time, ts_size = f"{ts['time']:.2f} s", _size(ts["size"])
            ratio = f"{ts['time'] / ours:.0f}x"
        else:
            ts_time, ts_size, ratio = ts, "-", "-"
        _rows.row(
            f"notebook HTML (to_html), {n:,} leaves",
            "treescope.render_to_html" if isinstance(ts, dict) else None,
            ts["time"] if isinstance(ts, dict) else None,
            ours,
            SPEEDUP_GOALS.get(n, ("s<", 1.0)),
            note=f"{_size(len(html))} of HTML"
            + (f"; treescope {ts_size}" if isinstance(ts, dict) else f"; treescope {ts}"),
        )
        print(
            f"{n:>10,}  {ours:>6.3f} s  {_size(len(html)):>9}  {ts_time:>12}  "
            f"{ts_size:>9}  {ratio:>9}",
            flush=True,
        )
    print("every size < 1 s and < 2 MB:", "yes" if ok else "NO")
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()
