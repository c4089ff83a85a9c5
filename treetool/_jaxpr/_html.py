"""HTML of a `JaxprView`: inputs and outputs with their pytree paths, equations foldable by depth.

Each equation is one line, as in the terminal (`l:f32[4,5] = dot_general[…] a i  ← .args[0]…
mlp.py:12 (loss)`); an equation that holds sub-jaxprs (jit, scan, cond, custom_jvp…) is a
`<details>`, open while its nesting level is above `depth`. Past `width` equations in one
jaxpr, the rest sit in a closed `… N more equations` fold, while the equation budget lasts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treetool._jaxpr._rich import _paths_read, _value_text, counts_text
from treetool._lowering._html_base import PATH_LIMIT, clip, dtype_class, esc, wrap
from treetool._lowering._labels import fmt_bytes, fmt_count

if TYPE_CHECKING:  # the result module imports this one, never the other way round
    from treetool._jaxpr._view import Equation, JaxprView, Scope

__all__ = ["jaxpr_html"]

#: equations drawn per view (open or folded away); past it, `… N more equations` rows only
EQUATIONS = 3000


def _type(ty: str) -> str:
    return f'<span class="tt-ty {dtype_class(ty.split("[", 1)[0])}">{esc(ty)}</span>'


def _var(view: JaxprView, atom: Any, *, typed: bool) -> str:
    name = esc(view.name_of(atom))
    if hasattr(atom, "val"):
        return f'<span class="tt-lit">{name}</span>'
    if not typed:
        return name
    return f'<span class="tt-v">{name}</span>:{_type(view.type_of(atom))}'


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' if n != 1 else ''}"


class _JaxprHtml:
    def __init__(self, view: JaxprView, depth: int, width: int) -> None:
        self.view = view
        self.depth = depth
        self.width = max(width, 1)
        self.budget = EQUATIONS

    def eqn(self, eq: Equation) -> str:
        v = self.view
        out = ['<span class="tt-eq">']
        outs = eq.eqn.outvars
        out.append(" ".join(_var(v, x, typed=True) for x in outs))
        if outs:
            out.append(" = ")
        out.append(f'<span class="tt-prim">{esc(eq.primitive)}</span>')
        shown = eq.shown_params
        if shown:
            params = " ".join(f"{k}={p}" for k, p in shown.items())
            out.append(f'<span class="tt-par">[{esc(params)}]</span>')
        for x in eq.eqn.invars:
            out.append(" " + _var(v, x, typed=False))
        paths = _paths_read(v, eq)
        if paths:
            out.append(
                f' <span class="tt-dim">←</span> <span class="tt-path">{esc(", ".join(paths))}</span>'
            )
        cb = eq.callback
        if cb:
            out.append(f' <span class="tt-sub">calls {esc(cb)}</span>')
        loc = eq.location
        if loc:
            out.append(f' <span class="tt-loc">{esc(loc)}</span>')
        out.append("</span>")
        return "".join(out)

    def scope_head(self, scope: Scope) -> str:
        v = self.view
        ins = " ".join(_var(v, x, typed=True) for x in (*scope.constvars, *scope.invars))
        outs = " ".join(_var(v, x, typed=False) for x in scope.outvars)
        n = len(scope.equations)
        return (
            f'<span class="tt-sub">{esc(scope.label or "jaxpr")}</span> ({ins}) → ({outs})'
            f' <span class="tt-m">{_plural(n, "equation")}</span>'
        )

    @staticmethod
    def scope_brief(scope: Scope) -> str:
        n = scope.num_equations()
        counts = f": {counts_text(scope.counts())}" if n else ""
        return f'<span class="tt-sub">{esc(scope.label)}</span><span class="tt-m">: {_plural(n, "equation")}{esc(counts)}</span>'

    def fill(self, scope: Scope, level: int, out: list[str]) -> None:
        eqns = scope.equations
        first = eqns[: self.width]
        self._eqns(first, level, out)
        rest = eqns[len(first) :]
        if not rest:
            return
        counts: dict[str, int] = {}
        for eq in rest:
            counts[eq.primitive] = counts.get(eq.primitive, 0) + 1
        more = f"… {len(rest):,} more equations: {counts_text(counts)}"
        if self.budget <= 0:
            out.append(f'<div class="tt-more">{esc(more)}</div>')
            return
        out.append(f'<details><summary class="tt-more">{esc(more)}</summary><div class="tt-c">')
        self._eqns(rest, level, out)
        out.append("</div></details>")

    def _eqns(self, eqns: list[Equation], level: int, out: list[str]) -> None:
        for i, eq in enumerate(eqns):
            if self.budget <= 0:
                left = eqns[i:]
                out.append(f'<div class="tt-more">… {len(left):,} more equations</div>')
                return
            self.budget -= 1
            line = self.eqn(eq)
            if not eq.children:
                out.append(f'<div class="tt-l">{line}</div>')
                continue
            is_open = level < self.depth
            if not is_open:
                line += "".join(" " + self.scope_brief(c) for c in eq.children)
            out.append(
                f'<details{" open" if is_open else ""}><summary>{line}</summary><div class="tt-c">'
            )
            for child in eq.children:
                out.append(f"<details open><summary>{self.scope_head(child)}</summary>")
                out.append('<div class="tt-c">')
                self.fill(child, level + 1, out)
                out.append("</div></details>")
            out.append("</div></details>")

    def io_table(self, title: str, rows: list[tuple[Any, Any]]) -> str:
        v = self.view
        out = [
            f'<details open><summary class="tt-sec">{esc(title)} '
            f'<span class="tt-m">{len(rows):,}</span></summary><div class="tt-c">'
            '<table class="tt-tab"><tbody>'
        ]
        for path, var in rows:
            out.append(f"<tr><td>{_var(v, var, typed=False)}</td><td>{_type(v.type_of(var))}</td>")
            if path is not None:
                p = esc(clip(str(path), PATH_LIMIT))
                out.append(f'<td><span class="tt-path tt-k" title="{p}">{p}</span></td>')
            out.append("</tr>")
        out.append("</tbody></table></div></details>")
        return "".join(out)

    def html(self) -> str:
        v = self.view
        ni, no, ne = len(v.inputs), len(v.outputs), len(v.equations)
        name = f"<b>{esc(v.name)}</b>" if v.name else ""
        out = [
            f'<div class="tt-head"><span class="tt-t tt-root">jaxpr</span>{name}'
            f'<span class="tt-m">{_plural(ni, "input")} → {_plural(no, "output")}, '
            f"{_plural(ne, 'equation')}</span></div>"
        ]
        if v.inputs:
            out.append(self.io_table("inputs", v.inputs))
        if v.outputs:
            out.append(self.io_table("outputs", v.outputs))
        if v.static:
            out.append(
                '<details open><summary class="tt-sec">static (baked into the trace)</summary>'
                '<div class="tt-c"><table class="tt-tab"><tbody>'
            )
            for p, value in v.static:
                out.append(
                    f'<tr><td><span class="tt-path">{esc(p)}</span></td>'
                    f'<td class="tt-dim">{esc(_value_text(value))}</td></tr>'
                )
            out.append("</tbody></table></div></details>")
        if v.consts:
            out.append(self.io_table("consts", [(None, c) for c, _ in v.consts]))
        out.append(
            '<details open><summary class="tt-sec">equations '
            f'<span class="tt-m">{ne:,}</span></summary><div class="tt-c">'
        )
        self.fill(v.top, 1, out)
        out.append("</div></details>")
        out.append(self.totals())
        return "".join(out)

    def totals(self) -> str:
        v = self.view
        n = len(v.equations)
        text = _plural(n, "equation") + (f": {counts_text(v.counts(), limit=8)}" if n else "")
        out = f'<div class="tt-sec">totals <span class="tt-m">{esc(text)}</span>'
        c = v.cached_cost  # never lowers while drawing; `v.cost` computes it
        if c is not None:
            parts = []
            if c.flops is not None:
                parts.append(f"{fmt_count(round(c.flops))} FLOPs")
            if c.transcendentals:
                parts.append(_plural(round(c.transcendentals), "transcendental"))
            if c.bytes_accessed is not None:
                parts.append(f"{fmt_bytes(round(c.bytes_accessed))} accessed")
            if parts:
                out += f'<span class="tt-m">(XLA: {esc(", ".join(parts))})</span>'
        return out + "</div>"


def jaxpr_html(view: JaxprView, *, depth: int = 3, width: int = 20) -> str:
    """The HTML fragment of a JaxprView (see `treetool._display.to_html`).

    Example:
        >>> import jax.numpy as jnp, treetool as tt
        >>> page = jaxpr_html(tt.jaxpr(lambda p: jnp.sin(p["x"]), {"x": jnp.ones(3)}))
        >>> ".args[0][&#x27;x&#x27;]" in page and "sin" in page
        True
    """
    return wrap("jaxpr", _JaxprHtml(view, depth, width).html())
