"""Object and inflation bombs: few bytes that make millions of containers, or a deflated
`data.pkl` that inflates to a gigabyte. Every file is built here, in the test run.

Every container or object a pickle makes is charged to the allocation budget (64 MiB + 16 per
file byte; `_safety/_budget.py`), and a deflated record's inflation is charged before it is
inflated: each bomb is one line and exit 2 within 10 s and 1 GiB, or (a few hundred thousand
containers, inside the budget) a summary whose table is capped with one "N more" row.
"""

from __future__ import annotations

import os
import pickle
import zipfile

import numpy as np
import pytest
from harness import assert_contained, run_cli

import treetool as tt
from treetool._summary._summary import MAX_ROWS
from treetool.io._safety._budget import NODE_COST, alloc_allowance

pytestmark = [
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

P4 = b"\x80\x04"


def _many(op: bytes, n: int) -> bytes:
    """A list of `n` empty containers, one opcode byte each, without memo: `[op op ... ]`."""
    return P4 + b"](" + op * n + b"e."


@pytest.mark.parametrize(("op", "n"), [(b"]", 5_000_000), (b"}", 8_000_000), (b"\x8f", 3_000_000)])
def test_millions_of_empty_containers_are_refused_in_one_line(tmp_path, op, n):
    (tmp_path / "bomb.pkl").write_bytes(_many(op, n))
    size = len(_many(op, n))
    for cmd in ("ls", "summary"):
        run = run_cli(cmd, "bomb.pkl", cwd=tmp_path)
        assert_contained(run, max_seconds=10, max_rss=1 << 30)
        assert run.stderr.startswith(
            f"treetool: error: bomb.pkl: the reader would allocate more than "
            f"{alloc_allowance(size):,} bytes for a {size:,}-byte file"
        ), str(run)
        assert ("empty sets" if op == b"\x8f" else "containers and objects made") in run.stderr
    with pytest.raises(tt.LoadError, match=r"empty sets|containers and objects made"):
        tt.load(str(tmp_path / "bomb.pkl"))


def test_the_refusal_comes_at_the_budget_not_before(tmp_path):
    """Charged at NODE_COST bytes each: the reader stops near budget / NODE_COST lists."""
    n = 5_000_000
    data = _many(b"]", n)
    (tmp_path / "bomb.pkl").write_bytes(data)
    with pytest.raises(tt.LoadError) as e:
        tt.load(str(tmp_path / "bomb.pkl"))
    at = int(str(e.value).split("at byte ")[1].split(")")[0])
    made = at - 4  # PROTO 4, EMPTY_LIST, MARK: then one byte per list
    assert (
        alloc_allowance(len(data)) // NODE_COST
        <= made
        < alloc_allowance(len(data)) // NODE_COST + 4096
    )


def test_200k_empty_containers_summary_is_capped_and_fast(tmp_path):
    n = 200_000
    (tmp_path / "c.pkl").write_bytes(_many(b"}", n))
    run = run_cli("summary", "c.pkl", cwd=tmp_path)
    assert_contained(run, rc=0, max_seconds=10, max_rss=1 << 30)
    lines = run.stdout.splitlines()
    assert len(lines) == 1 + MAX_ROWS + 2  # header, the rows, "N more", total
    assert lines[MAX_ROWS].split()[:2] == ["[999]", "dict"]
    assert lines[-2].split()[:3] == ["...", f"{n - MAX_ROWS:,}", "more"]
    assert lines[-1].split()[:2] == ["total", "list"]


def test_summary_more_row_adds_up_the_rest():
    tree = {f"k{i:04d}": np.ones(i % 7 + 1, np.float32) for i in range(1500)}
    s = tt.summary(tree, max_rows=1000)
    assert len(s.rows) == 1000 and s.more_rows == 500
    assert s.more is not None and s.more.path == "... 500 more"
    assert s.more.leaves == 500
    assert s.more.params == sum(i % 7 + 1 for i in range(1000, 1500))
    assert sum(r.params for r in s.rows) + s.more.params == s.total.params
    d = s.to_dict()
    assert d["more"]["rows"] == 500 and d["more"]["leaves"] == 500
    assert str(s).splitlines()[-2].split()[:3] == ["...", "500", "more"]
    assert "... 500 more" in s.__treetool_lower__("html")
    assert tt.summary(tree, max_rows=2000).more is None


def test_real_checkpoint_shapes_stay_inside_the_budget(tmp_path):
    """Many arrays and few containers, dicts of small lists, tuple keys: all read (the budget
    is proportional to the file; these are the benchmarks' shapes, smaller)."""
    n = 300_000
    trees = {
        "arrays": {f"layer{i}": np.full((4,), i, np.float32) for i in range(n)},
        "scalars": {f"k{i}": [i, float(i), f"s{i}", None, True] for i in range(n // 5)},
        "tuple-keys": {(i, f"t{i}"): (i, i + 1) for i in range(n // 2)},
    }
    for name, tree in trees.items():
        p = tmp_path / f"{name}.pkl"
        with open(p, "wb") as fh:
            pickle.dump(tree, fh, protocol=4)
        back = tt.load(str(p))
        assert len(back) == len(tree), name


def test_deflated_data_pkl_past_the_allocation_budget_is_refused_before_inflating(tmp_path):
    """An 18 MB torch zip whose deflated data.pkl inflates to ~1 GiB (within the old inflater
    allowance of 16 MiB + 64 per byte) is refused before it is inflated."""
    p = tmp_path / "inflate.pt"
    size = (1 << 30) - 4096
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("x/data.pkl", "w", force_zip64=True) as f:
            chunk = b"N" * (1 << 24)
            for _ in range(size // len(chunk)):
                f.write(chunk)
            f.write(b"N" * (size % len(chunk) - 1) + b".")
        z.writestr(zipfile.ZipInfo("x/data/0"), os.urandom(17 << 20))
    total = p.stat().st_size
    assert total > 17 << 20 and (16 << 20) + 64 * total > size
    run = run_cli("ls", "inflate.pt", cwd=tmp_path)
    assert_contained(run, max_seconds=10, max_rss=1 << 30)
    assert run.peak_rss < 256 << 20, str(run)
    assert run.stderr == (
        f"treetool: error: inflate.pt[x/data.pkl]: the reader would allocate more than "
        f"{alloc_allowance(total):,} bytes for a {total:,}-byte file (a budget of 64 MiB + 16 "
        f"per file byte) (x/data.pkl inflates to {size:,} bytes); `--partial` shows what fits\n"
    )
