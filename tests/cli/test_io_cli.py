"""`treetool` on checkpoint files, as a real subprocess: safe by default, one-line errors."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from cli_runner import treetool

EVIL = b"\x80\x04\x8c\x05posix\x8c\x06system\x93\x8c\x05touch\x8c\x06CANARY\x86R."


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return treetool(*args, cwd=cwd, columns=None)


@pytest.fixture
def files(tmp_path):
    tree = {"params": {"w": np.ones((2, 3), np.float32), "b": np.zeros(3)}, "step": 3}
    (tmp_path / "ok.pkl").write_bytes(pickle.dumps(tree))
    np.savez(tmp_path / "a.npz", w=np.arange(6, dtype=np.float32).reshape(2, 3))
    np.savez(tmp_path / "b.npz", w=np.arange(6, dtype=np.float32).reshape(2, 3) + 1)
    (tmp_path / "evil.pkl").write_bytes(
        b"\x80\x04}\x8c\x06params}\x8c\x01w"
        + pickle.dumps(np.ones(2), protocol=4)[2:-1]
        + b"s\x8c\x04hook"
        + b"\x8c\x05posix\x8c\x06system\x93\x8c\x17touch CANARY_FROM_CLI_T\x85Rss."
    )
    (tmp_path / "empty.pkl").write_bytes(b"")
    data = (tmp_path / "ok.pkl").read_bytes()
    (tmp_path / "trunc.pkl").write_bytes(data[: len(data) - 30])
    return tmp_path


def test_inspect_malicious_names_the_global(files):
    r = run("inspect", "evil.pkl", "--no-tui", cwd=files)
    assert r.returncode == 0, r.stderr
    assert not (files / "CANARY_FROM_CLI_T").exists()
    assert r.stderr.strip() == (
        "treetool: note: evil.pkl: not executed (shown as opaque placeholders): posix.system; "
        "pass --trust to run the file's code"
    )
    assert "['hook']" in r.stdout and "system" in r.stdout


def test_inspect_json(files):
    r = run("inspect", str(files / "ok.pkl"), "--json")
    assert r.returncode == 0 and r.stderr == ""
    out = json.loads(r.stdout)
    assert out["format"] == "pickle"
    assert [(x["path"], x["shape"], x["dtype"]) for x in out["leaves"]] == [
        ("['params']['b']", [3], "float64"),
        ("['params']['w']", [2, 3], "float32"),
        ("['step']", None, None),
    ]


def test_ls_and_get_on_npz(files):
    r = run("ls", str(files / "a.npz"))
    assert r.returncode == 0 and r.stdout == "['w']\t[2, 3]\tfloat32\n"
    r = run("get", str(files / "a.npz"), "w", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"] == "['w']"


def test_diff_files(files):
    r = run("diff", str(files / "a.npz"), str(files / "b.npz"))
    assert r.returncode == 1
    assert "['w']" in r.stdout


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("empty.pkl", "empty.pkl: empty file"),
        ("trunc.pkl", "trunc.pkl: truncated pickle"),
        ("missing.pkl", "missing.pkl: no such file or directory"),
    ],
)
def test_errors_are_one_line(files, name, message):
    r = run("inspect", str(files / name), "--json")
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("treetool: error: ") and message in lines[0]


def test_partial(files):
    r = run("inspect", str(files / "trunc.pkl"), "--json", "--partial")
    assert r.returncode == 0
    assert r.stderr.startswith("treetool: warning: ") and "truncated pickle" in r.stderr
    assert json.loads(r.stdout)["format"] == "pickle"


def test_trust_runs_the_file(files):
    r = run("inspect", "evil.pkl", "--json", "--trust", cwd=files)
    assert r.returncode in (0, 2)
    assert os.path.exists(files / "CANARY_FROM_CLI_T")


def test_output_into_a_pipe_that_closes_early(tmp_path):
    """`treetool ls FILE | head -1`: the first line, no traceback, no 'Exception ignored'."""
    f = tmp_path / "many.pkl"
    with open(f, "wb") as fh:
        pickle.dump({f"p{i:05d}": np.zeros(2, np.float32) for i in range(20_000)}, fh)
    p = subprocess.Popen(
        [sys.executable, "-m", "treetool.cli", "ls", str(f)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = p.stdout.readline()
    p.stdout.close()  # what `head -1` does after one line
    with p.stderr:
        err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0
    assert first.decode().startswith("['p00000']\t[2]\tfloat32")
    assert err == ""


def test_json_written_to_a_file_is_complete(tmp_path):
    """The command exits without freeing what it loaded: its output must still be flushed."""
    f = tmp_path / "many.pkl"
    with open(f, "wb") as fh:
        pickle.dump({f"p{i:05d}": np.zeros(2, np.float32) for i in range(20_000)}, fh)
    out = tmp_path / "out.json"
    with open(out, "w") as fh:
        rc = subprocess.run(
            [sys.executable, "-m", "treetool.cli", "inspect", "--json", str(f)], stdout=fh
        ).returncode
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["totals"] == {"leaves": 20_000, "params": 40_000, "bytes": 160_000}
    assert data["leaves"][-1]["path"] == "['p19999']"
