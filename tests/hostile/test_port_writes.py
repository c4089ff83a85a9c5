"""`treetool port --write` / `--rules-out` and `Plan.write` against planted links, existing files
and writes that fail midway. Every file is built here, in the test run."""

from __future__ import annotations

import os

import numpy as np
import pytest
from harness import assert_contained, run_cli

import treetool as tt

pytestmark = [
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

F32 = np.float32


def _tree() -> dict:
    return {"a": {"w": np.arange(6, dtype=F32).reshape(2, 3)}, "b": np.ones(3, F32)}


@pytest.fixture
def work(tmp_path):
    tt.save(_tree(), str(tmp_path / "src.safetensors"))
    (tmp_path / "victim.txt").write_bytes(b"precious")
    return tmp_path


def _listing(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n not in ("home", "tmp"))


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--write", "--rules-out"])
def test_cli_planted_link_is_refused_then_replaced_with_force(work, flag):
    out = "out.safetensors" if flag == "--write" else "port.rules"
    (work / out).symlink_to(work / "victim.txt")
    r = run_cli("port", "src.safetensors", "src.safetensors", flag, out, cwd=work)
    assert_contained(r)
    assert (
        r.stderr
        == f"treetool: error: {out}: already exists; not replaced (use --force to replace it)\n"
    )
    assert (work / "victim.txt").read_bytes() == b"precious" and (work / out).is_symlink()
    r = run_cli("port", "src.safetensors", "src.safetensors", flag, out, "--force", cwd=work)
    assert r.rc == 0, str(r)
    assert (work / "victim.txt").read_bytes() == b"precious"
    assert not (work / out).is_symlink()
    if flag == "--write":
        back = tt.load(str(work / out))
        assert np.array_equal(np.asarray(back["a"]["w"]), _tree()["a"]["w"])
    else:
        assert (work / out).read_text(encoding="utf-8").count("<-") >= 2
    assert _listing(work) == sorted([out, "src.safetensors", "victim.txt"])


@pytest.mark.slow
def test_cli_existing_file_refused_before_reading_and_kept(work):
    (work / "out.npz").write_bytes(b"the previous export")
    # the source does not even exist: the refusal comes first, before anything is read
    r = run_cli("port", "missing.safetensors", "src.safetensors", "--write", "out.npz", cwd=work)
    assert_contained(r)
    assert r.stderr == (
        "treetool: error: out.npz: already exists; not replaced (use --force to replace it)\n"
    )
    assert (work / "out.npz").read_bytes() == b"the previous export"


def test_plan_write_refuses_an_existing_file_and_replaces_with_overwrite(work):
    plan = tt.port(str(work / "src.safetensors"), _tree())
    out = work / "out.npz"
    out.write_bytes(b"old")
    with pytest.raises(tt.SaveError) as e:
        plan.write(str(out))
    assert (
        str(e.value) == f"{out}: already exists; not replaced (pass overwrite=True to replace it)"
    )
    assert out.read_bytes() == b"old"
    plan.write(str(out), overwrite=True)
    with np.load(out) as z:
        assert sorted(z.files) == ["['a']['w']", "['b']"]
        assert z["['a']['w']"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert _listing(work) == ["out.npz", "src.safetensors", "victim.txt"]


@pytest.mark.parametrize("ext", [".safetensors", ".npz"])
def test_write_failing_midway_keeps_the_previous_export(work, ext):
    """The source shrinks under the plan (the leaves are read lazily while the file is
    written): the write fails, the previous export stays whole, no temporary file is left."""
    src = work / "src.safetensors"
    plan = tt.port(str(src), _tree())
    out = work / f"out{ext}"
    plan.write(str(out))
    before = out.read_bytes()
    with open(src, "r+b") as fh:  # the data of the last leaf is cut off
        fh.truncate(os.path.getsize(src) - 8)
    with pytest.raises(Exception) as e:
        plan.write(str(out), overwrite=True)
    assert isinstance(e.value, tt.TreetoolError | OSError), repr(e.value)
    assert out.read_bytes() == before
    assert _listing(work) == sorted([f"out{ext}", "src.safetensors", "victim.txt"])


def test_plan_write_through_a_planted_link_leaves_the_target(work):
    plan = tt.port(str(work / "src.safetensors"), _tree())
    out = work / "out.safetensors"
    out.symlink_to(work / "victim.txt")
    plan.write(str(out), overwrite=True)
    assert (work / "victim.txt").read_bytes() == b"precious"
    assert not out.is_symlink()
    assert np.array_equal(np.asarray(tt.load(str(out))["b"]), np.ones(3, F32))
