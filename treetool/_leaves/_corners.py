"""An array's corners printed as numpy prints the whole array summarised: `...` at each gap.

`LazyArray.corners(edge)` reads the first and last `edge` entries along every axis of a leaf too
big to read whole; printed as they are, `[0. 1. 2. 7. 8. 9.]` reads as six values. Here an axis
with a gap gets one more entry in its middle, which numpy's summarised print replaces with
`...` (`threshold=0`, `edgeitems=edge`), so the text is what `print(whole_array)` would show.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["corners_text", "with_gaps"]


def with_gaps(corners: Any, shape: tuple[int, ...], edge: int = 3) -> np.ndarray:
    """`corners` (of an array of `shape`) with one filler entry in the middle of each axis that
    has a gap (longer than `2 * edge`): printed with `threshold=0, edgeitems=edge`, numpy shows
    that entry as `...` and every other one as it is.

    Example:
        >>> import numpy as np
        >>> with_gaps(np.array([0, 1, 2, 7, 8, 9]), (10,), 3).tolist()
        [0, 1, 2, 2, 7, 8, 9]
        >>> with_gaps(np.array([0, 1, 2]), (3,), 3).tolist()
        [0, 1, 2]
    """
    import numpy as np

    arr = np.asarray(corners)
    for axis, n in enumerate(shape):
        if axis < arr.ndim and n > 2 * edge and arr.shape[axis] == 2 * edge:
            arr = np.take(arr, [*range(edge), edge - 1, *range(edge, 2 * edge)], axis=axis)
    return arr


def corners_text(corners: Any, shape: tuple[int, ...], edge: int = 3, **options: Any) -> str:
    """The corners of an array of `shape` as numpy prints the whole array summarised
    (`options` go to `np.array2string`: `max_line_width`, `precision`, ...).

    Example:
        >>> import numpy as np
        >>> print(corners_text(np.array([5.058, 3.202, 2.017, 2.624, -0.594, 3.742]), (1000,)))
        [ 5.058  3.202  2.017 ...  2.624 -0.594  3.742]
        >>> print(corners_text(np.arange(16).reshape(4, 4), (4, 1000), 2))
        [[ 0  1 ...  2  3]
         [ 4  5 ...  6  7]
         [ 8  9 ... 10 11]
         [12 13 ... 14 15]]
    """
    import numpy as np

    return np.array2string(
        with_gaps(corners, shape, edge), **{"threshold": 0, "edgeitems": edge, **options}
    )
