"""`treetool diff A B` with a remote side reads both sides at once: the same answer, notes
and error lines as reading them one after the other, whichever side finishes first.

Side A is served with a 50 ms answer per request and B at once, so B's read ends first; the
output must still be the sequential one (A's notes before B's; A's error line when both fail).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest
from conftest import cli_on_terminal
from storage_servers import HttpServer

import treetool.cli


class Marker:
    """A class the safe reader does not run: each side's read gives a note naming it."""

    def __init__(self, tag: str) -> None:
        self.tag = tag


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = str(tmp_path_factory.mktemp("sides"))
    a = {f"layer_{i}": {"w": np.full(6000, i, np.float32), "step": i} for i in range(6)}
    a["marker"] = Marker("x")
    b = pickle.loads(pickle.dumps(a))
    b["layer_4"]["w"][17] = -1.0
    for name, tree in (("a.pkl", a), ("b.pkl", b)):
        with open(os.path.join(root, name), "wb") as fh:
            pickle.dump(tree, fh, protocol=4)
    slow, fast = HttpServer(root, latency=0.05), HttpServer(root)
    yield root, slow, fast
    slow.stop()
    fast.stop()


def _cli(*args: str, cwd: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": cwd, "TMPDIR": cwd}
    return subprocess.run(
        [sys.executable, "-m", "treetool.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


def _note(spec: str) -> str:
    return (
        f"treetool: note: {spec}: not executed (shown as opaque placeholders): "
        f"{Marker.__module__}.Marker; pass --trust to run the file's code"
    )


def test_concurrent_sides_give_the_sequential_answer_and_notes_in_order(
    sides: Any, tmp_path: Any
) -> None:
    root, slow, fast = sides
    local = _cli("diff", "--json", f"{root}/a.pkl", f"{root}/b.pkl", cwd=str(tmp_path))
    assert local.returncode == 1, local.stderr
    a, b = f"{slow.url}/a.pkl", f"{fast.url}/b.pkl"
    remote = _cli("diff", "--json", a, b, cwd=str(tmp_path))
    assert remote.returncode == 1, remote.stderr
    assert remote.stdout == local.stdout
    changes = json.loads(remote.stdout)["changes"]
    assert [(c["path"], c["kind"]) for c in changes] == [("['layer_4']['w']", "value")]
    assert remote.stderr.splitlines() == [_note(a), _note(b)]  # A's first, though B ended first
    mixed = _cli("diff", "--json", a, f"{root}/b.pkl", cwd=str(tmp_path))  # one side local
    assert (mixed.returncode, mixed.stdout) == (1, local.stdout)
    assert mixed.stderr.splitlines() == [_note(a), _note(f"{root}/b.pkl")]


@pytest.mark.parametrize(
    ("a_name", "b_name", "wins"),
    [
        ("nope_a.pkl", "b.pkl", "a"),  # A fails (last: its server is slow), B reads
        ("a.pkl", "nope_b.pkl", "b"),  # B fails at once while A reads on
        ("nope_a.pkl", "nope_b.pkl", "a"),  # both fail, B first: A's line, as read in order
    ],
)
def test_a_failing_side_gives_the_sequential_error_line(
    sides: Any, tmp_path: Any, a_name: str, b_name: str, wins: str
) -> None:
    _, slow, fast = sides
    a, b = f"{slow.url}/{a_name}", f"{fast.url}/{b_name}"
    out = _cli("diff", a, b, cwd=str(tmp_path))
    assert out.returncode == 2
    failed = a if wins == "a" else b
    lines = [_note(a)] if wins == "b" else []  # A read: its note, as the sequential read says
    lines.append(f"treetool: error: {failed}: no such file (HTTP 404)")
    assert out.stderr.splitlines() == lines
    assert out.stdout == ""


def test_no_thread_is_left_after_an_error(
    sides: Any, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In one process: A fails, B (a read still under way) is stopped and joined; a diff
    that succeeds leaves no thread either, and its sides were read at once."""
    _, slow, fast = sides
    fast.log.clear()
    rc = treetool.cli.main(["diff", f"{fast.url}/nope_a.pkl", f"{slow.url}/b.pkl"])
    assert rc == 2
    err = capsys.readouterr().err
    assert err == f"treetool: error: {fast.url}/nope_a.pkl: no such file (HTTP 404)\n"
    assert [t.name for t in threading.enumerate() if t.name.startswith("treetool-diff")] == []
    # the sides are read at once: B's first request comes while A's read is under way
    slow.log.clear()
    fast.log.clear()
    a_seen: list[int] = []  # how many of A's requests had come when each of B's came
    add = fast.log.add
    monkeypatch.setattr(fast.log, "add", lambda r: (a_seen.append(slow.log.count), add(r)))
    rc = treetool.cli.main(["diff", f"{slow.url}/a.pkl", f"{fast.url}/b.pkl"])
    assert rc == 1
    # read one after the other, A's 5 structure requests would all have come first
    assert a_seen[0] <= 1, a_seen
    assert [t.name for t in threading.enumerate() if t.name.startswith("treetool-diff")] == []


def test_jax_hook_is_armed_once_by_threads_at_once() -> None:
    """Reads started at once in several threads arm one jax import hook, which registers
    `Opaque` once when jax is imported and leaves `sys.meta_path` as it found it."""
    code = """
import sys, threading
from treetool.io import _opaque as o
o._remove_hook(); o._fired = False  # as before the first read
before = list(sys.meta_path)
barrier = threading.Barrier(8)
def go():
    barrier.wait()
    o.ensure_jax_registration()
threads = [threading.Thread(target=go) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
hooks = [h for h in sys.meta_path if type(h).__name__ == "_JaxImportHook"]
print(len(hooks), "jax" in sys.modules)
import jax
print(o._registered, [h for h in sys.meta_path if type(h).__name__ == "_JaxImportHook"])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["1 False", "True []"]


def test_ctrl_c_while_a_side_hangs_exits_130(
    sides: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT while side A waits on a server that never answers: exit 130, nothing printed,
    without waiting for the request's timeout."""
    import signal

    _, _, fast = sides
    hanging = threading.Event()
    add = fast.log.add

    def logged(r: Any) -> None:
        add(r)
        if r.path.startswith("/hang/"):
            hanging.set()

    monkeypatch.setattr(fast.log, "add", logged)
    env = {**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    env["TREETOOL_REMOTE_TIMEOUT"] = "60"  # the interrupt, not a timeout, ends it
    a, b = f"{fast.url}/hang/a.pkl", f"{fast.url}/b.pkl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "treetool.cli", "diff", a, b],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(tmp_path),
    )
    try:
        assert hanging.wait(30)  # side A's request has come, and gets no answer
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)  # a guard against a hang, not a timing
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (130, "", "")


def test_one_progress_line_for_both_sides_on_a_terminal(sides: Any, tmp_path: Any) -> None:
    """On a terminal, the two sides read at once share one progress line (never two lines
    redrawn over each other); the notes come after it, A's first."""
    _, slow, fast = sides
    a, b = f"{slow.url}/a.pkl", f"{fast.url}/b.pkl"
    env = {**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    code, _, terminal = cli_on_terminal("diff", a, b, env=env, cwd=str(tmp_path))
    assert code == 1
    err = terminal.decode()
    plain = err.replace("\x1b[2K", "")  # the progress line's erase-line code
    drawn = [part for part in plain.split("\r") if part.startswith("reading")]
    assert drawn and all(part.startswith("reading a.pkl + b.pkl · ") for part in drawn)
    notes = [line.strip("\r") for line in plain.splitlines() if "note:" in line]
    assert notes == [_note(a), _note(b)]
