"""`tt.port` and its result, `Plan`: the mapping, its verification, and `apply`."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from treetool._port._error import PortError
from treetool._port._match import Ambiguity, Row, match
from treetool._port._rules import ruled, write_rules
from treetool._port._sides import Side, read_source, source_side, target_side
from treetool._port._transforms import apply_steps
from treetool._public import set_module

__all__ = ["Check", "Plan", "PortError", "port"]


@dataclass(frozen=True)
class Check:
    """What `Plan.check` found: the largest absolute difference from the reference outputs."""

    max_abs_diff: float
    atol: float
    outputs: int  # how many output arrays were compared

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.atol

    def __str__(self) -> str:
        verdict = "ok" if self.ok else "FAILED"
        return (
            f"check {verdict}: max abs difference {self.max_abs_diff:.3g} over {self.outputs} "
            f"output array(s) (tolerance {self.atol:g})"
        )


class Plan:
    """How a source fills a target: one `Row` per target leaf (or part of one), what is left
    over on either side, what is ambiguous, and what was dropped on purpose (with why).

    `apply()` fills a tree of the target's structure; `rules` is the editable rule file;
    `rich.print(plan)` shows it, `to_dict()` gives it as JSON-ready data.
    """

    def __init__(
        self,
        rows: list[Row],
        ambiguous: list[Ambiguity],
        unmatched_source: list[str],
        unmatched_target: list[str],
        dropped: dict[str, str],
        source: Side,
        target: Any,
        target_leaves: Side,
        source_label: str,
    ) -> None:
        self.rows = rows
        self.ambiguous = ambiguous
        self.unmatched_source = unmatched_source
        self.unmatched_target = unmatched_target
        self.dropped = dropped
        self._source = source
        self._target = target
        self._target_side = target_leaves
        self.source_label = source_label

    # --- verdicts
    @property
    def complete(self) -> bool:
        """Every target leaf filled exactly once, every source entry used or dropped, nothing
        ambiguous."""
        return not (self.ambiguous or self.unmatched_source or self.unmatched_target)

    def problems(self) -> list[str]:
        """What keeps the plan from being complete, one line each."""
        out = [f"ambiguous: {', '.join(a.targets)}" for a in self.ambiguous]
        out += [f"target not filled: {t}" for t in self.unmatched_target]
        out += [f"source not used: {s}" for s in self.unmatched_source]
        if out:
            from treetool._port._sides import state_hint

            hint = state_hint(self._target)
            if hint is not None:
                out.insert(0, hint)  # the way out, first
        return out

    # --- results
    @property
    def rules(self) -> str:
        """The plan as an editable rule file (`tt.port(..., rules=text)` reads it back)."""
        return write_rules(self)

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready data."""
        return {
            "source": self.source_label,
            "complete": self.complete,
            "rows": [
                {
                    "target": r.target,
                    "part": list(r.part) if r.part else None,
                    "sources": list(r.sources),
                    "transform": list(r.steps),
                    "source_shape": list(r.source_shape),
                    "target_shape": list(r.target_shape),
                    "how": r.how,
                    "block": r.group or None,
                }
                for r in self.rows
            ],
            "ambiguous": [
                {"targets": list(a.targets), "candidates": list(a.candidates), "reason": a.reason}
                for a in self.ambiguous
            ],
            "unmatched_source": list(self.unmatched_source),
            "unmatched_target": list(self.unmatched_target),
            "dropped": dict(self.dropped),
        }

    def __rich__(self) -> Any:
        from treetool._port._rich import plan_renderable

        return plan_renderable(self)

    def __repr__(self) -> str:
        state = "complete" if self.complete else f"{len(self.problems())} problem(s)"
        return f"Plan({len(self.rows)} rows, {state})"

    # --- applying
    def apply(self, *, lazy: bool = False, cast: bool = False, strict: bool = True) -> Any:
        """A new tree of exactly the target's structure, filled with the source's values.

        Eager by default: every filled leaf is read now, a jax array where the target had a
        jax array or a `jax.ShapeDtypeStruct` (on the target's devices when it was sharded),
        a numpy array elsewhere, so the result runs in jax at once: called, under `jit`,
        `vmap`, `grad` and `lax.scan`, with any layer (conv, attention, embedding, norm).
        `lazy=True` opts in to leaves that stay in the source file (`PortedArray`/`LazyArray`,
        read by `np.asarray`, an operator or `tt.materialize`) for inspection; jax
        primitives do not accept those. `plan.write` streams leaf by leaf either way.
        `cast=True` casts to the target leaves' dtypes. With `strict=False`, target leaves
        the plan does not fill keep their own values; otherwise an incomplete or ambiguous
        plan raises `PortError`. The target is never changed.
        """
        if strict and (self.ambiguous or self.unmatched_target):
            raise PortError(
                f"cannot apply an incomplete plan ({'; '.join(self.problems()[:3])}"
                f"{'; ...' if len(self.problems()) > 3 else ''}): resolve it with rules= "
                "or pass strict=False to keep the target's own values there"
            )
        from treetool._tree._views import flatten, leaves_with_path, unflatten
        from treetool.io._read import like_leaf

        by_target: dict[str, list[Row]] = {}
        for r in self.rows:
            by_target.setdefault(r.target, []).append(r)
        leaves, treedef = flatten(self._target)
        paths = [str(p) for p, _ in leaves_with_path(self._target)]
        out = list(leaves)
        for k, name in enumerate(paths):
            rows = by_target.get(name)
            if rows:
                value = self._fill(name, rows, lazy=lazy, cast=cast)
                out[k] = value if lazy else like_leaf(value, leaves[k])
        return unflatten(treedef, out)

    def iter_filled(
        self, *, cast: bool = False, order: Sequence[str] | None = None, contiguous: bool = True
    ) -> Any:
        """`(target name, numpy array)` for each filled target leaf (in `order`, else the
        target's), one at a time: a streaming write reads each once and lets it go. With
        `contiguous=False`, a transposed leaf may be a view of the array read."""
        by_target: dict[str, list[Row]] = {}
        for r in self.rows:
            by_target.setdefault(r.target, []).append(r)
        for name in self._target_side.order if order is None else order:
            rows = by_target.get(name)
            if rows:
                yield name, self._fill(name, rows, lazy=False, cast=cast, contiguous=contiguous)

    def _fill(
        self, name: str, rows: list[Row], *, lazy: bool, cast: bool, contiguous: bool = True
    ) -> Any:
        import numpy as np

        src = self._source.arrays
        dtype = self._target_side.dtypes[name] if cast else self._source.dtypes[rows[0].sources[0]]
        shape = self._target_side.shapes[name]
        if not cast and len(rows) == 1 and not rows[0].steps and len(rows[0].sources) == 1:
            x = src[rows[0].sources[0]]
            return x if lazy else np.asarray(x)

        def fill() -> Any:
            parts = []
            for r in sorted(rows, key=lambda r: r.part[1] if r.part else 0):
                one = len(rows) == 1 and len(r.sources) == 1
                vals = [
                    apply_steps(r.steps, np.asarray(src[s]), contiguous=contiguous or not one)
                    for s in r.sources
                ]
                parts.append(vals[0] if len(vals) == 1 else np.stack(vals))
            arr = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=rows[0].part[0])  # type: ignore[index]
            if cast:
                arr = arr.astype(dtype)
            if arr.shape != shape:
                raise PortError(
                    f"{name}: the rules give shape {list(arr.shape)}, expected {list(shape)}"
                )
            return arr

        if not lazy:
            return fill()
        from treetool._port._lazy import PortedArray

        first = src[rows[0].sources[0]]
        steps = "; ".join(" ".join(r.steps) or "identity" for r in rows)
        return PortedArray(shape, dtype, fill, str(getattr(first, "file", "<memory>")), steps)

    def check(
        self,
        fn: Callable[..., Any],
        inputs: Sequence[Any] = (),
        expected: Any = None,
        *,
        atol: float = 1e-4,
    ) -> Check:
        """Run `fn(ported, *inputs)` on the ported model and compare with `expected`.

        With `expected=None`, `fn` returns `(outputs, expected)` itself. The result's
        `max_abs_diff` is the largest absolute difference over all output arrays.
        """
        import numpy as np

        from treetool._tree._views import leaves_with_path

        ported = self.apply(lazy=False, cast=True)
        got = fn(ported, *inputs)
        if expected is None:
            got, expected = got
        a = [np.asarray(x) for _, x in leaves_with_path(got)]
        b = [np.asarray(x) for _, x in leaves_with_path(expected)]
        if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
            raise PortError(
                f"check: the outputs ({[list(x.shape) for x in a]}) do not line up with the "
                f"reference ({[list(y.shape) for y in b]})"
            )
        diff = max(
            (float(np.max(np.abs(x - y))) if x.size else 0.0 for x, y in zip(a, b)), default=0.0
        )
        if any(not np.all(np.isfinite(x)) for x in a):
            diff = float("inf")
        return Check(diff, atol, len(a))

    def write(
        self, path: str | os.PathLike, *, cast: bool = False, overwrite: bool = False
    ) -> None:
        """Save the filled tree: safetensors and npz by the target's names, `.eqx` (equinox
        `tree_serialise_leaves`), `.msgpack` (flax serialization), by the extension.

        The file appears whole or not at all (written beside `path`, then moved over it; a
        link at `path` is replaced, never followed). An existing `path` raises `SaveError`
        unless `overwrite=True`."""
        from treetool._port._write import write_plan

        write_plan(self, os.fspath(path), cast=cast, overwrite=overwrite)


@set_module("treetool")
def port(source: Any, target: Any, rules: str | os.PathLike | None = None) -> Plan:
    """Plan how a checkpoint fills a model of another framework, and prove it.

    `source` is anything `tt.load` reads (a file, a sharded index, a URL) or a live tree (a
    torch `state_dict()` as numpy arrays, flax params, an equinox module); `target` is the
    model to fill: an equinox module, a flax linen variables dict, a flax nnx module or
    state, haiku params, or any pytree of arrays or `jax.ShapeDtypeStruct`s. Names are
    normalised (tokens, synonyms, numbers, wrappers), layouts come from a closed catalogue
    (transpose, conv OIHW/HWIO, stacking, fused q/k/v, heads reshape, casts), framework
    conventions break ties, and what names and shapes cannot decide is listed in
    `plan.ambiguous`, never guessed. `rules` (a rule file's text or name, as `plan.rules`
    writes it) overrides decisions.

    The plan: `plan.rows`, `plan.unmatched_source`, `plan.unmatched_target`,
    `plan.ambiguous`, `plan.dropped`, `plan.complete`, `plan.rules`, `rich.print(plan)`,
    `plan.to_dict()`; `plan.apply()` returns a new tree of exactly the target's structure,
    its leaves read now (jax arrays where the target had jax arrays; `lazy=True` leaves them
    in the file; the target is not changed), `plan.check(fn, inputs, expected)` compares the ported
    model's outputs with reference ones, `plan.write(path)` saves the filled tree.

    Example:
        >>> import numpy as np, treetool as tt
        >>> torch_sd = {"0.weight": np.ones((4, 3), np.float32), "0.bias": np.zeros(4, np.float32)}
        >>> flax_params = {"params": {"Dense_0": {"kernel": np.zeros((3, 4), np.float32),
        ...                                       "bias": np.zeros(4, np.float32)}}}
        >>> plan = tt.port(torch_sd, flax_params)
        >>> [(r.target, r.sources[0], r.steps) for r in plan.rows]
        [("['params']['Dense_0']['bias']", '0.bias', ()), ("['params']['Dense_0']['kernel']", '0.weight', ('T',))]
        >>> plan.complete, plan.apply()["params"]["Dense_0"]["kernel"].shape
        (True, (3, 4))
    """
    label = os.fspath(source) if isinstance(source, str | os.PathLike) else type(source).__name__
    src_side = source_side(read_source(source))
    dst_side, _ = target_side(target)
    m = match(src_side.leaves, dst_side.leaves)
    plan = Plan(
        m.rows,
        m.ambiguous,
        m.unmatched_source,
        m.unmatched_target,
        dict(src_side.dropped),
        src_side,
        target,
        dst_side,
        label,
    )
    # rows in the target's order, leftovers counted the one way a rule file counts them
    plan = apply_rules(plan, "")
    if rules is not None:
        plan = apply_rules(plan, rules)
    return plan


def apply_rules(plan: Plan, rules: str | os.PathLike) -> Plan:
    """`plan` with the decisions of a rule file (its text, or a file name) put in."""
    return Plan(*ruled(plan, rules))
