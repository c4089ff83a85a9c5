"""A `JaxprView` as JSON-able data: `view.to_dict()` and `treetool ... --json`.

The JSON export sits with the core (below the renderers, which re-export `to_dict` from
`treetool._jaxpr._rich`): a result object gives its data without importing a renderer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treetool._jaxpr._scope import Scope, short_location

if TYPE_CHECKING:
    from treetool._jaxpr._view import JaxprView

__all__ = ["to_dict", "value_text"]


def value_text(value: Any, limit: int = 60) -> str:
    """A static leaf in a few words: `<custom_jvp relu>`, `0.5`, `'gelu'`.

    Example:
        >>> value_text(0.5), value_text(print), value_text("x" * 80, 10)
        ('0.5', '<builtin_function_or_method print>', "'xxxxxxxx…")
    """
    name = getattr(value, "__name__", None)
    if callable(value) and isinstance(name, str):
        return f"<{type(value).__name__} {name}>"
    try:
        r = repr(value)
    except Exception as e:  # a broken __repr__ must not break the view
        r = f"<{type(value).__name__}: repr failed: {e}>"
    return r if len(r) <= limit else r[: limit - 1] + "…"


def _var_dict(view: JaxprView, atom: Any, scope: Scope | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"var": view.name_of(atom), "type": view.type_of(atom)}
    if hasattr(atom, "val"):
        d["literal"] = True
    elif scope is not None:
        p = scope._origin.get(atom)
        if p is not None:
            d["path"] = str(p)
    return d


def _scope_dict(view: JaxprView, scope: Scope, source: bool) -> dict[str, Any]:
    eqns = []
    for eq in scope.equations:
        d: dict[str, Any] = {
            "id": eq.id,
            "primitive": eq.primitive,
            "outvars": [_var_dict(view, x) for x in eq.eqn.outvars],
            "invars": [_var_dict(view, x, scope) for x in eq.eqn.invars],
            "params": eq.shown_params,
        }
        if source:
            src = eq.source
            d["source"] = src
            d["location"] = short_location(src)
        cb = eq.callback
        if cb:
            d["callback"] = cb
        d["children"] = [_scope_dict(view, c, source) for c in eq.children]
        eqns.append(d)
    return {
        "id": scope.id,
        "label": scope.label,
        "constvars": [_var_dict(view, x) for x in scope.constvars],
        "invars": [_var_dict(view, x, scope) for x in scope.invars],
        "outvars": [_var_dict(view, x, scope) for x in scope.outvars],
        "equations": eqns,
    }


def to_dict(view: JaxprView, *, source: bool = True, cost: bool = False) -> dict[str, Any]:
    """The view as JSON-able data.

    Keys: `name`; `inputs` and `outputs` (`[{"path", "var", "type"}]`, literals with
    `"literal": true`); `static` (`[{"path", "value"}]`, value as short text); `consts`;
    `num_equations`; `counts` (primitive -> count, recursive); `cost` (`{"flops",
    "bytes_accessed", "transcendentals"}` or None; only when `cost=True`); `jaxpr`: the top
    scope, `{"id", "label", "constvars", "invars", "outvars", "equations"}`, where each
    equation is `{"id", "primitive", "outvars", "invars" (with "path" where an input feeds
    it), "params" (short text), "source" (`/abs/model.py:12:8 (loss)`), "location"
    (`model.py:12 (loss)`), "children": [scope, …]}`; "source" and "location" are left out
    with `source=False`.

    Example:
        >>> import jax.numpy as jnp, treetool as tt
        >>> d = to_dict(tt.jaxpr(lambda x: x + 1.0, jnp.ones(2)), source=False)
        >>> d["inputs"], d["jaxpr"]["equations"][0]["invars"]
        ([{'var': 'a', 'type': 'f32[2]', 'path': '.args[0]'}], [{'var': 'a', 'type': 'f32[2]', \
'path': '.args[0]'}, {'var': '1.0', 'type': 'f32[]', 'literal': True}])
    """

    def io(rows: list[tuple[Any, Any]]) -> list[dict[str, Any]]:
        out = []
        for p, x in rows:
            d = _var_dict(view, x)
            d["path"] = str(p)
            out.append(d)
        return out

    c = view.cost if cost else None
    return {
        "name": view.name,
        "inputs": io(view.inputs),
        "outputs": io(view.outputs),
        "static": [{"path": str(p), "value": value_text(x, 200)} for p, x in view.static],
        "consts": [_var_dict(view, x) for x, _ in view.consts],
        "num_equations": len(view.equations),
        "counts": dict(view.counts()),
        "cost": None
        if c is None
        else {
            "flops": c.flops,
            "bytes_accessed": c.bytes_accessed,
            "transcendentals": c.transcendentals,
        },
        "jaxpr": _scope_dict(view, view.top, source),
    }
