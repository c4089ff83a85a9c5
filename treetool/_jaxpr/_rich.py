"""Rich rendering and JSON data of a `JaxprView`: the equation tree, folded by depth.

`JaxprTree` is what `tt.render(view)` and `view.render(depth=..., width=...)` draw: the inputs
with their pytree paths, the outputs, static arguments and consts, then one row per equation
(`l:f32[4,5] = dot_general[…] a i  ← .args[0].layers[0].weight  mlp.py:12 (loss)`) with its
sub-jaxprs as children, and the totals. `to_dict(view)` (defined in `treetool._jaxpr._json`,
below the renderers, and re-exported here) is the same content as JSON-able data, for
`--json`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.text import Text
from rich.tree import Tree

from treetool._jaxpr._json import to_dict as to_dict
from treetool._jaxpr._json import value_text as _value_text
from treetool._lowering._labels import dtype_style, fmt_bytes, fmt_count
from treetool._text import safe

if TYPE_CHECKING:  # the result module imports this one, never the other way round
    from treetool._jaxpr._view import Equation, JaxprView, Scope

__all__ = ["JaxprTree", "counts_text", "eqn_text", "scope_text", "to_dict"]


def _type_style(type_text: str) -> str:
    return dtype_style(type_text.split("[", 1)[0])


def _var(view: JaxprView, atom: Any, t: Text, *, typed: bool) -> None:
    name = view.name_of(atom)
    if hasattr(atom, "val"):
        t.append(name, style="yellow")
        return
    t.append(name, style="bold" if typed else "")
    if typed:
        ty = view.type_of(atom)
        t.append(":")
        t.append(ty, style=_type_style(ty))


def counts_text(counts: dict[str, int], limit: int = 6) -> str:
    """`dot_general ×3, add ×3, sin`: the most common primitives first.

    Example:
        >>> counts_text({"add": 3, "sin": 1, "mul": 2, "exp": 1}, limit=3)
        'add ×3, mul ×2, exp, +1 more'
    """
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [k if n == 1 else f"{k} ×{n}" for k, n in items[:limit]]
    if len(items) > limit:
        parts.append(f"+{len(items) - limit} more")
    return ", ".join(parts)


def _paths_read(view: JaxprView, eq: Equation) -> list[str]:
    out = []
    origin = eq.scope._origin
    for v in eq.eqn.invars:
        if not hasattr(v, "val"):
            p = origin.get(v)
            if p is not None and str(p) not in out:
                out.append(str(p))
    return out


def eqn_text(view: JaxprView, eq: Equation, *, params: bool = True, source: bool = True) -> Text:
    """One equation on one line: `outs = primitive[params] operands  ← paths  file:line`.

    Example:
        >>> import jax.numpy as jnp, treetool as tt
        >>> v = tt.jaxpr(lambda w, x: w @ x, jnp.ones((2, 3)), jnp.ones(3))
        >>> print(eqn_text(v, v.equations[0], params=False, source=False))
        c:f32[2] = dot_general a b  ← .args[0], .args[1]
    """
    t = Text(no_wrap=False)
    outs = eq.eqn.outvars
    for i, v in enumerate(outs):
        if i:
            t.append(" ")
        _var(view, v, t, typed=True)
    if outs:
        t.append(" = ")
    t.append(eq.primitive, style="bold green")
    if params:
        shown = eq.shown_params
        if shown:
            t.append("[", style="dim")
            t.append(" ".join(f"{k}={v}" for k, v in shown.items()), style="dim")
            t.append("]", style="dim")
    for v in eq.eqn.invars:
        t.append(" ")
        _var(view, v, t, typed=False)
    paths = _paths_read(view, eq)
    if paths:
        t.append("  ← ", style="dim")
        t.append(safe(", ".join(paths)), style="cyan")  # paths of a loaded file's tree
    cb = eq.callback
    if cb:
        t.append(f"  calls {cb}", style="magenta")
    if source:
        loc = eq.location
        if loc:
            t.append(f"  {loc}", style="dim italic")
    return t


def scope_text(view: JaxprView, scope: Scope) -> Text:
    """A sub-jaxpr's row: `body_jaxpr (t:f32[] u:f32[]) → (w)  2 equations`.

    Example:
        >>> import jax, jax.numpy as jnp, treetool as tt
        >>> v = tt.jaxpr(lambda x: jax.jit(jnp.sin)(x), jnp.ones(2))
        >>> print(scope_text(v, v.equations[0].children[0]))
        jaxpr (c:f32[2]) → (d)  1 equation
    """
    t = Text()
    t.append(scope.label or "jaxpr", style="bold blue")
    t.append(" (")
    for i, v in enumerate((*scope.constvars, *scope.invars)):
        if i:
            t.append(" ")
        _var(view, v, t, typed=True)
    t.append(") → (")
    for i, v in enumerate(scope.outvars):
        if i:
            t.append(" ")
        _var(view, v, t, typed=False)
    t.append(")")
    n = len(scope.equations)
    t.append(f"  {n} equation{'s' if n != 1 else ''}", style="dim")
    return t


class JaxprTree:
    """A rich renderable of a `JaxprView`.

    Args:
        view: the view to draw.
        depth: levels of jaxprs to open: 1 shows the top-level equations with their sub-jaxprs
            folded into one summary row each; 2 opens those, and so on.
        width: equations shown per jaxpr before `… N more equations` (None: all).
        cost: show XLA's FLOPs and bytes (lowers the jaxpr once, then cached).
        source: show where the user's code made each equation (`model.py:12 (loss)`).

    Example:
        >>> import io, jax, jax.numpy as jnp, treetool as tt
        >>> from rich.console import Console
        >>> v = tt.jaxpr(lambda p: jax.jit(jnp.sin)(p["x"]) * 2.0, {"x": jnp.ones(3)})
        >>> c = Console(width=80, color_system=None, file=io.StringIO())
        >>> c.print(JaxprTree(v, depth=1, cost=False, source=False))
        >>> print(c.file.getvalue(), end="")
        jaxpr <lambda>: 1 input → 1 output, 3 equations
        inputs
          a  f32[3]  .args[0]['x']
        outputs
          e  f32[3]  .out
        equations
        ├── b:f32[3] = jit[name=sin] a  ← .args[0]['x']
        │   └── jaxpr: 1 equation: sin
        └── e:f32[3] = mul b 2.0
        totals  3 equations: jit, mul, sin
    """

    def __init__(
        self,
        view: JaxprView,
        *,
        depth: int = 3,
        width: int | None = 200,
        cost: bool = True,
        source: bool = True,
    ) -> None:
        self.view = view
        self.source = source
        self.depth = depth
        self.width = width
        self.cost = cost

    def _header(self) -> Text:
        v = self.view
        t = Text()
        t.append("jaxpr", style="bold magenta")
        if v.name:
            t.append(f" {v.name}", style="bold")
        ni, no, ne = len(v.inputs), len(v.outputs), len(v.equations)
        t.append(
            f": {ni} input{'s' if ni != 1 else ''} → {no} output{'s' if no != 1 else ''}, "
            f"{ne:,} equation{'s' if ne != 1 else ''}"
        )
        return t

    def _var_rows(self, title: str, rows: list[tuple[Any, Any]]) -> list[Text]:
        out = [Text(title, style="bold")]
        v = self.view
        for path, var in rows:
            t = Text("  ")
            t.append(v.name_of(var), style="bold" if not hasattr(var, "val") else "yellow")
            ty = v.type_of(var)
            t.append("  ")
            t.append(ty, style=_type_style(ty))
            if path is not None:
                t.append("  ")
                t.append(safe(str(path)), style="cyan")
            out.append(t)
        return out

    def _fill(self, tree: Tree, scope: Scope, level: int) -> None:
        v = self.view
        eqns = scope.equations
        shown = eqns if self.width is None else eqns[: self.width]
        for eq in shown:
            node = tree.add(eqn_text(v, eq, source=self.source))
            for child in eq.children:
                if level < self.depth:
                    branch = node.add(scope_text(v, child))
                    self._fill(branch, child, level + 1)
                else:
                    n = child.num_equations()
                    t = Text()
                    t.append(child.label, style="bold blue")
                    t.append(
                        f": {n} equation{'s' if n != 1 else ''}"
                        + (f": {counts_text(child.counts())}" if n else ""),
                        style="dim",
                    )
                    node.add(t)
        rest = len(eqns) - len(shown)
        if rest:
            counts: dict[str, int] = {}
            for eq in eqns[len(shown) :]:
                counts[eq.primitive] = counts.get(eq.primitive, 0) + 1
            tree.add(Text(f"… {rest:,} more equations: {counts_text(counts)}", style="dim italic"))

    def _totals(self) -> Text:
        v = self.view
        t = Text()
        t.append("totals", style="bold")
        n = len(v.equations)
        t.append(f"  {n:,} equation{'s' if n != 1 else ''}")
        if n:
            t.append(f": {counts_text(v.counts(), limit=8)}")
        if self.cost:
            c = v.cost
            if c is not None:
                parts = []
                if c.flops is not None:
                    parts.append(f"{fmt_count(round(c.flops))} FLOPs")
                if c.transcendentals:
                    n = round(c.transcendentals)
                    parts.append(f"{fmt_count(n)} transcendental{'s' if n != 1 else ''}")
                if c.bytes_accessed is not None:
                    parts.append(f"{fmt_bytes(round(c.bytes_accessed))} accessed")
                if parts:
                    t.append("  (XLA: " + ", ".join(parts) + ")", style="dim")
        return t

    def renderables(self) -> list[Any]:
        """The parts, top to bottom: header, inputs, outputs, static, consts, equations, totals."""
        v = self.view
        parts: list[Any] = [self._header()]
        if v.inputs:
            parts.extend(self._var_rows("inputs", v.inputs))
        if v.outputs:
            parts.extend(self._var_rows("outputs", v.outputs))
        if v.static:
            parts.append(Text("static (baked into the trace)", style="bold"))
            for p, value in v.static:
                t = Text("  ")
                t.append(str(p), style="cyan")
                t.append("  ")
                t.append(_value_text(value), style="dim")
                parts.append(t)
        if v.consts:
            parts.extend(self._var_rows("consts", [(None, c) for c, _ in v.consts]))
        tree = Tree(Text("equations", style="bold"), guide_style="dim")
        self._fill(tree, v.top, 1)
        parts.append(tree)
        parts.append(self._totals())
        return parts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Group(*self.renderables())
