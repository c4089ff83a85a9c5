"""What matching decides: rows, ambiguities, and the leftovers."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Ambiguity", "Match", "Row"]


@dataclass(frozen=True)
class Row:
    """One target leaf (or one part of it) and what fills it."""

    target: str
    sources: tuple[str, ...]  # one name, or N stacked in order
    steps: tuple[str, ...]  # applied to each source
    source_shape: tuple[int, ...]
    target_shape: tuple[int, ...]
    how: str  # "name", "shape", "convention", "order", "rule", "rule (edited)"
    part: tuple[int, int, int] | None = None  # (axis, i, n): a part of a fused target leaf
    group: str = ""  # the folded block this row belongs to ("" when not repeated)


@dataclass(frozen=True)
class Ambiguity:
    """Target leaves that names and shapes cannot decide between candidates."""

    targets: tuple[str, ...]
    candidates: tuple[str, ...]
    reason: str
    sources: tuple[str, ...] = ()  # the source names the candidates involve
    proposals: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (target, source, steps)


@dataclass
class Match:
    rows: list[Row] = field(default_factory=list)
    ambiguous: list[Ambiguity] = field(default_factory=list)
    unmatched_source: list[str] = field(default_factory=list)
    unmatched_target: list[str] = field(default_factory=list)
