"""`treetool inspect` in a real terminal (a pty) on a safetensors file of hostile tensor names.

The app must paint, fill its details pane (whose "largest children" table once parsed a
tensor named `[/oops]` as markup and took the app down), show every name escaped, send none of the file's escape sequences to the terminal (no window
title, no clipboard write), write no file, and quit on `q` with exit code 0.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time

from hostile.hostile_names import NAMES, SHOWN, write_safetensors


def _run_in_pty(args: list[str], cwd, *, until: bytes, keys: bytes, timeout: float = 60):
    """Run the command on a 120x40 pty; once `until` is on screen, type `keys`; return
    (exit code, every byte the app wrote)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
    env.update(TERM="xterm-256color", JAX_PLATFORMS="cpu", HOME=str(cwd), TMPDIR=str(cwd))
    proc = subprocess.Popen(
        [sys.executable, "-m", "treetool.cli", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    out = b""
    typed = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the app exited and closed the pty
                break
            if not chunk:
                break
            out += chunk
            if not typed and until in out:
                os.write(master, keys)
                typed = True
        return proc.wait(timeout=20), out, typed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_inspect_paints_hostile_names_escaped_and_quits(tmp_path):
    click = tmp_path / "clicked"
    write_safetensors(tmp_path / "names.safetensors", click)
    rc, out, typed = _run_in_pty(
        ["inspect", "names.safetensors"], tmp_path, until=b"largest children", keys=b"q"
    )
    assert typed, f"the app never showed its details pane: {out[-2000:]!r}"
    assert rc == 0, out[-2000:]
    for n in NAMES:
        if "\x1b" in n or "\x9b" in n:  # the attack itself never reaches the terminal...
            assert n.encode() not in out, n
        assert SHOWN[n].encode() in out, n  # ...its escaped form is what is shown
    assert b"\x1b]52;" not in out  # no clipboard write
    assert b"\x1b]0;pwned" not in out  # no window title
    assert b"\xe2\x80\xae" not in out  # no raw U+202E
    assert not click.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["names.safetensors"]
