"""An error that ends the app, said in one line: Textual's traceback kept out of the terminal.

Textual ends the app on an unhandled error and, once the terminal is restored, prints the
error's traceback to `App.error_console`. The treetool app gives it a `CrashLog`'s console
instead, which keeps it (and with `TREETOOL_DEBUG` set, prints it to stderr too), and
`CrashLog.line()` is that traceback's last line: `ZeroDivisionError: the handler divided
by zero`. `treetool.tui.run` raises it as
`AppCrashed`, which the CLI prints as one line.
"""

from __future__ import annotations

import io
import os
import re
import sys

from rich.console import Console

__all__ = ["CrashLog", "crash_line"]

#: the longest crash line kept
MAX_LINE = 300
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def crash_line(traceback: str) -> str | None:
    """The last line of a traceback as rich draws it (after its frames' box), unwrapped.

    Example:
        >>> crash_line("╭─ Traceback ─╮\\n│ x = 1 / 0 │\\n╰─────────────╯\\nZeroDivisionError:\\n"
        ...            "division by zero\\n")
        'ZeroDivisionError: division by zero'
        >>> crash_line("") is None
        True
    """
    tail = _ANSI.sub("", traceback).rsplit("╯", 1)[-1]
    line = " ".join(tail.split())
    if not line:
        return None
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"


class _Tee(io.StringIO):
    """Kept here and written to stderr (`TREETOOL_DEBUG`: the whole traceback is shown)."""

    def write(self, s: str) -> int:
        sys.stderr.write(s)
        return super().write(s)

    def isatty(self) -> bool:
        return sys.stderr.isatty()


class CrashLog:
    """Where the app's `error_console` writes."""

    def __init__(self) -> None:
        debug = bool(os.environ.get("TREETOOL_DEBUG"))
        self.text = _Tee() if debug else io.StringIO()
        self.console = Console(
            file=self.text,
            markup=False,
            highlight=False,
            width=None if debug else 10_000,
            color_system="auto" if debug else None,
        )

    def line(self) -> str | None:
        """ "Type: message" of the error that ended the app; None when none did."""
        return crash_line(self.text.getvalue())
