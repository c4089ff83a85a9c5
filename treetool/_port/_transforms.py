"""The closed catalogue of layout transforms, each with its shape rule.

A transform is a tuple of steps, each a short text that the rule file shows and reads back:

- `T`: 2-D transpose (torch Linear `(out, in)` <-> flax Dense `(in, out)`)
- `perm(a,b,...)`: an axis permutation; conv OIHW -> HWIO is `perm(2,3,1,0)` (1-D: `perm(2,1,0)`,
  3-D: `perm(2,3,4,1,0)`), HWIO -> OIHW `perm(3,2,0,1)`; grouped and depthwise kernels
  (`(O, I/g, H, W)`) take the same permutation
- `flip(a,...)`: reverse the given axes (the spatial axes of a transposed conv kernel)
- `split(axis,i/n)`: part `i` of `n` equal parts along `axis` (fused q/k/v, gate/up)
- `index(i)`: entry `i` of a stacked leading axis (unstacking a `scan` stack)
- `reshape(d0,d1,...)`: heads `(E) <-> (H, D)`, the same elements in the same order
- `cast(dtype)`: a dtype cast

Transposed convolutions: torch `ConvTranspose{1,2,3}d` keeps `(I, O/g, *k)` and computes the
gradient of a conv; equinox `ConvTranspose` keeps `(O, I/g, *k)` and flax linen `ConvTranspose`
(with its default `transpose_kernel=False`) `(*k, I, O)`, both applied as a plain conv over the
dilated input, so their kernels are torch's with the spatial axes reversed:
torch -> equinox `perm(1,0,2,3) flip(2,3)`, torch -> flax `perm(2,3,0,1) flip(0,1)` (2-D; see
`conv_transpose_steps`). Shapes cannot tell a flip: the target's module type decides.

Stacking N blocks into a leading axis is not a step: a row with N sources stacks them after
applying its steps to each. Concatenating fused parts is the reverse of `split`: rows that
fill parts of one target leaf are concatenated along the part's axis.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

__all__ = [
    "StepError",
    "apply_steps",
    "candidates",
    "conv_perm",
    "conv_transpose_steps",
    "parse_steps",
    "steps_shape",
    "transposes",
]

Shape = tuple[int, ...]


class StepError(ValueError):
    """A step that is not in the catalogue, or does not fit the shape it is given."""


_STEP = re.compile(r"^(T|perm|flip|split|index|reshape|cast)(?:\(([^()]*)\))?$")


def parse_steps(text: str) -> tuple[str, ...]:
    """The steps of a transform's text (`identity`, `T`, `split(0,1/3) T`), checked.

    Example:
        >>> parse_steps("split(0,1/3) T")
        ('split(0,1/3)', 'T')
        >>> parse_steps("identity")
        ()
    """
    text = text.strip()
    if text in ("", "identity"):
        return ()
    out = []
    for step in text.split():
        m = _STEP.match(step)
        if m is None or (m.group(1) == "T") != (m.group(2) is None):
            raise StepError(
                f"unknown step {step!r}: expected T, perm(..), flip(..), split(axis,i/n), index(i), "
                "reshape(..) or cast(dtype)"
            )
        _parse_one(step)
        out.append(step)
    return tuple(out)


def _ints(args: str) -> tuple[int, ...]:
    try:
        return tuple(int(a) for a in args.split(",") if a.strip())
    except ValueError:
        raise StepError(f"expected integers, got {args!r}") from None


def _parse_one(step: str) -> tuple[str, Any]:
    m = _STEP.match(step)
    if m is None:
        raise StepError(f"unknown step {step!r}")
    kind, args = m.group(1), m.group(2) or ""
    if kind == "split":
        axis, _, frac = args.partition(",")
        i, _, n = frac.partition("/")
        try:
            a, i_, n_ = int(axis), int(i), int(n)
        except ValueError:
            raise StepError(f"expected split(axis,i/n), got {step!r}") from None
        if not 0 <= i_ < n_:
            raise StepError(f"{step}: part {i_} of {n_} does not exist")
        return kind, (a, i_, n_)
    if kind == "cast":
        return kind, args.strip()
    if kind == "T":
        return kind, None
    return kind, _ints(args)


def steps_shape(steps: Sequence[str], shape: Shape) -> Shape:
    """The shape `steps` give an array of `shape` (StepError when a step does not fit).

    Example:
        >>> steps_shape(("split(0,1/3)", "T"), (12, 4))
        (4, 4)
    """
    for step in steps:
        kind, arg = _parse_one(step)
        if kind == "T":
            if len(shape) != 2:
                raise StepError(f"T needs a 2-D array, got shape {list(shape)}")
            shape = (shape[1], shape[0])
        elif kind == "perm":
            if sorted(arg) != list(range(len(shape))):
                raise StepError(f"{step} does not permute the axes of shape {list(shape)}")
            shape = tuple(shape[a] for a in arg)
        elif kind == "flip":
            if not arg or len(set(arg)) != len(arg) or not all(0 <= a < len(shape) for a in arg):
                raise StepError(f"{step} does not name distinct axes of shape {list(shape)}")
        elif kind == "split":
            axis, _, n = arg
            if not -len(shape) <= axis < len(shape) or shape[axis] % n:
                raise StepError(f"{step}: shape {list(shape)} does not split in {n} on axis {axis}")
            shape = tuple(d // n if k == axis % len(shape) else d for k, d in enumerate(shape))
        elif kind == "index":
            if not shape or len(arg) != 1 or not 0 <= arg[0] < shape[0]:
                raise StepError(f"{step} does not index shape {list(shape)}")
            shape = shape[1:]
        elif kind == "reshape":
            if math.prod(arg) != math.prod(shape):
                raise StepError(f"{step} cannot reshape {list(shape)}: sizes differ")
            shape = tuple(arg)
    return shape


def apply_steps(steps: Sequence[str], x: Any, *, contiguous: bool = True) -> Any:
    """`x` (a numpy array) through `steps`; with `contiguous=False`, transposes stay views
    (a streaming writer copies them out a block at a time)."""
    import numpy as np

    for step in steps:
        kind, arg = _parse_one(step)
        if kind == "T":
            x = x.T
        elif kind == "perm":
            x = np.transpose(x, arg)
        elif kind == "flip":
            x = np.flip(x, arg)
        elif kind == "split":
            axis, i, n = arg
            x = np.split(x, n, axis=axis)[i]
        elif kind == "index":
            x = x[arg[0]]
        elif kind == "reshape":
            x = np.reshape(x, arg)
        elif kind == "cast":
            x = x.astype(arg)
    return np.ascontiguousarray(x) if contiguous else x


def conv_perm(ndim: int, to_io: bool) -> tuple[int, ...]:
    """The permutation from torch's `(O, I, *k)` to flax's `(*k, I, O)` (or back).

    Example:
        >>> conv_perm(4, True), conv_perm(4, False)
        ((2, 3, 1, 0), (3, 2, 0, 1))
    """
    if to_io:
        return (*range(2, ndim), 1, 0)
    return (ndim - 1, ndim - 2, *range(ndim - 2))


# a transposed conv kernel's layouts: torch `(I, O, *k)`, equinox `(O, I, *k)` (reversed
# spatially), flax linen `(*k, I, O)` (reversed spatially); each as a permutation from torch's
_CT_LAYOUTS = ("ct_torch", "ct_oi", "ct_io")


def _ct_from_torch(ndim: int, layout: str) -> tuple[str, ...]:
    k = list(range(2, ndim))
    if layout == "ct_oi":
        return (f"perm({_dims((1, 0, *k))})", f"flip({_dims(tuple(k))})")
    if layout == "ct_io":
        return (f"perm({_dims((*k, 0, 1))})", f"flip({_dims(tuple(range(ndim - 2)))})")
    return ()


def _ct_to_torch(ndim: int, layout: str) -> tuple[str, ...]:
    k = list(range(2, ndim))
    if layout == "ct_oi":
        return (f"flip({_dims(tuple(k))})", f"perm({_dims((1, 0, *k))})")
    if layout == "ct_io":
        inv = (ndim - 2, ndim - 1, *range(ndim - 2))
        return (f"flip({_dims(tuple(range(ndim - 2)))})", f"perm({_dims(inv)})")
    return ()


def conv_transpose_steps(ndim: int, src: str, dst: str) -> tuple[str, ...] | None:
    """The steps that take a transposed conv kernel of `ndim` axes from layout `src` to `dst`
    (`"ct_torch"`, `"ct_oi"` equinox, `"ct_io"` flax linen); None for another layout.

    Example:
        >>> conv_transpose_steps(4, "ct_torch", "ct_io")
        ('perm(2,3,0,1)', 'flip(0,1)')
        >>> conv_transpose_steps(4, "ct_torch", "ct_oi")
        ('perm(1,0,2,3)', 'flip(2,3)')
        >>> conv_transpose_steps(3, "ct_io", "ct_torch")
        ('flip(0)', 'perm(1,2,0)')
    """
    if src not in _CT_LAYOUTS or dst not in _CT_LAYOUTS or ndim < 3:
        return None
    steps = (*_ct_to_torch(ndim, src), *_ct_from_torch(ndim, dst))
    # equinox <-> flax: flips cancel; keep one permutation
    if src != "ct_torch" and dst != "ct_torch":
        import numpy as np

        probe = np.arange(math.prod(range(2, ndim + 2))).reshape(tuple(range(2, ndim + 2)))
        out = apply_steps(steps, probe)
        for perm in _perms(ndim):
            if np.array_equal(np.transpose(probe, perm), out):
                return (f"perm({_dims(perm)})",) if perm != tuple(range(ndim)) else ()
    return steps


def _perms(ndim: int) -> list[tuple[int, ...]]:
    import itertools

    return list(itertools.permutations(range(ndim)))


def transposes(steps: Sequence[str]) -> bool:
    """Whether `steps` change the layout (a transpose or an axis permutation)."""
    return any(s == "T" or s.startswith(("perm(", "flip(")) for s in steps)


def _dims(shape: Shape) -> str:
    return ",".join(map(str, shape))


def candidates(src: Shape, dst: Shape) -> list[tuple[str, ...]]:
    """Every transform of the catalogue (without split, index or cast) that turns `src` into
    `dst`, the simplest first.

    Example:
        >>> candidates((4, 3), (3, 4))
        [('T',)]
        >>> candidates((4, 4), (4, 4))
        [(), ('T',)]
        >>> candidates((8, 3, 3, 3), (3, 3, 3, 8))
        [('perm(2,3,1,0)',)]
        >>> candidates((6, 6), (6, 2, 3))
        [('reshape(6,2,3)',), ('T', 'reshape(6,2,3)')]
    """
    out: list[tuple[str, ...]] = []
    if src == dst:
        out.append(())
    n = len(src)
    if n == 2 and (src[1], src[0]) == dst:
        out.append(("T",))
    if n >= 3 and n == len(dst):
        for to_io in (True, False):
            p = conv_perm(n, to_io)
            if tuple(src[a] for a in p) == dst:
                step = f"perm({_dims(p)})"
                if (step,) not in out:
                    out.append((step,))
    if math.prod(src) == math.prod(dst) and n != len(dst):
        reshape = f"reshape({_dims(dst)})"
        if n == 2 and len(dst) > 2:  # (E, E) -> (E, H, D) or (H, D, E)
            for pre in ((), ("T",)):
                mid = src if not pre else (src[1], src[0])
                if mid[0] == dst[0] or mid[-1] == dst[-1]:
                    out.append((*pre, reshape))
        elif n > 2 and len(dst) == 2:  # (E, H, D) -> (E, E): merge, then maybe transpose
            for k in range(1, n):
                merged = (math.prod(src[:k]), math.prod(src[k:]))
                if merged == dst:
                    out.append((f"reshape({_dims(merged)})",))
                if (merged[1], merged[0]) == dst:
                    out.append((f"reshape({_dims(merged)})", "T"))
        elif n <= 1 or len(dst) <= 1:
            out.append((reshape,))
    return out
