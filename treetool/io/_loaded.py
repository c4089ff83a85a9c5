"""`Loaded`: what `treetool.io.read` returns (the tree, its format, what was not executed).

It sits below the readers: each `Format` returns one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from treetool._public import set_module

__all__ = ["Loaded"]


@set_module("treetool.io")
@dataclass
class Loaded:
    """The result of `read`: the tree, its format, what was not executed, and any error.

    Attributes:
        tree: the loaded pytree.
        format: the detected (or given) format name.
        blocked: sorted class paths of the objects that were not executed (`Opaque` nodes).
        error: with `partial=True`, the error that stopped reading (the tree is what was read
            up to that point); None when the file was read to the end.
        metadata: the file's own metadata where the format has some (safetensors
            `__metadata__`: a dict of strings), else None.
        step: for an orbax CheckpointManager run, the step that was read; else None.
        steps: for an orbax run, all its steps in increasing order; else None.
        facts: what a format knows about the file beyond its tree, by format (`torch`: its
            kind, the `weights_only` report, tied names); else None.

    Example:
        >>> Loaded({"w": 1}, "pickle")
        Loaded(tree={'w': 1}, format='pickle', blocked=[], error=None, metadata=None, step=None, steps=None, facts=None)
    """

    tree: Any
    format: str
    blocked: list[str] = field(default_factory=list)
    error: str | None = None
    metadata: dict[str, Any] | None = None
    step: int | None = None
    steps: list[int] | None = None
    facts: dict[str, Any] | None = None
