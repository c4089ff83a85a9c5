"""The totals line under the header: leaves, params, bytes, dtypes, devices."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import var
from textual.widgets import Static

from treetool._lowering._labels import dtype_style, fmt_bytes, fmt_count
from treetool._reading._progressive import Progress
from treetool._text import safe
from treetool._tree._model import Aggregates

__all__ = ["TotalsBar", "progress_text", "totals_text"]


def progress_text(progress: Progress) -> Text:
    """The totals line while the file is read.

    Example:
        >>> progress_text(Progress("ckpt.pkl", 0.43, 431_000, True, 2.5)).plain
        'reading ckpt.pkl ━━━━━━━━╺━━━━━━━━━━━ 43% · 431,000 of ~1,002,326 leaves so far · 2.5 s'
        >>> progress_text(Progress("ckpt.pkl", None, None, True, 0.1)).plain
        'reading ckpt.pkl ╺━━━━━━━━━━━━━━━━━━━ · 0.1 s'
    """
    width = 20
    fraction = progress.fraction
    frac = min(max(fraction or 0.0, 0.0), 0.99)
    full = int(frac * width)
    t = Text()
    t.append(f"reading {progress.name} ", style="bold")
    t.append("━" * full, style="magenta")
    t.append(("╺" if full < width else "") + "━" * max(width - full - 1, 0), style="dim")
    if fraction is not None:
        t.append(f" {frac:.0%}")
    leaves = progress.leaves_text()
    if leaves:
        t.append(" · ")
        t.append(leaves)
    t.append(f" · {progress.seconds:.1f} s", style="dim")
    return t


def totals_text(agg: Aggregates | None, devices: dict[str, int] | None) -> Text:
    """`12 leaves · 1,234 params · 4.9 KB · f32×10 i32×2 · cpu:0`.

    Example:
        >>> from collections import Counter
        >>> agg = Aggregates(leaves=3, arrays=3, params=130, nbytes=520, dtypes=Counter(float32=3))
        >>> totals_text(agg, {"host": 3}).plain
        '3 leaves · 130 params · 520 B · f32×3 · host'
    """
    from treetool._leaves._arrays import short_dtype

    t = Text()
    if agg is None:
        t.append("counting…", style="dim italic")
        return t
    t.append(_count(agg.leaves, "leaf", "leaves"), style="bold")
    t.append(" · ")
    t.append(f"{fmt_count(agg.params)} params", style="bold")
    t.append(" · ")
    t.append(fmt_bytes(agg.nbytes), style="bold")
    if agg.dtypes:
        t.append(" · ")
        for n, (dt, c) in enumerate(agg.dtypes.most_common(6)):
            if n:
                t.append(" ")
            t.append(f"{safe(short_dtype(dt))}×{c:,}", style=dtype_style(dt))
        if len(agg.dtypes) > 6:
            t.append(f" +{len(agg.dtypes) - 6}", style="dim")
    if agg.tied:
        t.append(f" · {agg.tied:,} tied", style="yellow")
    if agg.errors:  # nodes whose flatten raised: each shown at its path
        t.append(f" · {_count(agg.errors, 'error', 'errors')}", style="bold red")
    if devices is None:
        t.append(" · devices…", style="dim italic")
    elif devices:
        t.append(" · ")
        names = sorted(devices)
        t.append(safe(", ".join(names[:4])) + (f" +{len(names) - 4}" if len(names) > 4 else ""))
    return t


def _count(n: int, one: str, many: str) -> str:
    """`1 leaf`, `2 leaves`, `1,000 leaves`."""
    return f"{n:,} {one if n == 1 else many}"


class TotalsBar(Static):
    """One line of totals for the whole tree, filled in by the app's workers: `line` (the
    app binds it to its `totals_line`)."""

    DEFAULT_CSS = """
    TotalsBar { height: 1; padding: 0 1; background: $boost; }
    """

    #: what the bar shows: the totals, the progress of a read, a failure
    line: var[Text] = var(Text, init=False)

    def watch_line(self, line: Text) -> None:
        self.update(line)
