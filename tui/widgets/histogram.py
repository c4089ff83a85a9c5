"""A histogram drawn with eighth-block characters, as rich Text."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

__all__ = ["histogram_text"]

_BLOCKS = " ▁▂▃▄▅▆▇█"


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def histogram_text(
    counts: Sequence[int], edges: Sequence[float], *, height: int = 5, style: str = "cyan"
) -> Text:
    """Vertical bars, one column per bin, `height` rows tall, with the range underneath.

    Example:
        >>> print(histogram_text([1, 2, 4, 8, 3, 0], [0, 1, 2, 3, 4, 5, 6], height=2).plain)
           █
        ▂▄██▆
        0    6
    """
    top = max(counts) if counts else 0
    out = Text()
    for row in range(height - 1, -1, -1):
        line = []
        for c in counts:
            level = 0 if top == 0 else c / top * height * 8
            eighths = round(level) - row * 8
            line.append(_BLOCKS[max(0, min(8, eighths))])
        out.append("".join(line), style=style)
        out.append("\n")
    lo, hi = _fmt(edges[0]), _fmt(edges[-1])
    gap = max(1, len(counts) - len(lo) - len(hi))
    out.append(lo + " " * gap + hi, style="dim")
    return out
