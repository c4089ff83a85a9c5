"""`PortedArray`: a target leaf filled from source entries, read only when asked for."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from treetool._leaves._lazy_array import LazyArray

__all__ = ["PortedArray"]


class PortedArray(LazyArray):
    """A leaf of `plan.apply()`: its values are the source's, read and transformed when asked
    for (`np.asarray(x)`, an operator, `tt.materialize`), like any `LazyArray`."""

    __slots__ = ("_fill", "steps")

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        fill: Callable[[], np.ndarray],
        file: str,
        steps: str,
    ) -> None:
        super().__init__(shape, dtype, file, 0)
        self._fill = fill
        self.steps = steps

    def __repr__(self) -> str:
        dims = ",".join(map(str, self.shape))
        return f"PortedArray({self.dtype_name}[{dims}], from={self.file!r}, steps={self.steps!r})"

    def read(self) -> np.ndarray:
        """The source's values through the row's transform."""
        return self._fill()

    def __getitem__(self, index: Any) -> np.ndarray:
        return self.read()[index]

    def corners(self, edge: int = 3) -> np.ndarray | None:
        """The first and last `edge` entries along every axis."""
        if self.ndim > 4:
            return None
        arr = self.read()
        for axis, n in enumerate(self.shape):
            if n > 2 * edge:
                keep = [*range(edge), *range(n - edge, n)]
                arr = np.take(arr, keep, axis=axis)
        return arr

    def iter_chunks(self, max_elems: int = 1 << 20) -> Iterator[np.ndarray]:
        """The elements in C order, as 1-D chunks of at most `max_elems`."""
        flat = self.read().reshape(-1)
        for start in range(0, flat.size, max_elems):
            yield flat[start : start + max_elems]

    def where(self) -> dict[str, Any]:
        """Where the values come from: the source file and the steps."""
        return {"file": self.file, "steps": self.steps, "nbytes": self.nbytes}
