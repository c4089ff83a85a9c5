"""What a `treetool` command read (`Target`), its one error (`CliError`) and its exit codes.

The bottom of the CLI: every other `_cli` module may import it, it imports none of them.
What a read found besides the tree (the file's facts, the TUI's note, whether the classes it
did not run were already named on stderr) travels with the tree in its `Target`.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["EXIT_DIFFERENT", "EXIT_ERROR", "EXIT_OK", "CliError", "Target", "console", "keep"]

EXIT_OK, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


class Target:
    """What a command read: the tree, its format, and what the read found besides the tree.

    Attributes:
        tree: the pytree (a checkpoint's tree, a `module:attr` object, a traced jaxpr).
        format: the format name (`"python"` for a live object).
        facts: what the file says about itself: `metadata` (safetensors `__metadata__`),
            `step`/`steps` (orbax runs), a format's own facts (`torch`); empty for none.
        note: the TUI's header line for the classes the read did not execute, or None.
        reported: whether the read already named those classes on stderr.

    A plain class, not a dataclass: `treetool --help` imports this module, and `dataclasses`
    imports `inspect` (tests/project/test_startup_imports.py).

    Example:
        >>> t = Target({"w": 1}, "python")
        >>> t.format, t.facts, t.note, t.reported
        ('python', {}, None, False)
        >>> t
        Target(format='python', facts={}, note=None, reported=False)
    """

    __slots__ = ("facts", "format", "note", "reported", "tree")

    def __init__(
        self,
        tree: Any,
        format: str,
        *,
        facts: dict[str, Any] | None = None,
        note: str | None = None,
        reported: bool = False,
    ) -> None:
        self.tree = tree
        self.format = format
        self.facts: dict[str, Any] = facts if facts is not None else {}
        self.note = note
        self.reported = reported

    def __repr__(self) -> str:
        return (
            f"Target(format={self.format!r}, facts={self.facts!r}, note={self.note!r}, "
            f"reported={self.reported!r})"
        )


#: set by `cli.run`: what a command loaded stays alive until the process ends (see `run`)
_KEEP: list[Any] | None = None


def keep_until_exit() -> None:
    """From now on, `keep` holds what it is given until the process ends (`cli.run`)."""
    global _KEEP
    _KEEP = []


def keep(obj: Any) -> None:
    """Hold `obj` until the process ends, when `cli.run` asked for it (freeing a big tree
    object by object costs a tenth of reading it; the process is ending anyway)."""
    if _KEEP is not None:
        _KEEP.append(obj)


def console(stderr: bool = False) -> Any:
    """A rich console for a command's output: no markup, no emoji codes, the stream's width."""
    from rich.console import Console

    from treetool._lowering._plain import output_width

    stream = sys.stderr if stderr else sys.stdout
    # no markup and no :emoji: codes in plain strings either: file text is never parsed
    return Console(
        stderr=stderr,
        highlight=False,
        soft_wrap=False,
        markup=False,
        emoji=False,
        width=output_width(stream),
    )
