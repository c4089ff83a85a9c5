"""Every benchmark in one command: one table of every figure beside its anchor, timed in the same run.

Each script runs as a fresh process (`python benchmarks/bench_X.py [--quick] --rows-json F`),
so its peak memory is its own and one script's failure does not stop the others. Each script
writes its rows (see `_rows.py`); this prints them as one table:

    work | anchor | anchor time | treetool time | ratio | peak MB | goal | holds

`ratio` is always treetool's time over the anchor's (lower is better; a goal "> = 50x faster"
holds when the ratio is <= 1/50). Peak memory is the row's own figure where the script
measures one (a child process, a tracemalloc peak), else the peak RSS of the script's process.

    python benchmarks/run_all.py [--quick] [--only views --only transforms ...]
                                 [--extra 'remote=--only http-link' ...]
                                 [--json table.json] [--markdown docs/performance.md]
    python benchmarks/run_all.py --from-json a.json --from-json b.json --markdown out.md

`--quick` runs every script at its small sizes (minutes instead of an hour); `--markdown`
writes the Performance page (docs/performance.md): for each run the machine, the date, the load
average before and after, the command and the table, then each script's first docstring line. Timings on a shared machine are noisy: run it alone
(`nice`, nothing else heavy) and compare ratios, which pair each figure with its anchor.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: (name, extra args for a full run, extra args for --quick), in the order of the table
BENCHES: list[tuple[str, list[str], list[str]]] = [
    ("views", [], ["--quick"]),
    ("transforms", [], ["--quick"]),
    ("pickle_reader", ["--n", "100000", "--repeat", "5"], ["--quick", "--repeat", "3"]),
    ("html", [], ["--quick"]),
    ("remote", [], ["--quick"]),
    ("load", [], ["--quick"]),
    ("diff", [], ["--quick"]),
    ("surgery", [], ["--quick"]),
    ("totals", [], ["--quick"]),
    ("devices", [], ["--quick"]),
    ("text", [], ["--quick"]),
    ("jaxpr", [], ["--quick"]),
    ("functions", [], ["--quick"]),
    ("read_imports", [], []),
    ("hostile_readers", [], ["--quick"]),
    ("tui", [], ["--quick"]),
    ("tui_terminal", [], ["--quick"]),
    ("torch", [], ["--quick"]),
    ("port", [], ["--quick"]),
    ("apply", [], ["--quick"]),
]

COLUMNS = ("work", "anchor", "anchor time", "treetool time", "ratio", "peak MB", "goal", "holds")


def _name(s: str) -> str:
    s = s.removesuffix(".py").removeprefix("bench_")
    known = [b[0] for b in BENCHES]
    if s not in known:
        raise SystemExit(f"run_all: no benchmark {s!r}; known: {', '.join(known)}")
    return s


def run_one(name: str, args: list[str], timeout: float) -> dict[str, Any]:
    """Run one script; its rows, its process's peak RSS, wall time, exit status."""
    with tempfile.TemporaryDirectory(prefix="run_all_") as tmp:
        out = os.path.join(tmp, "rows.json")
        cmd = [sys.executable, str(HERE / f"bench_{name}.py"), *args, "--rows-json", out]
        print(f"== {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        # the script's own output goes to stderr: stdout holds only the table
        proc = subprocess.Popen(cmd, stdout=sys.stderr, cwd=HERE.parent, start_new_session=True)
        status, peak_kb = _wait(proc, timeout)
        wall = time.perf_counter() - t0
        rows: list[dict[str, Any]] = []
        if os.path.exists(out):
            with open(out) as f:
                rows = json.load(f)["rows"]
    peak = peak_kb / 1024
    for r in rows:
        r["bench"] = name
        if r.get("peak_mb") is None:
            r["peak_mb"] = peak
            r["peak_of"] = "script process"
        else:
            r["peak_of"] = "row"
    return {"bench": name, "command": cmd[1:-2], "status": status, "wall_s": wall, "rows": rows}


def _wait(proc: subprocess.Popen, timeout: float) -> tuple[str, int]:
    """Wait for `proc` (killing its group past `timeout`); its status text and peak RSS (KB)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, code, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(code)
            rc = proc.returncode
            return ("ok" if rc == 0 else f"exit {rc}"), usage.ru_maxrss
        if time.monotonic() > deadline:
            os.killpg(proc.pid, 9)
            _, code, usage = os.wait4(proc.pid, 0)
            proc.returncode = -9
            return f"timeout {timeout:.0f} s", usage.ru_maxrss
        time.sleep(0.05)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    mem = None
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        cpu = names[0] if names else cpu
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        mem = round(kb / 2**20, 1)
    except OSError:
        pass
    versions = {}
    for mod in ("jax", "numpy", "equinox", "treescope"):
        try:
            from importlib.metadata import version

            versions[mod] = version(mod)
        except Exception:
            versions[mod] = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
    }


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "-"
    if r < 0.1:
        return f"{r:.4f} ({1 / r:.0f}x faster)" if r > 0 else f"{r:.4f}"
    return f"{r:.2f}"


def cells(r: dict[str, Any]) -> list[str]:
    peak = r.get("peak_mb")
    return [
        r["work"],
        r.get("anchor") or "-",
        fmt_time(r.get("anchor_s")),
        fmt_time(r.get("treetool_s")),
        fmt_ratio(r.get("ratio")),
        "-" if peak is None else f"{peak:.0f}",
        r.get("goal") or "-",
        _holds_cell(r),
    ]


def _holds_cell(r: dict[str, Any]) -> str:
    h, spec = r.get("holds"), r.get("goal_spec")
    if h is None:
        return "n/a" if spec and len(spec) > 2 else "-"
    return "yes" if h else "NO"


def text_table(rows: list[dict[str, Any]]) -> str:
    body = [list(COLUMNS)] + [cells(r) for r in rows]
    widths = [max(len(c[i]) for c in body) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


PAGE_INTRO = """\
# Performance

Every figure on this page comes from one command, `python benchmarks/run_all.py`, which runs
each script in `benchmarks/` in a fresh process and times treetool beside its anchor (the
library call or the plain tool a user would otherwise run) in the same run. `ratio` is
treetool's time over the anchor's (lower is better); a goal ">= 50x faster" holds when the
anchor takes at least 50 times treetool's time, and a goal marked "(for 1 GB files)" is shown
but not judged on a run with smaller files (`--quick`). The machines are shared 2-core ones:
absolute times are noisy, and the ratios, which pair each figure with its anchor, are what to
compare. The page is generated by `run_all.py --markdown`; rerun it to check the figures on your
machine. How each benchmark measures, the link model of the remote rows, and earlier figures:
[measurement notes](performance_notes.md).
"""


def page(reports: list[dict[str, Any]]) -> str:
    """The Performance page: the intro, then each run's table (`markdown`), then the scripts."""
    scripts = sorted({b["bench"] for r in reports for b in r["benches"]})
    lines = ["", "## The scripts", ""]
    for name in scripts:
        lines.append(f"- `benchmarks/bench_{name}.py`: {_first_line(HERE / f'bench_{name}.py')}")
    return (
        PAGE_INTRO
        + "".join(f"\n## {_title(r)}\n\n" + markdown(r) for r in reports)
        + ("\n".join(lines) + "\n")
    )


def _title(report: dict[str, Any]) -> str:
    size = "quick sizes" if report.get("quick") else "full sizes"
    return f"Run of {report['date']} ({size})"


def _first_line(script: Path) -> str:
    """The first line of a script's docstring."""
    import ast

    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    load = report["load"]
    lines = [
        f"Measured on {report['date']} on {m['cpu']} ({m['cores']} cores, {m['memory_gb']} GB), "
        f"{m['os']}, Python {m['python']}, jax {m['versions'].get('jax')}. Load average "
        f"(1, 5, 15 min) before the run: {_load(load['before'])}; after: {_load(load['after'])}.",
        "",
        f"Command: `{report['command']}`. Ratio is treetool's time over the anchor's, measured "
        "in the same run (lower is better).",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for r in report["rows"]:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells(r)) + " |")
    failed = [b for b in report["benches"] if b["status"] != "ok"]
    if failed:
        lines += ["", "Benchmarks that did not finish in this run:", ""]
        lines += [f"- `{b['bench']}`: {b['status']}" for b in failed]
    notes = [r for r in report["rows"] if r.get("note")]
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"- {r['work']}: {r['note']}" for r in notes]
    return "\n".join(lines) + "\n"


def _load(v: list[float] | None) -> str:
    return "unknown" if v is None else ", ".join(f"{x:.2f}" for x in v)


def _loadavg() -> list[float] | None:
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def _compile() -> None:
    """Compile treetool's modules to bytecode first, as an install does: the scripts time fresh
    `treetool` processes, and with `PYTHONDONTWRITEBYTECODE=1` (or a checkout edited since its
    last run) each of them would compile every changed module from source again (measured:
    +45-80 ms on each local `inspect --json` command)."""
    import compileall

    for folder in ("treetool", "tui"):
        compileall.compile_dir(str(HERE.parent / folder), quiet=1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every script at its small sizes")
    ap.add_argument("--only", action="append", default=[], help="a benchmark (repeatable)")
    ap.add_argument("--json", metavar="FILE", help="write the table (and the machine) as JSON")
    ap.add_argument(
        "--markdown", metavar="FILE", help="write the Performance page (docs/performance.md)"
    )
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per script")
    ap.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="more arguments for one script, e.g. 'remote=--only http-link' (repeatable)",
    )
    ap.add_argument(
        "--from-json",
        action="append",
        default=[],
        metavar="FILE",
        help="run nothing: write --markdown from the JSON of earlier runs (one section each)",
    )
    args = ap.parse_args(argv)
    if args.from_json:
        reports = [json.loads(Path(f).read_text()) for f in args.from_json]
        for r in reports:
            print(text_table(r["rows"]))
        if args.markdown:
            Path(args.markdown).write_text(page(reports))
        return 0
    only = {_name(s) for s in args.only}
    extra: dict[str, list[str]] = {}
    for e in args.extra:
        name, sep, more = e.partition("=")
        if not sep:
            raise SystemExit(f"run_all: --extra wants NAME=ARGS, got {e!r}")
        extra.setdefault(_name(name), []).extend(shlex.split(more))
    _compile()
    before = _loadavg()
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    benches = []
    for name, full, quick in BENCHES:
        if only and name not in only:
            continue
        chosen = [*(quick if args.quick else full), *extra.get(name, [])]
        benches.append(run_one(name, chosen, args.timeout))
    rows = [r for b in benches for r in b["rows"]]
    command = "python benchmarks/run_all.py" + (" --quick" if args.quick else "")
    command += "".join(f" --only {s}" for s in args.only)
    command += "".join(f" --extra {shlex.quote(e)}" for e in args.extra)
    report = {
        "date": date,
        "command": command,
        "quick": args.quick,
        "machine": machine(),
        "load": {"before": before, "after": _loadavg()},
        "columns": list(COLUMNS),
        "benches": [{k: v for k, v in b.items() if k != "rows"} for b in benches],
        "rows": rows,
    }
    print(text_table(rows))
    for b in benches:
        if b["status"] != "ok":
            print(f"{b['bench']}: {b['status']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(page([report]))
    return 0 if all(b["status"] == "ok" for b in benches) else 1


if __name__ == "__main__":
    sys.exit(main())
