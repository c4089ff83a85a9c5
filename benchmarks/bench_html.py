"""Notebook HTML: `to_html` against `treescope.render_to_html` on the same trees, one run each.

The trees are the worst case for a budgeted view: dicts of dicts of distinct small numpy
arrays (`{"layer000012": {"w0": f32[1], …, "w9": f32[10]}}`), so no run of identical siblings
folds away. treescope renders every node (it is slow: 1e3 and 1e4 leaves by default, 1e5 with
`--full`, never 1e6); it runs in a subprocess with a timeout.

    python benchmarks/bench_html.py            # 1e3, 1e4, 1e5, 1e6 leaves; treescope to 1e5
                                               # (about 70 s, 2 GB at 1e5)
    python benchmarks/bench_html.py --quick    # 1e3 and 1e4 only

Targets: >= 10x faster than treescope at 1e4 leaves, >= 100x at 1e5, every size in < 1 s and
< 2 MB; the page of the 1e5-leaf tree (1e4 with --quick) usable in headless Chromium within 1 s:
open (from navigation to laid out), one fold (the mean of folding and unfolding 20 rows, each
laid out) and the browser's find of the last key drawn (timed in the page by `performance.now()`).
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


_PROBE = """<script>
(function () {
  // open: the page parsed, its scripts run and laid out (offsetHeight forces the layout)
  var h = document.body.offsetHeight;
  var opened = performance.now();
  // fold: open 20 rows and close them again, each laid out (the mean is one fold's time)
  var rows = document.querySelectorAll(".treetool details > summary");
  var n = Math.min(rows.length, 20);
  for (var i = 0; i < n; i++) { rows[i].click(); h += document.body.offsetHeight; }
  for (var i = 0; i < n; i++) { rows[i].click(); h += document.body.offsetHeight; }
  var folded = performance.now();
  // search: the browser's find for a key of the last row drawn, from the top
  var keys = document.querySelectorAll(".treetool .tt-k");
  var last = keys.length ? keys[keys.length - 1].textContent : "layer";
  var found = window.find(last, false, false, true);
  var searched = performance.now();
  var r = document.createElement("div");
  r.id = "tt-probe";
  r.textContent = JSON.stringify({open: opened, fold: (folded - opened) / (2 * n),
    search: searched - folded,
    rows: rows.length, toggled: n, found: found, key: last});
  document.body.appendChild(r);
})();
</script>"""


def chromium_run(html: str, timeout: float = 120.0) -> dict | str:
    """Open `html` in headless Chromium; the probe's times (ms) or why there are none."""
    import re
    import shutil
    import tempfile

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        return "chromium not installed"
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(
            '<!doctype html><html><head><meta charset="utf-8"></head><body>'
            + html
            + _PROBE
            + "</body></html>",
            encoding="utf-8",
        )
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp}/p"]
        try:
            proc = subprocess.run(
                [*cmd, "--dump-dom", page.as_uri()],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return f"timeout {timeout:.0f}s"
    m = re.search(r'<div id="tt-probe">(.*?)</div>', proc.stdout)
    if m is None:
        return "no probe: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:60]
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def _size(n: int) -> str:
    from treetool._lowering._labels import fmt_bytes

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

    from treetool._display import to_html

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
    n = 10_000 if args.quick else 100_000
    br = chromium_run(to_html(build(n)))
    if isinstance(br, dict):
        total = (br["open"] + br["fold"] + br["search"]) / 1e3
        print(
            f"headless Chromium, {n:,} leaves: open {br['open']:.0f} ms, one fold "
            f"{br['fold']:.1f} ms (mean of {2 * br['toggled']}), find {br['key']!r} "
            f"{br['search']:.0f} ms (found: {br['found']}); open + fold + find {total:.3f} s "
            "(target < 1 s)"
        )
        _rows.row(
            f"notebook HTML usable in headless Chromium, {n:,} leaves (open+fold+search)",
            None,
            None,
            total if br["found"] else None,
            ("s<", 1.0),
            note=f"open {br['open']:.0f} ms (from navigation), one fold {br['fold']:.1f} ms "
            f"(mean of {2 * br['toggled']}), find {br['search']:.0f} ms; {br['rows']} rows drawn",
        )
    else:
        print(f"headless Chromium: {br}")
        _rows.row(
            f"notebook HTML in headless Chromium, {n:,} leaves",
            None,
            None,
            None,
            ("s<", 1.0),
            note=br,
        )
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()
