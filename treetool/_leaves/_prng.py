"""Typed PRNG key arrays read from a file, without jax: `KeyArray` and its dtype `KeyDtype`.

A pickled `jax.random.key(0)` names its implementation (`threefry2x32`, `rbg`, `unsafe_rbg`,
...) and holds its key data (`uint32[..., 2]` for threefry). The safe reader rebuilds it as a
`KeyArray`: the same shape (the batch shape, `()` for one key) and the same dtype name
(`key<fry>`) as the live jax array, so every view, the JSON listing and diff show what jax
shows. Its data stays a uint32 array (in memory or a `LazyArray` in the file); `to_jax()` makes
the live key array.

Key detection comes from this type (a `key<...>` dtype), never from a shape: a `uint32[1000, 2]`
edge list is an array of parameters like any other.
"""

from __future__ import annotations

import math
from typing import Any

from treetool._public import set_module

__all__ = ["KeyArray", "KeyDtype"]


class KeyDtype:
    """The dtype of a typed PRNG key array: its name is jax's (`key<fry>`, `key<rbg>`).

    Example:
        >>> d = KeyDtype("threefry2x32", "fry", (2,))
        >>> d.name, str(d), d.itemsize
        ('key<fry>', 'key<fry>', 8)
    """

    __slots__ = ("impl", "key_shape", "name", "tag")

    def __init__(self, impl: str, tag: str, key_shape: tuple[int, ...]) -> None:
        self.impl = impl
        self.tag = tag
        self.key_shape = tuple(key_shape)
        self.name = f"key<{tag}>"

    @property
    def itemsize(self) -> int:
        """Bytes per key (its uint32 words): 8 for threefry, 16 for rbg."""
        return 4 * math.prod(self.key_shape)

    @property
    def kind(self) -> str:
        return "V"

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"KeyDtype({self.name!r}, impl={self.impl!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is KeyDtype:
            return (other.impl, other.tag, other.key_shape) == (
                self.impl,
                self.tag,
                self.key_shape,
            )
        return NotImplemented

    def __hash__(self) -> int:
        return hash((KeyDtype, self.impl, self.tag, self.key_shape))


@set_module("treetool")
class KeyArray:
    """A typed PRNG key array loaded from a file: shape, `key<...>` dtype and its key data.

    Attributes:
        shape: the batch shape (`()` for one key, `(4,)` for `jax.random.split(key, 4)`).
        dtype: a `KeyDtype`, named as jax names it (`key<fry>`).
        impl: the implementation's name (`threefry2x32`, `rbg`, `unsafe_rbg`).
        data: the key data, `uint32[*shape, *key_shape]` (numpy or `LazyArray`).

    Example:
        >>> import numpy as np
        >>> k = KeyArray(np.zeros((4, 2), np.uint32), "threefry2x32", "fry")
        >>> k
        KeyArray(key<fry>[4])
        >>> k.shape, str(k.dtype), k.nbytes, k.key_data().shape
        ((4,), 'key<fry>', 32, (4, 2))
    """

    __slots__ = ("data", "dtype", "shape")

    def __init__(self, data: Any, impl: str, tag: str, key_shape: tuple[int, ...] = (2,)) -> None:
        key_shape = tuple(key_shape)
        full = tuple(data.shape)
        n = len(key_shape)
        if full[len(full) - n :] != key_shape or len(full) < n:
            raise ValueError(
                f"key data of shape {full} does not end with the key shape {key_shape}"
            )
        self.data = data
        self.dtype = KeyDtype(impl, tag, key_shape)
        self.shape = full[: len(full) - n]

    @property
    def impl(self) -> str:
        """The implementation's name (`threefry2x32`)."""
        return self.dtype.impl

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a single key")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"KeyArray({self.dtype.name}[{','.join(map(str, self.shape))}])"

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise TypeError(
            "a typed PRNG key array has no numpy value: use .key_data() for its uint32 data"
        )

    def key_data(self) -> Any:
        """The key data as a numpy array (read from the file if it is still there)."""
        import numpy as np

        return np.asarray(self.data)

    def to_jax(self) -> Any:
        """The live jax key array (`jax.random.wrap_key_data`); imports jax."""
        import jax

        return jax.random.wrap_key_data(self.key_data(), impl=self.impl)
