"""Checkpoint files whose names attack the terminal, written by the real libraries.

Every name below is a key, an attribute name, a class name, an npz member, a safetensors tensor
or an orbax key in some file: rich markup that would crash (`[/]`) or restyle (`[link=...]`),
a Textual action (`[@click=app.screenshot(...)]`) that one click on a toast would run, escape
sequences that clear the screen, set the window title or write the clipboard (OSC 52), a
newline and a tab that forge `ls` lines, a C1 CSI and a bidi override.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np

#: writes a screenshot into DIR when it is run as a Textual action
CLICK = "[@click=app.screenshot('x.svg','{dir}')]WWW[/]"

NAMES = [
    "[/]",
    "[/oops]",
    "[bold red]x",
    "[link=https://evil.example]x[/link]",
    "\x1b[2J\x1b]0;pwned\x07",
    "\x1b]52;c;cHduZWQ=\x07",
    "a\nb\tc",
    "\x9b31m",
    "\u202eevil",
]

#: how each name must be shown (inside a repr'd key or as an attribute): escaped, literal
SHOWN = {
    "[/]": "[/]",
    "[/oops]": "[/oops]",
    "[bold red]x": "[bold red]x",
    "[link=https://evil.example]x[/link]": "[link=https://evil.example]x[/link]",
    "\x1b[2J\x1b]0;pwned\x07": "\\x1b[2J\\x1b]0;pwned\\x07",
    "\x1b]52;c;cHduZWQ=\x07": "\\x1b]52;c;cHduZWQ=\\x07",
    "a\nb\tc": "a\\nb\\tc",
    "\x9b31m": "\\x9b31m",
    "\u202eevil": "\\u202eevil",
}


def names(click_dir: str | Path) -> list[str]:
    """The hostile names, with the click action pointing into `click_dir`."""
    return [*NAMES, CLICK.format(dir=click_dir)]


def _u(s: str) -> bytes:
    b = s.encode("utf-8", "surrogatepass")
    if len(b) < 256:
        return b"\x8c" + bytes([len(b)]) + b  # SHORT_BINUNICODE
    return b"X" + len(b).to_bytes(4, "little") + b  # BINUNICODE


def write_pickle(path: Path, click_dir: str | Path) -> None:
    """A dict keyed by every name; each value an object of a class `evil<ESC>…mod.<name>`
    (a class no one can import: it stays an inert placeholder) whose attribute of that name
    holds a float32 array, next to an attribute `ok`."""
    arr = pickle.dumps(np.arange(3, dtype=np.float32), protocol=4)[2:-1]  # no PROTO, no STOP
    body = b"}("  # EMPTY_DICT, MARK
    for i, n in enumerate(names(click_dir)):
        cls = _u(f"evil\x1b]0;t\x07mod{i}") + _u(n.replace("\n", "_")) + b"\x93"  # STACK_GLOBAL
        state = b"}(" + _u(n) + arr + _u("ok") + arr + b"u"  # {name: arr, "ok": arr}
        body += _u(n) + cls + b")\x81" + state + b"b"  # EMPTY_TUPLE NEWOBJ, state BUILD
    path.write_bytes(b"\x80\x04" + body + b"u.")  # SETITEMS, STOP


def write_npz(path: Path, click_dir: str | Path) -> None:
    """An npz whose members are named by every name (but the ones with `/`)."""
    np.savez(path, **{n: np.arange(2, dtype=np.float32) for n in names(click_dir) if "/" not in n})


def write_safetensors(path: Path, click_dir: str | Path) -> None:
    """A safetensors file with a tensor of every name."""
    from safetensors.numpy import save_file

    save_file({n: np.arange(2, dtype=np.float32) for n in names(click_dir)}, str(path))


def write_orbax(path: Path, click_dir: str | Path) -> None:
    """An orbax checkpoint (StandardCheckpointer) keyed by every name.

    Saved by a child process: orbax leaves threads behind, and the harness forks its runs.
    """
    code = (
        "import sys, numpy as np, orbax.checkpoint as ocp\n"
        "from hostile_names import names\n"
        "ck = ocp.StandardCheckpointer()\n"
        "ck.save(sys.argv[1], {n: np.arange(3, dtype=np.float32) for n in names(sys.argv[2])})\n"
        "ck.wait_until_finished()\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(Path(__file__).parent)}
    subprocess.run(
        [sys.executable, "-c", code, str(path), str(click_dir)], check=True, env=env, timeout=120
    )
