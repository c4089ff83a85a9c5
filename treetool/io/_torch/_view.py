"""`StridedArray`: a lazy non-contiguous torch view (a slice, a transpose of a 3-d tensor...).

Its bytes are a window of its storage, from the view's first element to its last; reading it
reads that window (checked against the storage when the leaf was made) and gathers the
elements by their strides into a new C-ordered array.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from treetool._leaves._lazy_array import LazyArray

__all__ = ["StridedArray"]


class StridedArray(LazyArray):
    """A `LazyArray` whose elements lie `strides` (in elements) apart in its file.

    Example:
        >>> import numpy as np, tempfile, os
        >>> f = tempfile.NamedTemporaryFile(delete=False)
        >>> _ = f.write(np.arange(6, dtype=np.int32).tobytes()); f.close()
        >>> col = StridedArray((2,), "int32", f.name, 4, strides=(3,))  # column 1 of a 2x3
        >>> np.asarray(col).tolist()
        [1, 4]
        >>> os.unlink(f.name)
    """

    __slots__ = ("strides",)

    def __init__(self, shape: tuple[int, ...], dtype: Any, file: str, offset: int = 0, *,
                 strides: tuple[int, ...], **kw: Any) -> None:  # fmt: skip
        super().__init__(shape, dtype, file, offset, **kw)
        self.strides = tuple(strides)

    @property
    def window(self) -> int:
        """Bytes from the first element to the end of the last."""
        if not self.size:
            return 0
        return (sum((d - 1) * s for d, s in zip(self.shape, self.strides)) + 1) * self.itemsize

    def where(self) -> dict[str, Any]:
        return {**super().where(), "strides": list(self.strides), "window": self.window}

    def read(self) -> Any:
        import numpy as np

        dt = self.dtype
        with self._open() as fh:
            data = self._read(fh, 0, self.window)
        base = np.frombuffer(data, dtype=dt) if data else np.zeros(0, dt)
        if not self.size:
            return np.zeros(self.shape, dt)
        view = np.lib.stride_tricks.as_strided(
            base, self.shape, tuple(s * dt.itemsize for s in self.strides), writeable=False
        )
        return np.ascontiguousarray(view)

    def __getitem__(self, index: Any) -> Any:
        return self.read()[index]

    def corners(self, edge: int = 3) -> Any:
        if self.ndim > 4:
            return None
        arr = self.read()
        if self.ndim == 0:
            return arr
        import numpy as np

        for axis, n in enumerate(self.shape):
            if n > 2 * edge:
                arr = np.take(arr, [*range(edge), *range(n - edge, n)], axis=axis)
        return arr

    def iter_chunks(self, max_elems: int = 1 << 20) -> Iterator[Any]:
        flat = self.read().reshape(-1)
        for i in range(0, max(math.prod(self.shape), 0), max_elems):
            yield flat[i : i + max_elems]
