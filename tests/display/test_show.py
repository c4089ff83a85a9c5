"""`tt.show`: environment detection and the three ways to draw (text, HTML, the TUI in a pty)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
import types

import numpy as np
import pytest

import treetool as tt
from treetool._display._show import environment

TREE = {"w": np.zeros((2, 3), np.float32), "cfg": {"name": "mlp"}}


def test_environment_under_pytest_is_text(monkeypatch):
    monkeypatch.delenv("TREETOOL_SHOW", raising=False)
    assert environment() == "text"


@pytest.mark.parametrize("mode", ["html", "tui", "text"])
def test_environment_override(monkeypatch, mode):
    monkeypatch.setenv("TREETOOL_SHOW", mode)
    assert environment() == mode


def test_environment_ignores_unknown_override(monkeypatch):
    monkeypatch.setenv("TREETOOL_SHOW", "pdf")
    assert environment() == "text"


def test_show_text_prints_the_tree(capsys):
    tt.show(TREE, mode="text")
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "dict[2]  6 params · 24 B",
        "├── ['cfg']  dict[1]",
        "│   └── ['name']  'mlp'",
        "└── ['w']  f32[2,3]  6 params · 24 B",
    ]


def test_show_text_is_the_default_here(capsys, monkeypatch):
    monkeypatch.delenv("TREETOOL_SHOW", raising=False)
    tt.show(TREE, depth=1)
    assert capsys.readouterr().out.splitlines()[0] == "dict[2]  6 params · 24 B"


def test_show_other_draws_the_diff(capsys):
    b = {"w": np.ones((2, 3), np.float32), "cfg": {"name": "mlp", "act": "relu"}}
    tt.show(TREE, other=b, mode="text")
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "2 changes  +1 added  ~1 changed (1 value)"
    assert "+ ['act']" in out and "~ ['w']" in out


def test_show_html_outside_a_kernel_prints_the_fragment(capsys):
    tt.show(TREE, mode="html")
    out = capsys.readouterr().out
    assert out.startswith('<div class="treetool"')
    assert "f32[2,3]" in out
    assert "&#x27;w&#x27;" in out or "&#39;w&#39;" in out  # the key, escaped


def test_show_rejects_unknown_mode():
    with pytest.raises(ValueError, match="mode must be one of html, tui, text, got 'gui'"):
        tt.show(TREE, mode="gui")


def test_summary_in_tui_mode_prints(capsys):
    # a Summary has no TUI of its own: it prints even when the TUI is asked for
    tt.show(tt.summary(TREE), mode="tui")
    assert "total" in capsys.readouterr().out


def test_show_and_render_stay_functions_after_importing_their_modules():
    import treetool._display._render as render_module
    import treetool._display._show as show_module

    assert isinstance(tt.show, types.FunctionType) and tt.show is show_module.show
    assert isinstance(tt.render, types.FunctionType) and tt.render is render_module.render


def test_repr_mimebundle_has_a_text_fallback():
    bundle = tt.view(TREE)._repr_mimebundle_()
    assert bundle["text/plain"].splitlines()[0] == "dict[2]  6 params · 24 B"
    assert bundle["text/html"].startswith('<div class="treetool"')
    assert tt.view(TREE)._repr_mimebundle_(include=["text/plain"]).keys() == {"text/plain"}
    assert tt.view(TREE)._repr_mimebundle_(exclude=["text/html"]).keys() == {"text/plain"}


@pytest.mark.parametrize(
    "make",
    [
        lambda: tt.diff({"a": 1.0}, {"a": 2.0}),
        lambda: tt.summary(TREE),
        lambda: tt.placement(TREE),
    ],
    ids=["TreeDiff", "Summary", "Placement"],
)
def test_result_objects_have_html_reprs(make):
    obj = make()
    html = obj._repr_html_()
    assert html.startswith('<div class="treetool"')
    assert obj._repr_mimebundle_()["text/plain"].strip()


# --- the TUI, in a real pseudo-terminal -----------------------------------------------------

_INTERACTIVE = """
import sys
sys.ps1 = ">>> "  # what the python prompt sets: an interactive session
import numpy as np
import treetool as tt
tt.show({"weights": np.zeros((2, 3), np.float32)}, title="params")
print("SHOW RETURNED")
"""


def _read_until(fd: int, marker: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    return seen


_IPYTHON = (
    "import numpy as np, treetool as tt\n"
    "from treetool._display._show import environment\n"
    "print('ENV', environment())\n"
    "tt.show({'weights': np.zeros((2, 3), np.float32)})\n"
    "print('SHOW RETURNED')\n"
)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
@pytest.mark.parametrize(
    "argv",
    [
        [sys.executable, "-c", _INTERACTIVE],
        [sys.executable, "-m", "IPython", "--no-banner", "--colors=NoColor", "-c", _IPYTHON],
    ],
    ids=["python", "ipython"],
)
@pytest.mark.slow
def test_show_in_an_interactive_terminal_opens_the_tui_and_returns_on_quit(argv):
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    env.pop("TREETOOL_SHOW", None)
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    try:
        screen = _read_until(master, b"weights", timeout=60)
        assert b"weights" in screen, screen[-2000:]  # the app drew the tree
        if "IPython" in argv:
            assert b"ENV tui" in screen  # a terminal IPython shell is not a notebook kernel
        assert b"SHOW RETURNED" not in screen  # and show() is still running
        os.write(master, b"q")
        after = _read_until(master, b"SHOW RETURNED", timeout=30)
        assert b"SHOW RETURNED" in after, after[-2000:]
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
