"""Run the `treetool` command on a hostile file and check that it stayed contained.

A hostile file may try to crash the interpreter, exhaust memory or time, write to the terminal or
write files. `run_cli` runs the real command in a subprocess inside a scratch directory (its HOME
and TMPDIR too), caps its address space so a bomb cannot take the machine down, and measures what
it did: exit code, output, wall time, peak resident memory (from `wait4`) and the files it created.
`assert_contained` states the promise: one line `treetool: error: ...` and exit 2 (or the exit
code the caller expects), no control bytes on either stream, bounded time and memory, no new files,
no connection to any host:port but those the command line (or the storage endpoints of its
environment) names, and no secret in any output: every run gets canary AWS credentials in its
environment, and the user info and query values of the URLs in its arguments are secrets too.
Connections are recorded by a `sitecustomize` on the child's path (`_netlog/`), which logs every
TCP connect a Python socket makes (a native client's, obstore's, are counted by the servers).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

#: the address-space cap of the child: a bomb fails to allocate instead of swapping the machine
ADDRESS_SPACE_CAP = 4 << 30

#: canary credentials in every child's environment: none may appear in any output
CANARY_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIACANARYKEY0000001",
    "AWS_SECRET_ACCESS_KEY": "canarySecretAccessKey0000000000000000001",
    "AWS_SESSION_TOKEN": "canarySessionToken00001",
}
#: the environment variables naming storage endpoints a run may connect to
_ENDPOINT_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "STORAGE_EMULATOR_HOST")
_NETLOG = str(Path(__file__).resolve().parent / "_netlog")

_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


@dataclass
class Run:
    """What one run of the command did."""

    args: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss: int  # bytes
    new_files: list[str] = field(default_factory=list)
    timed_out: bool = False
    #: `host:port` of every TCP connection the child made through a Python socket, in order
    connections: list[str] = field(default_factory=list)
    #: the child's environment (canaries and endpoints included)
    env: dict[str, str] = field(default_factory=dict, repr=False)

    def __str__(self) -> str:
        return (
            f"treetool {' '.join(self.args)} -> rc {self.rc} in {self.seconds:.2f} s, "
            f"peak RSS {self.peak_rss / 2**20:.0f} MiB, new files {self.new_files}, "
            f"connections {sorted(set(self.connections))}\n"
            f"--- stdout ---\n{self.stdout[:2000]!r}\n--- stderr ---\n{self.stderr[:2000]!r}"
        )


def _files_under(root: Path, allow: Iterable[Path]) -> set[str]:
    allowed = tuple(str(p.resolve()) + os.sep for p in allow)
    found: set[str] = set()
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            if not (full + os.sep).startswith(allowed) and not full.startswith(allowed):
                found.add(os.path.relpath(full, root))
    return found


#: a small launcher caps the address space, runs `python -m treetool.cli ARGS` as its own child
#: and reports that child's peak RSS (from wait4) on a pipe, then exits as the child did. Two
#: reasons: no `preexec_fn` in the pytest process (that makes subprocess go through os.fork's
#: hooks, where jax, imported by earlier tests, warns: an error in this suite), and a peak RSS
#: that is the command's own (a process started straight from pytest by vfork and exec starts
#: its high-water mark at pytest's size).
_LAUNCH = """
import os, resource, signal, subprocess, sys
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
report = int(sys.argv[1])
child = subprocess.Popen([sys.executable, "-m", "treetool.cli", *sys.argv[2:]])
_, status, usage = os.wait4(child.pid, 0)
os.write(report, str(usage.ru_maxrss * 1024).encode())
os.close(report)
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def run_cli(
    *args: str,
    cwd: str | os.PathLike[str],
    timeout: float = 30,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    allow_writes: Iterable[str | os.PathLike[str]] = (),
) -> Run:
    """Run `python -m treetool.cli ARGS` in `cwd` and measure it.

    HOME and TMPDIR point inside `cwd`, so a file written anywhere a program would normally write
    lands where `new_files` sees it; `allow_writes` names directories whose new files are expected
    (an output directory of `tt.save`, say). The child's address space is capped at 4 GiB.
    """
    root = Path(cwd).resolve()
    (root / "home").mkdir(exist_ok=True)
    (root / "tmp").mkdir(exist_ok=True)
    allow = [Path(p) if Path(p).is_absolute() else root / p for p in allow_writes]
    before = _files_under(root, allow)
    child_env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"COLUMNS", "LINES", "FORCE_COLOR", "TERM", "PYTHONSTARTUP"}
    }
    child_env.update(CANARY_ENV)
    netlog_fd, netlog = tempfile.mkstemp(prefix="treetool-connects-")
    os.close(netlog_fd)
    child_env.update(
        TREETOOL_TEST_CONNECT_LOG=netlog,
        PYTHONPATH=os.pathsep.join(p for p in (_NETLOG, child_env.get("PYTHONPATH")) if p),
        HOME=str(root / "home"),
        TMPDIR=str(root / "tmp"),
        TERM="dumb",
        NO_COLOR="1",
        PYTHONDONTWRITEBYTECODE="1",
        JAX_PLATFORMS="cpu",
    )
    if env:
        child_env.update(env)
    report_r, report_w = os.pipe()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", _LAUNCH.format(cap=ADDRESS_SPACE_CAP), str(report_w), *args],
        pass_fds=(report_w,),
        cwd=root,
        env=child_env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out: dict[str, bytes] = {}

    def _drain(name: str, stream: IO[bytes]) -> None:
        with stream:
            out[name] = stream.read()

    readers = [
        threading.Thread(target=_drain, args=("stdout", proc.stdout), daemon=True),
        threading.Thread(target=_drain, args=("stderr", proc.stderr), daemon=True),
    ]
    for t in readers:
        t.start()
    if stdin is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
    timed_out = threading.Event()

    def _kill() -> None:
        timed_out.set()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, _kill)
    timer.start()
    try:
        _pid, status, _usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
        os.close(report_w)
    with os.fdopen(report_r, "rb") as report:
        peak = int(report.read() or 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join(10)
    proc.wait()
    after = _files_under(root, allow)
    with open(netlog) as fh:
        connections = fh.read().split()
    os.unlink(netlog)
    return Run(
        args=tuple(args),
        rc=proc.returncode,
        stdout=out.get("stdout", b"").decode("utf-8", "replace"),
        stderr=out.get("stderr", b"").decode("utf-8", "replace"),
        seconds=seconds,
        peak_rss=peak,
        new_files=sorted(after - before),
        timed_out=timed_out.is_set(),
        connections=connections,
        env=child_env,
    )


def control_chars(text: str, allow: str = "\n") -> list[str]:
    """The characters of `text` that could drive a terminal: C0 but `allow`, DEL, C1, bidi."""
    bad = []
    for ch in text:
        code = ord(ch)
        control = (code < 0x20 and ch not in allow) or code == 0x7F or 0x80 <= code < 0xA0
        if control or ch in _BIDI or unicodedata.category(ch) == "Cs":
            bad.append(ch)
    return bad


def _host_port(url: str) -> str | None:
    u = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    if u.scheme not in ("http", "https") or not u.hostname:
        return None
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        return None
    return f"{u.hostname}:{port}"


def allowed_hosts(run: Run) -> set[str]:
    """The `host:port`s a run may connect to: those of the http(s) URLs in its arguments and
    of the storage endpoints in its environment."""
    found = {_host_port(a) for a in run.args if "://" in a}
    found |= {_host_port(run.env[v]) for v in _ENDPOINT_VARS if run.env.get(v)}
    return {h for h in found if h}


def secrets_of(run: Run) -> set[str]:
    """What must never be printed: the canary credentials of the environment, and the user
    info and query values of the URLs in the arguments."""
    found = {v for k, v in run.env.items() if k.startswith("AWS_") and "SECRET" in k}
    found |= {run.env[k] for k in CANARY_ENV if run.env.get(k)}
    for a in run.args:
        if "://" not in a:
            continue
        u = urllib.parse.urlsplit(a)
        found |= {x for x in (u.username, u.password) if x}
        found |= {v for _k, v in urllib.parse.parse_qsl(u.query) if v}
    return {x for x in found if len(x) >= 6}  # (short ones would match by chance)


def assert_isolated(run: Run, also: Iterable[str] = ()) -> None:
    """No connection but to the hosts the command line names (`allowed_hosts`, and `also`),
    and no secret (`secrets_of`) in any output."""
    allowed = allowed_hosts(run) | set(also)
    strays = sorted({c for c in run.connections if c not in allowed})
    assert not strays, f"connected to {strays}, allowed {sorted(allowed)}\n{run}"
    for secret in secrets_of(run):
        for name in ("stdout", "stderr"):
            assert secret not in getattr(run, name), f"secret {secret!r} on {name}\n{run}"


def assert_contained(
    run: Run,
    *,
    rc: int | tuple[int, ...] = 2,
    max_seconds: float = 10,
    max_rss: int = 1 << 30,
    ls_fields: bool = False,
) -> None:
    """Assert that a run on a hostile file stayed contained (see the module docstring): the
    limits, then `assert_isolated`.

    `ls_fields=True` is for `treetool ls`, whose stdout separates its three fields by tabs: a tab
    is then allowed on stdout, and every line must have exactly three fields (so a tab that came
    from the file, unescaped, still fails).
    """
    expected = rc if isinstance(rc, tuple) else (rc,)
    assert not run.timed_out, f"timed out\n{run}"
    assert run.rc in expected, f"exit code {run.rc}, expected {expected}\n{run}"
    if run.rc == 2:
        lines = run.stderr.splitlines()
        assert len(lines) == 1, f"expected one error line on stderr\n{run}"
        assert lines[0].startswith("treetool: error: "), f"not a treetool error line\n{run}"
        assert "Traceback" not in run.stderr, str(run)
    if ls_fields:
        for line in run.stdout.splitlines():
            assert line.count("\t") == 2, f"not three tab-separated fields: {line!r}\n{run}"
    for name in ("stdout", "stderr"):
        bad = control_chars(getattr(run, name), "\n\t" if ls_fields and name == "stdout" else "\n")
        assert not bad, f"control characters {bad[:10]!r} on {name}\n{run}"
    assert run.seconds < max_seconds, f"took {run.seconds:.1f} s\n{run}"
    assert run.peak_rss < max_rss, f"peak RSS {run.peak_rss / 2**20:.0f} MiB\n{run}"
    assert not run.new_files, f"files written: {run.new_files}\n{run}"
    assert_isolated(run)
