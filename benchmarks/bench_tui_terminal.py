"""The TUI as users run it: `treetool inspect FILE` in a real terminal, command to screen.

A pty read by the `pyte` terminal emulator, timed from the command to what is on the screen.

Measured per input (1e5- and 1e6-array pickles, a 10,000-layer equinox model):
first output (progress line or app), first tree paint (partial: the tree read so far, which
a big pickle shows while it is read; complete: the whole tree), totals, peak RSS (wait4), each
search keystroke (until the screen shows it), the search's answer, revealing the last leaf
(Leaves tab, End, Enter: until the tree row is on screen), and the Leaves-tab key latency
(Down x30: until the repaint).

    python benchmarks/bench_tui.py --terminal                 # 1e5, 1e6, 10,000 layers
    python benchmarks/bench_tui.py --terminal --quick         # 1e5 only
    python benchmarks/bench_tui.py --terminal --src DIR       # run another checkout's code
                                                              # (DIR holds treetool/, tui/)

The anchor is the same run with `--src` pointing at a checkout from before the change;
`--compare DIR` runs both and prints the ratios (a checkout with its own `.venv` runs with
that environment's python). "reveal last (fresh)" is timed in the app as it opened, before
any search; "reveal middle" after a search of the last leaf.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pickle
import pty
import re
import select
import struct
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from pathlib import Path

import _rows
import numpy as np

COLS, ROWS = 160, 48
#: a wait that takes longer than this is reported as "> LIMIT"
LIMIT = 30.0


class Term:
    """A child process on a pty, its output fed to a pyte screen."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        import pyte

        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.t0 = time.perf_counter()
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its terminal
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        self.first_output: float | None = None
        self.last_output = self.t0
        self.screen.write_process_input = lambda data: os.write(fd, data.encode())
        self.exited: tuple[int, int] | None = None
        self.rusage = None

    def pump(self, timeout: float) -> bool:
        """Read what the child wrote within `timeout`; False when nothing came."""
        r, _, _ = select.select([self.fd], [], [], max(timeout, 0))
        if not r:
            return False
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:
            return False
        if not data:
            return False
        now = time.perf_counter()
        if self.first_output is None:
            self.first_output = now
        self.last_output = now
        self.stream.feed(data)
        return True

    def text(self) -> str:
        return "\n".join(self.screen.display)

    def wait_for(self, pred: Callable[[str], bool], limit: float = LIMIT) -> float | None:
        """Seconds until `pred(screen text)` holds, None past `limit`."""
        start = time.perf_counter()
        while True:
            if pred(self.text()):
                return time.perf_counter() - start
            left = limit - (time.perf_counter() - start)
            if left <= 0:
                return None
            self.pump(min(left, 0.05))

    def send(self, data: bytes) -> float:
        os.write(self.fd, data)
        return time.perf_counter()

    def next_output(self, limit: float = LIMIT) -> float | None:
        """Seconds until the child writes anything."""
        start = time.perf_counter()
        while time.perf_counter() - start < limit:
            if self.pump(0.05):
                return time.perf_counter() - start
        return None

    def settle(self, quiet: float = 0.3, limit: float = LIMIT) -> None:
        """Read until the child has been quiet for `quiet` seconds."""
        start = time.perf_counter()
        while time.perf_counter() - start < limit:
            if not self.pump(quiet):
                return

    def close(self) -> int:
        """Quit (q, then kill) and return the peak RSS in bytes."""
        try:
            self.send(b"q")
        except OSError:
            pass
        end = time.perf_counter() + 20
        while time.perf_counter() < end:
            pid, _status, ru = os.wait4(self.pid, os.WNOHANG)
            if pid:
                return ru.ru_maxrss * 1024
            self.pump(0.1)
        os.kill(self.pid, 9)
        _, _, ru = os.wait4(self.pid, 0)
        return ru.ru_maxrss * 1024


def make_inputs(tmp: Path, sizes: list[int], layers: int) -> list[dict]:
    cases = []
    for n in sizes:
        path = tmp / f"arrays_{n}.pkl"
        tree = {f"k{i}": np.full(1, i, np.float32) for i in range(n)}
        with open(path, "wb") as fh:
            pickle.dump(tree, fh, protocol=4)
        last = max(tree)  # keys sort as strings: 'k99999' is the last for n = 1e5
        cases.append(
            {
                "name": f"{n:.0e} arrays pickle ({path.stat().st_size / 1e6:.0f} MB)",
                "target": str(path),
                "leaves": n,
                "query": last,
                "last": f"['{last}']",
                "middle": f"k{n // 2}",  # one match: no other key holds these digits
                "middle rows": [f"['k{n // 2}']"],
                "middle near": [],
            }
        )
    if layers:
        mod = tmp / "bench_layers.py"
        mod.write_text(
            "import equinox as eqx, jax\n"
            "lin = eqx.nn.Linear(8, 8, key=jax.random.PRNGKey(0))\n"
            f"model = [jax.tree_util.tree_map(lambda x: x + 0, lin) for _ in range({layers})]\n"
        )
        cases.append(
            {
                "name": f"{layers:,}-layer equinox model",
                "target": "bench_layers:model",
                "leaves": 2 * layers,
                "query": f"[{layers - 1}].bias",
                "last": f"[{layers - 1}]",
                "middle": f"[{layers // 2}].weight",
                # the leaf's row shows `.weight` only: with its layer's row or a neighbour's
                # (one of them is on screen, whichever way the tree scrolled), it is its row
                "middle rows": [".weight"],
                "middle near": [f"[{layers // 2 + d}]" for d in (-1, 0, 1)],
            }
        )
    return cases


def _env(src: str | None, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEXTUAL")}
    env.update(TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS), HOME=str(tmp))
    paths = [str(tmp)] + ([src] if src else [])
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def tree_row(text: str, key: str) -> bool:
    """Whether the Tree tab shows the row of `key` (the key as a row shows it: `['k9']`,
    `[9999]`): a tree guide or an arrow right before it, left of the details pane's border, so
    neither the details pane's title nor the Leaves tab's copy of the name counts."""
    pattern = re.compile(r"[─▼▶] " + re.escape(key) + "  ")
    return any(pattern.search(line.split("▏", 1)[0]) for line in text.splitlines())


def run_case(case: dict, src: str | None, tmp: Path, python: str = sys.executable) -> dict:
    argv = [python, "-m", "treetool.cli", "inspect", case["target"]]
    term = Term(argv, _env(src, tmp), str(tmp))
    out: dict = {}

    def tree_shown(t: str) -> bool:
        return "Leaves" in t and ("dict[" in t or "list[" in t)

    painted = term.wait_for(tree_shown)
    out["first output"] = term.first_output - term.t0 if term.first_output else None
    # the tree read so far (a file the app reads itself), or the whole tree
    out["first paint (partial)"] = None if painted is None else time.perf_counter() - term.t0
    # the whole tree: the totals line counts it (a stale stderr progress line can linger on
    # the emulated screen, so "reading" alone does not tell)
    n = case["leaves"]
    whole = term.wait_for(
        lambda t: tree_shown(t) and ("counting…" in t or f"{n:,} leaves" in t or f"{n:,} leaf" in t)
    )
    out["first paint (complete)"] = None if whole is None else time.perf_counter() - term.t0
    totals = term.wait_for(lambda t: f"{n:,} leaves" in t or f"{n:,} leaf" in t)
    out["totals"] = None if totals is None else time.perf_counter() - term.t0
    term.settle()
    # reveal the last leaf from the app as it opened (nothing searched or opened before, so
    # its row cannot be on screen already): Leaves tab, End, Enter, until its Tree row shows
    last = case["last"]
    term.send(b"L")
    term.settle()
    sent = term.send(b"\x1b[F")  # End: the table's row and the details pane show it
    at_end = term.wait_for(lambda t: t.count(last) >= 2)
    out["leaves End"] = None if at_end is None else time.perf_counter() - sent
    term.settle()
    sent = term.send(b"\r")
    shown = term.wait_for(lambda t: tree_row(t, last))
    out["reveal last (fresh)"] = None if shown is None else time.perf_counter() - sent
    term.settle()
    # search: each keystroke until the screen shows the query so far
    term.send(b"/")
    term.wait_for(lambda t: "glob (" in t, 10)  # the bar is open (and focused)
    term.settle(0.1)
    keys = []
    query = case["query"]
    for i, ch in enumerate(query):
        sent = term.send(ch.encode())
        shown = term.wait_for(lambda t, q=query[: i + 1]: q in t)
        keys.append(None if shown is None else time.perf_counter() - sent)
        if shown is None:  # frozen: the rest would only wait on it
            break
    out["search key max"] = None if None in keys else max(keys)
    out["search keys"] = keys
    if None in keys:
        for key in ("search answer", "reveal middle", "leaves key median", "leaves key max"):
            out[key] = None
        out["peak RSS MB"] = term.close() / 1e6
        return out
    out["search answer"] = term.wait_for(lambda t: "1 match" in t)
    term.send(b"\x1b")  # escape: close the search
    term.settle()
    # reveal a leaf in the middle after that search: searched from the Leaves tab (the tree
    # does not follow a search typed there), Enter (the table's cursor on it), Enter
    mid, mid_rows, near = case["middle"], case["middle rows"], case["middle near"]

    def middle_shown(t: str) -> bool:
        return all(tree_row(t, r) for r in mid_rows) and (
            not near or any(tree_row(t, r) for r in near)
        )

    term.send(b"L")
    term.settle()
    term.send(b"/")
    term.wait_for(lambda t: "glob (" in t, 10)
    term.settle(0.1)
    term.send(mid.encode())
    term.wait_for(lambda t: "1 match" in t)
    term.settle()
    term.send(b"\r")
    term.settle()
    sent = term.send(b"\r")
    shown = term.wait_for(middle_shown)
    out["reveal middle"] = None if shown is None else time.perf_counter() - sent
    term.settle()
    term.send(b"\x1b")  # clear the search: the Leaves tab shows every leaf again
    term.settle()
    # Leaves tab key latency: Home, then Down x30
    term.send(b"L")
    term.settle()
    term.send(b"\x1b[H")
    term.settle()
    lat = []
    for _ in range(30):
        sent = term.send(b"\x1b[B")
        got = term.next_output(10)
        lat.append(got if got is not None else 10.0)
        term.settle(0.05, 10)
    out["leaves key median"] = sorted(lat)[len(lat) // 2]
    out["leaves key max"] = max(lat)
    out["leaves keys"] = lat
    out["peak RSS MB"] = term.close() / 1e6
    return out


def _fmt(v: float | None, unit: str = "s") -> str:
    if v is None:
        return f"> {LIMIT:.0f} s"
    if unit == "MB":
        return f"{v:,.0f} MB"
    return f"{v * 1000:,.0f} ms" if v < 1 else f"{v:.2f} s"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the 1e5-array pickle only")
    p.add_argument("--src", help="run the code of another checkout (holds treetool/, tui/)")
    p.add_argument("--compare", help="also run this checkout (the anchor) and print ratios")
    p.add_argument("--sizes", default=None, help="comma-separated array counts")
    p.add_argument("--layers", type=int, default=None, help="layers of the equinox model (0: none)")
    _rows.add_argument(p)
    args = p.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")] if args.sizes else None
    if sizes is None:
        sizes = [100_000] if args.quick else [100_000, 1_000_000]
    layers = args.layers if args.layers is not None else 0 if args.quick else 10_000
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cases = make_inputs(tmp, sizes, layers)
        runs = [("after", *_runner(args.src))]
        if args.compare:
            runs.insert(0, ("before", *_runner(args.compare)))
        results: dict[str, dict[str, dict]] = {}
        for case in cases:
            for label, src, python in runs:
                results.setdefault(case["name"], {})[label] = run_case(case, src, tmp, python)
                print(f"{case['name']} [{label}]: {results[case['name']][label]}", flush=True)
    print()
    for name, by in results.items():
        print(f"## {name}")
        labels = list(by)
        print("| measure | " + " | ".join(labels) + (" | ratio |" if len(labels) == 2 else " |"))
        print("|---" * (len(labels) + 1 + (len(labels) == 2)) + "|")
        for key in by[labels[-1]]:
            if isinstance(by[labels[-1]][key], list):  # the per-key list: printed above
                continue
            unit = "MB" if key.endswith("MB") else "s"
            cells = [_fmt(by[lb].get(key), unit) for lb in labels]
            ratio = ""
            if len(labels) == 2:
                a, b = by[labels[0]].get(key), by[labels[1]].get(key)
                a = LIMIT if a is None else a
                b = LIMIT if b is None else b
                ratio = f" | {a / b:.1f}x" if b else " | –"
            print(f"| {key} | " + " | ".join(cells) + ratio + " |")
            value = by[labels[-1]].get(key)
            if isinstance(value, (int, float)):
                before = by[labels[0]].get(key) if len(labels) == 2 else None
                _rows.row(
                    f"TUI in a terminal, {name}: {key}",
                    "the --compare checkout" if len(labels) == 2 else None,
                    before if isinstance(before, (int, float)) else None,
                    None if unit == "MB" else value,
                    peak_mb=value if unit == "MB" else None,
                )
        print()
    _rows.dump(args.rows_json)


def _runner(src: str | None) -> tuple[str | None, str]:
    """(PYTHONPATH entry, python) that run the code of checkout `src` (None: this one).

    A checkout with its own virtual environment (`src/.venv`, treetool installed editable from
    it) runs with that environment's python; otherwise `src` goes first on PYTHONPATH, with
    `treetool/tui` linked to its `tui/` (as the install maps it).
    """
    if src is None:
        return None, sys.executable
    venv = Path(src) / ".venv" / "bin" / "python"
    if venv.exists():
        return None, str(venv)
    link = Path(src) / "treetool" / "tui"
    if not link.exists():
        link.symlink_to(Path(src) / "tui")
    return src, sys.executable


if __name__ == "__main__":
    main()
