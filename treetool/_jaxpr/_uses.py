"""Lookups on a `JaxprView`: variables by name or path, equations by id, uses and producers.

`JaxprView` inherits these from `Lookups`; they only read the indexes the view built in its
one walk (`_names`, `_home`, `_by_id`, each scope's readers, producers and input origins).
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Any

from treetool._errors import PathError, TreetoolError
from treetool._paths._path import Path, suggest

if TYPE_CHECKING:
    from treetool._jaxpr._scope import Equation, Scope

__all__ = ["Lookups", "is_var"]


def is_var(x: Any) -> bool:
    """True for a jax `Var` (and `DropVar`), False for a `Literal` or anything else."""
    return hasattr(x, "aval") and not hasattr(x, "val")


class Lookups:
    """The lookup methods of `JaxprView` (see there for the attributes they use)."""

    _names: dict[Any, str]
    _home: dict[Any, Scope]
    _by_id: dict[str, Equation]
    top: Scope
    inputs: list[tuple[Path, Any]]
    outputs: list[tuple[Path, Any]]
    static: list[tuple[Path, Any]]
    equations: list[Equation]

    def path_of(self, var: Any, scope: Scope | None = None) -> Path | None:
        """The input path that feeds `var` (also through sub-jaxpr binders), or None.

        Example:
            >>> import jax, jax.numpy as jnp, treetool as tt
            >>> v = tt.jaxpr(lambda p: jax.jit(jnp.sin)(p["w"]), {"w": jnp.ones(2)})
            >>> inner = v.equations[0].children[0]
            >>> str(v.path_of(inner.invars[0], inner))
            ".args[0]['w']"
        """
        if scope is None:
            scope = self._home.get(var, self.top)
        return scope._origin.get(var)

    def scope_of(self, var: Any) -> Scope:
        """The jaxpr that binds `var` (the first one, for a var shared by several jaxprs)."""
        scope = self._home.get(var)
        if scope is None:
            raise TreetoolError(f"{var!r} is not a variable of this jaxpr")
        return scope

    def equation(self, eqn_id: str) -> Equation:
        """The equation with this id (`3`, `3/jaxpr/0`).

        Example:
            >>> import jax, jax.numpy as jnp, treetool as tt
            >>> tt.jaxpr(lambda x: jax.jit(jnp.cos)(x), jnp.ones(2)).equation("0/jaxpr/0")
            Equation(0/jaxpr/0: cos)

        Raises:
            TreetoolError: no such id; the message names the nearest ones.
        """
        eq = self._by_id.get(eqn_id)
        if eq is None:
            near = suggest(eqn_id, self._by_id)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise TreetoolError(f"no equation {eqn_id!r} (ids look like '3' or '3/jaxpr/0'){hint}")
        return eq

    def var(self, name_or_path: str | Path) -> Any:
        """The variable with this name (`c`) or input/output path (`.args[0].layers[0].weight`).

        Example:
            >>> import jax.numpy as jnp, treetool as tt
            >>> v = tt.jaxpr(lambda p: p["w"] * 2.0, {"w": jnp.ones(3)})
            >>> v.var(".args[0]['w']") is v.var("a") is v.inputs[0][1]
            True

        Raises:
            PathError: no input or output has that path; the message names the nearest ones.
        """
        if isinstance(name_or_path, str) and name_or_path.isidentifier():
            for v, n in self._names.items():
                if n == name_or_path:
                    return v
        p = Path.parse(name_or_path)
        for q, v in self.inputs:
            if q == p:
                return v
        for q, v in self.outputs:
            if q == p:
                return v
        if p.is_pattern:
            raise PathError(f"{str(p)!r} is a pattern; use find() for globs")
        for q, value in self.static:
            if q == p:
                raise PathError(
                    f"{str(p)!r} is static ({type(value).__name__}, not an array): it is "
                    "baked into the trace and no variable holds it"
                )
        candidates = [str(q) for q, _ in self.inputs] + [str(q) for q, _ in self.outputs]
        near = suggest(str(p), candidates)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise PathError(f"no input, output or variable {str(name_or_path)!r} in this jaxpr{hint}")

    def find(self, pattern: str) -> list[tuple[Path, Any]]:
        """Inputs and outputs whose path matches a glob (`**.weight`, `.args[0].layers[*].bias`).

        Example:
            >>> import jax.numpy as jnp, treetool as tt
            >>> v = tt.jaxpr(lambda p: p["a"] + p["b"], {"a": jnp.ones(2), "b": jnp.ones(2)})
            >>> [str(p) for p, _ in v.find("**['b']")]
            [".args[0]['b']"]
        """
        q = Path.parse(pattern)
        return [(p, v) for p, v in (*self.inputs, *self.outputs) if q.match(p)]

    def search(self, query: str) -> list[Equation]:
        """Equations whose primitive is `query` (or matches it as a glob: `dot*`), or that read
        an input whose path matches `query` (`**.weight`).

        Example:
            >>> import jax.numpy as jnp, treetool as tt
            >>> v = tt.jaxpr(lambda w, x: jnp.sin(w @ x), jnp.ones((2, 2)), jnp.ones(2))
            >>> [e.primitive for e in v.search("sin")], [e.primitive for e in v.search(".args[1]")]
            (['sin'], ['dot_general'])
        """
        query = query.strip()
        if not query:
            return []
        if query[0] not in ".[*" or (query[0] == "*" and not query.startswith("**")):
            hits = [e for e in self.equations if fnmatch.fnmatchcase(e.primitive, query)]
            if hits or query[0] != "*":
                return hits
        try:
            matches = self.find(query)
        except PathError:
            return []
        found: dict[int, Equation] = {}
        for _, v in matches:
            if is_var(v):
                for e in self.uses(v, deep=True):
                    found[e.order] = e
        return [found[k] for k in sorted(found)]

    # --- uses ----------------------------------------------------------------------------
    def _resolve(self, target: Any, scope: Scope | None) -> tuple[Scope, Any]:
        if isinstance(target, (str, Path)):
            var = self.var(target)
            return (scope or self._home.get(var, self.top)), var
        if not is_var(target):
            raise TypeError(
                f"expected a variable, a variable name or a path, got {type(target).__name__}"
            )
        return (scope or self.scope_of(target)), target

    def uses(
        self, target: Any, *, deep: bool = False, scope: Scope | None = None
    ) -> list[Equation]:
        """The equations that read a variable: "where is this weight used?".

        Args:
            target: a jax Var, a variable name (`"c"`) or an input path
                (`".args[0].layers[0].weight"`).
            deep: also follow the variable into the sub-jaxprs of the equations that read it
                (the matching binder of a pjit, scan, cond branch, while body…) and list the
                equations there that read it.
            scope: the jaxpr the variable belongs to (default: the one that binds it).

        Returns:
            The equations, in pre-order (the order of the printed jaxpr).

        Example:
            >>> import jax, jax.numpy as jnp, treetool as tt
            >>> v = tt.jaxpr(lambda w, x: jax.jit(lambda a: a * w)(x) + w, jnp.ones(2), jnp.ones(2))
            >>> [(e.id, e.primitive) for e in v.uses(".args[0]")]
            [('0', 'jit'), ('1', 'add')]
            >>> [(e.id, e.primitive) for e in v.uses(".args[0]", deep=True)]
            [('0', 'jit'), ('0/jaxpr/0', 'mul'), ('1', 'add')]
        """
        scope, var = self._resolve(target, scope)
        found: dict[int, Equation] = {}
        stack = [(scope, var)]
        seen = set()
        while stack:
            sc, v = stack.pop()
            if (id(sc), id(v)) in seen:
                continue
            seen.add((id(sc), id(v)))
            for eq in sc._readers.get(v, ()):
                found[eq.order] = eq
                if not deep:
                    continue
                positions = [k for k, x in enumerate(eq.eqn.invars) if x is v]
                for child in eq.children:
                    if child.operand_map is None:
                        continue
                    for b, k in zip(child.invars, child.operand_map):
                        if k in positions:
                            stack.append((child, b))
        return [found[k] for k in sorted(found)]

    def producer(self, target: Any, *, scope: Scope | None = None) -> Equation | None:
        """The equation that outputs a variable (None for inputs, consts and binders).

        Example:
            >>> import jax.numpy as jnp, treetool as tt
            >>> v = tt.jaxpr(lambda x: jnp.sin(x) * 2.0, jnp.ones(2))
            >>> v.producer(".out"), v.producer(".args[0]")
            (Equation(1: mul), None)
        """
        scope, var = self._resolve(target, scope)
        return scope._producers.get(var)
