"""How a `Plan` prints (rich): rows folded per repeated block, then what is left over."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from treetool._port._match import _fold
from treetool._text import safe

if TYPE_CHECKING:
    from treetool._port._plan import Plan

__all__ = ["plan_renderable"]


def _t(x: Any, style: str = "") -> Text:
    return Text(safe(str(x)), style=style)


def _dims(shape: Any) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def folded_rows(plan: Plan) -> list[tuple[str, str, str, str, str, str]]:
    """(target, source, transform, source shape, target shape, how) per row, a repeated
    block's rows shown once (`.layers[0..11].w`)."""
    out = []
    seen: set[tuple[str, str, tuple[str, ...]]] = set()
    counts: dict[tuple[str, tuple[str, ...]], list[Any]] = {}
    for r in plan.rows:
        if r.group:
            counts.setdefault((r.group, r.steps), []).append(r)
    for r in plan.rows:
        part = f" @{r.part[0]}:{r.part[1]}/{r.part[2]}" if r.part else ""
        if len(r.sources) > 1:
            src = f"{_fold(list(r.sources))} (stacked {len(r.sources)})"
        else:
            src = r.sources[0]
        target = r.target + part
        if r.group and len(counts[(r.group, r.steps)]) > 1:
            key = (r.group, r.how, r.steps)
            if key in seen:
                continue
            seen.add(key)
            members = counts[(r.group, r.steps)]
            target = r.group + part
            src = _fold([m.sources[0] for m in members])
        out.append(
            (
                target,
                src,
                " ".join(r.steps) or "identity",
                _dims(r.source_shape),
                _dims(r.target_shape),
                r.how,
            )
        )
    return out


def plan_renderable(plan: Plan) -> Any:
    """The plan as a rich renderable."""
    table = Table(title=None, show_edge=False, pad_edge=False, box=None)
    for col in ("target", "source", "transform", "shapes", "how"):
        table.add_column(col, overflow="fold")
    for target, src, steps, s_shape, t_shape, how in folded_rows(plan):
        shapes = s_shape if s_shape == t_shape else f"{s_shape} -> {t_shape}"
        table.add_row(_t(target), _t(src), _t(steps), _t(shapes), _t(how))
    parts: list[Any] = [
        Text(
            f"port plan: {len({r.target for r in plan.rows})} target leaves filled from {safe(plan.source_label)}",
            style="bold",
        ),
        table,
    ]
    for a in plan.ambiguous:
        parts.append(_t(f"ambiguous: {', '.join(a.targets)}", "bold red"))
        parts.append(_t(f"  {a.reason}; candidates:"))
        for c in a.candidates:
            parts.append(_t(f"    {c}"))
    for name, why in plan.dropped.items():
        parts.append(_t(f"dropped: {name} ({why})", "dim"))
    for t in plan.unmatched_target:
        parts.append(_t(f"target not filled: {t}", "red"))
    for s in plan.unmatched_source:
        parts.append(_t(f"source not used: {s}", "red"))
    verdict = (
        "complete: every target leaf filled once, every source entry used or dropped"
        if plan.complete
        else f"incomplete: {len(plan.problems())} problem(s)"
    )
    parts.append(Text(verdict, style="green" if plan.complete else "bold red"))
    return Group(*parts)
