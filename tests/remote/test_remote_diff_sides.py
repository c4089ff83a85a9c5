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
from storage_servers import BUCKET, HttpServer

import treetool.cli
from conftest import cli as _cli
from conftest import cli_on_terminal, s3_env


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
    # started through a launcher that unblocks SIGINT and sets its default action before it
    # becomes the command: a signal mask and an ignored signal survive exec, so whatever this
    # process carries from earlier tests, the command starts as it would from a shell
    launch = (
        "import os, signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
        "signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.executable, [sys.executable, '-m', 'treetool.cli', *sys.argv[1:]])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", launch, "diff", a, b],
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


# --- a failing side stops the other one: local reads check the stop flag too -----------------

#: B's structure: this many small arrays (11 MB of pickle, about half a second to read)
_MANY = 200_000


@pytest.fixture(scope="module")
def stopping(tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> Any:
    """A pickle of `_MANY` arrays, a one-array pickle, a pickle of a list (a side that reads,
    and differs at the root), one of 12 layers of arrays (served by a slow HTTP server), and
    a cut pickle."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hostile"))
    import harness

    root = str(tmp_path_factory.mktemp("stopping"))
    trees = {
        "big.pkl": {f"k{i}": np.full(4, i, np.float32) for i in range(_MANY)},
        "small.pkl": {"k0": np.full(4, 0, np.float32)},
        "list.pkl": [1, 2],
        # remotely, a walk that jumps past 12 payloads: a request each
        "layers.pkl": {
            f"layer_{i}": {"w": np.full(16384, i, np.float32), "b": np.full(8, i, np.float32)}
            for i in range(12)
        },
    }
    for name, tree in trees.items():
        with open(os.path.join(root, name), "wb") as fh:
            pickle.dump(tree, fh, protocol=4)
    # a pickle cut in half: known as a pickle, it fails in its read (in its thread)
    cut = pickle.dumps({"k0": np.full(4, 0, np.float32), "k1": [1, 2, 3]}, protocol=2)
    with open(os.path.join(root, "cut.pkl"), "wb") as fh:
        fh.write(cut[: len(cut) // 2])
    s3_server.client().upload_file(os.path.join(root, "list.pkl"), BUCKET, "stopping/list.pkl")
    slow = HttpServer(root, latency=0.05)
    yield root, slow, harness
    slow.stop()


def test_a_failing_remote_side_stops_the_local_side(
    stopping: Any, s3_server: Any, tmp_path: Any
) -> None:
    """`diff s3://…/missing.pkl big.pkl`: A's one line and exit 2, and B's walk stopped at its
    next batch of items: the command took in (built and mapped) a small share of what reading
    B's structure takes, measured by its peak memory against the same command on a one-array
    B (nothing to read) and on a readable A (B read to its end)."""
    root, _, harness = stopping
    env = s3_env(s3_server)
    missing = f"s3://{BUCKET}/stopping/missing.pkl"
    big = os.path.join(root, "big.pkl")

    def run(a: str, b: str) -> Any:
        return harness.run_cli("diff", a, b, cwd=tmp_path, env=env, timeout=60)

    stopped = run(missing, big)
    harness.assert_contained(stopped, rc=2)
    assert stopped.stderr == (
        f"treetool: error: {missing}: no such object (bucket '{BUCKET}' or its key does not "
        "exist)\n"
    )
    assert stopped.stdout == ""
    nothing = run(missing, os.path.join(root, "small.pkl"))  # the same line, no B to read
    assert (nothing.rc, nothing.stderr) == (2, stopped.stderr)
    whole = run(f"s3://{BUCKET}/stopping/list.pkl", big)  # B read to its end
    assert whole.rc == 1, whole
    assert whole.stdout.splitlines()[-1] == "~ node_type  list[2] → dict[200000]", whole
    read_b = whole.peak_rss - nothing.peak_rss  # B's structure: tens of MB
    assert read_b > 30 << 20, (whole, nothing)
    # before B stopped at its next read, it was read whole: `stopped` took as much as `whole`
    assert stopped.peak_rss - nothing.peak_rss < read_b / 2, (stopped, whole, nothing)


def test_a_failing_local_side_stops_the_remote_side(stopping: Any, tmp_path: Any) -> None:
    """The symmetric case: local A is a cut pickle (its line at once), B a remote pickle of
    12 layers on a slow server, which stops at its next request (counted by the server)."""
    root, slow, harness = stopping
    cut, big = os.path.join(root, "cut.pkl"), f"{slow.url}/layers.pkl"
    slow.log.clear()
    whole = harness.run_cli("ls", big, "**.b", cwd=tmp_path, timeout=60)  # B read to its end
    assert (whole.rc, len(whole.stdout.splitlines())) == (0, 12), whole
    requests_b = slow.log.count
    slow.log.clear()
    stopped = harness.run_cli("diff", cut, big, cwd=tmp_path, timeout=60)
    harness.assert_contained(stopped, rc=2)
    assert stopped.stderr == (
        f"treetool: error: {cut}: truncated pickle: the data ends before STOP (at byte 128)\n"
    ), stopped
    assert requests_b >= 4, requests_b
    assert slow.log.count < requests_b / 2, (slow.log.requests, requests_b)
