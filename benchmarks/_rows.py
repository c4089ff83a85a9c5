"""The rows of the benchmark table: each script records its figures here, and `run_all.py`
collects them (every script takes `--rows-json FILE`, which writes its rows as JSON).

A row is one measured work beside its anchor, timed in the same run:

- `ratio` is always treetool's time over the anchor's (lower is better);
- a goal is one of `("ratio<=", x)` (treetool at most x times the anchor's time),
  `("speedup>=", x)` (the anchor at least x times treetool's time), `("s<", x)` (treetool's
  time under x seconds, for works without an anchor) or `("mb<", x)` (peak memory under x MB);
- `holds` is computed from the goal, or None where the row has no goal;
- a goal set for sizes this run does not measure (`--quick`'s small files, where a goal was set
  for 1 GB ones) is shown but not judged: `not_here(goal, why)` marks it, `holds` is None and the
  table says "n/a".
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from typing import Any

ROWS: list[dict[str, Any]] = []

GOAL_TEXT = {
    "ratio<=": "<= {:g}x",
    "speedup>=": ">= {:g}x faster",
    "s<": "< {:g} s",
    "mb<": "< {:g} MB",
}


def not_here(goal: tuple[str, float] | None, why: str) -> tuple[Any, ...] | None:
    """`goal`, marked as not applying to this run's sizes (`why` says what it is for).

    Example:
        >>> goal_text(not_here(("speedup>=", 50.0), "1 GB files"))
        '>= 50x faster (for 1 GB files)'
        >>> holds(not_here(("speedup>=", 50.0), "1 GB files"), 0.5, 1.0, None) is None
        True
    """
    return None if goal is None else (goal[0], goal[1], why)


def applies(goal: Any) -> bool:
    """Whether a goal is judged in this run (see `not_here`)."""
    return goal is not None and len(goal) == 2


def goal_text(goal: Any) -> str:
    if goal is None:
        return ""
    text = GOAL_TEXT[goal[0]].format(goal[1])
    return text if applies(goal) else f"{text} (for {goal[2]})"


def holds(
    goal: Any, ratio: float | None, ours_s: float | None, peak_mb: float | None
) -> bool | None:
    """Whether the goal holds (None: no goal, a goal for other sizes, or a figure it needs is
    missing)."""
    if goal is None or not applies(goal):
        return None
    kind, x = goal
    if kind == "mb<":
        return None if peak_mb is None else peak_mb < x
    if kind == "s<":
        return None if ours_s is None else ours_s < x
    if ratio is None:
        return None
    if kind == "ratio<=":  # (an overhead measured as nothing, or as below zero, holds)
        return ratio <= x
    if ratio <= 0:
        return None
    if kind == "speedup>=":
        return 1 / ratio >= x
    raise ValueError(f"unknown goal kind {kind!r}")


def row(
    work: str,
    anchor: str | None,
    anchor_s: float | None,
    ours_s: float | None,
    goal: Any = None,
    peak_mb: float | None = None,
    note: str = "",
    ratio: float | None = None,
) -> dict[str, Any]:
    """Record one row. `ratio` defaults to ours_s / anchor_s; pass it where the compared
    figures are not the two times shown (an overhead over a third time, say)."""
    if ratio is None and anchor_s and ours_s is not None:
        ratio = ours_s / anchor_s
    r = {
        "work": work,
        "anchor": anchor,
        "anchor_s": anchor_s,
        "treetool_s": ours_s,
        "ratio": ratio,
        "peak_mb": peak_mb,
        "goal": goal_text(goal),
        "goal_spec": list(goal) if goal else None,
        "holds": holds(goal, ratio, ours_s, peak_mb),
        "note": note,
    }
    ROWS.append(r)
    return r


def peak_mb_self() -> float:
    """This process's peak RSS so far, in MB (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def add_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--rows-json", metavar="FILE", help="also write this run's table rows as JSON (run_all)"
    )


def dump(path: str | None) -> None:
    """Write the rows recorded so far to `path` (nothing when it is None)."""
    if path:
        with open(path, "w") as f:
            json.dump({"script": sys.argv[0], "rows": ROWS}, f, indent=1)
