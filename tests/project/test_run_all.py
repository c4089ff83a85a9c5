"""`benchmarks/run_all.py`: one cheap benchmark through it gives the table, its JSON and the
Performance page's fragment, in the shapes the docs build reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RUN_ALL = ROOT / "benchmarks" / "run_all.py"
COLUMNS = ["work", "anchor", "anchor time", "treetool time", "ratio", "peak MB", "goal", "holds"]
ROW_KEYS = {
    "work",
    "anchor",
    "anchor_s",
    "treetool_s",
    "ratio",
    "peak_mb",
    "peak_of",
    "goal",
    "goal_spec",
    "holds",
    "note",
    "bench",
}


def test_quick_run_of_one_benchmark_writes_the_table_json_and_markdown(tmp_path: Path) -> None:
    out_json, out_md = tmp_path / "table.json", tmp_path / "performance.md"
    proc = subprocess.run(
        [
            *(sys.executable, str(RUN_ALL), "--quick", "--only", "transforms"),
            *("--json", str(out_json), "--markdown", str(out_md)),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # stdout is the table alone: a header line, a rule, one line per row
    lines = proc.stdout.splitlines()
    assert lines[0].split("  ")[0] == "work" and lines[0].split() == " ".join(COLUMNS).split()
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert len(lines) == 3 and lines[2].startswith("autojit cached call: overhead over jax.jit")
    # the benchmark's own output went to stderr
    assert "overhead over plain jax.jit" in proc.stderr

    report = json.loads(out_json.read_text())
    assert report["columns"] == COLUMNS
    assert report["quick"] is True
    assert report["command"] == "python benchmarks/run_all.py --quick --only transforms"
    assert set(report["machine"]) == {"cpu", "cores", "memory_gb", "os", "python", "versions"}
    assert len(report["load"]["before"]) == 3 and len(report["load"]["after"]) == 3
    assert [(b["bench"], b["status"]) for b in report["benches"]] == [("transforms", "ok")]
    (row,) = report["rows"]
    assert set(row) == ROW_KEYS
    assert row["bench"] == "transforms"
    assert row["anchor"] == "equinox.filter_jit's overhead"
    assert row["goal"] == "<= 0.5x" and row["goal_spec"] == ["ratio<=", 0.5]
    for key in ("anchor_s", "treetool_s", "ratio", "peak_mb"):
        assert isinstance(row[key], float), key
    assert row["ratio"] == pytest.approx(row["treetool_s"] / row["anchor_s"])
    assert row["holds"] is (row["ratio"] <= 0.5)
    assert row["peak_of"] == "script process" and row["peak_mb"] > 50

    md = out_md.read_text()
    assert md.startswith("# Performance\n")
    assert f"\n## Run of {report['date']} (quick sizes)\n\nMeasured on {report['date']} on " in md
    assert md.endswith(
        "\n## The scripts\n\n- `benchmarks/bench_transforms.py`: Per-call dispatch overhead of "
        "`tt.autojit` vs `equinox.filter_jit` vs plain `jax.jit`.\n"
    )
    assert "| " + " | ".join(COLUMNS) + " |" in md
    assert "| autojit cached call: overhead over jax.jit (100 arrays) | equinox.filter_jit's" in md
    assert "`python benchmarks/run_all.py --quick --only transforms`" in md


def test_an_unknown_benchmark_is_one_line_naming_the_known_ones() -> None:
    proc = subprocess.run(
        [sys.executable, str(RUN_ALL), "--only", "nosuch"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip().startswith(
        "run_all: no benchmark 'nosuch'; known: views, transforms"
    )


def test_a_goal_for_other_sizes_is_shown_but_not_judged() -> None:
    """`--quick` measures the remote rows on 50 MB files; their goals were set for 1 GB files:
    the table shows the goal, marked, and "n/a" instead of a verdict either way."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import _rows
        import run_all
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    _rows.ROWS.clear()
    goal = ("speedup>=", 50.0)
    fast = _rows.row("inspect, 1 GB", "download", 10.0, 0.1, goal)
    slow = _rows.row("inspect, 1 GB", "download", 10.0, 1.0, goal)
    small = _rows.row("inspect, 50 MB", "download", 1.0, 0.1, _rows.not_here(goal, "1 GB files"))
    none = _rows.row("no goal", "download", 1.0, 0.1)
    _rows.ROWS.clear()
    assert [run_all.cells(r)[-2:] for r in (fast, slow, small, none)] == [
        [">= 50x faster", "yes"],
        [">= 50x faster", "NO"],
        [">= 50x faster (for 1 GB files)", "n/a"],
        ["-", "-"],
    ]
    assert small["holds"] is None and small["goal_spec"] == ["speedup>=", 50.0, "1 GB files"]


def test_an_overhead_measured_below_zero_holds_its_goal() -> None:
    """autojit's overhead over jax.jit can measure as -0.3 us (noise around nothing): the
    ratio is negative, and a `<=` goal holds; a speed-up goal cannot be judged on it."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import _rows
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert _rows.holds(("ratio<=", 0.5), -0.003, 1.0, None) is True
    assert _rows.holds(("ratio<=", 0.5), 0.6, 1.0, None) is False
    assert _rows.holds(("speedup>=", 50.0), -0.003, 1.0, None) is None
