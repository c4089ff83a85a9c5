"""`OrbaxArray`: a lazy array of an orbax checkpoint, read through tensorstore.

Its bytes are read by tensorstore's kvstore of the item's directory (`file` locally, `s3` or
`gcs` for a checkpoint in object storage, see `_orbax_fs.kvstore`), after the checks of
`_orbax_data` (names stay inside the checkpoint, no read that claims far more than is stored).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from treetool._errors import LoadError
from treetool._leaves._arrays import LazyArray, _row_range, short_dtype
from treetool.io._orbax import _fs as fs
from treetool.io._orbax._data import c_order_blocks, check_claim, check_component, stored_bytes

if TYPE_CHECKING:
    import numpy as np

__all__ = ["OrbaxArray", "_dtype_label", "_tensorstore", "_ts_error"]

_new = object.__new__


class OrbaxArray(LazyArray):
    """An array of an orbax checkpoint: shape and dtype from metadata, data read on demand.

    `sharding` is the sharding orbax recorded (a dict such as `{"sharding_type":
    "NamedSharding", "partition_spec": ["x"], ...}`), or None. Reading goes through
    tensorstore (zarr arrays, in an OCDBT database or in plain files).
    """

    __slots__ = ("_driver", "_item", "_ocdbt", "param", "sharding")

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        item: str,
        param: str,
        driver: str,
        ocdbt: bool,
        sharding: Any,
    ) -> None:
        # shape (a tuple of ints) and dtype were checked by the reader: no conversions here
        self.shape, self.dtype, self.file, self.offset = shape, dtype, f"{item}/{param}", 0
        self.fortran_order, self._opener, self._seekable, self.source = False, None, False, None
        self.view_of = None  # a whole array, never a view of another's storage
        self._item = item
        self._driver = driver
        self._ocdbt = ocdbt
        self.param = param
        self.sharding = sharding

    @classmethod
    def _alike(cls, first: OrbaxArray, param: str, sharding: Any) -> OrbaxArray:
        """An array of `first`'s item, shape, dtype and layout, named `param`: nothing is
        checked or converted again (a checkpoint's arrays share a few shapes and dtypes).

        Example:
            >>> a = OrbaxArray((2, 3), "float32", "/ckpt/0/default", "w", "zarr", True, None)
            >>> b = OrbaxArray._alike(a, "b", None)
            >>> b.shape, b.dtype_name, b.file
            ((2, 3), 'float32', '/ckpt/0/default/b')
        """
        a = _new(cls)
        a.shape, a._dt, a._dtname, a._itemsize, a._dtspec = (
            first.shape, first._dt, first._dtname, first._itemsize, first._dtspec,
        )  # fmt: skip
        a.file, a.offset, a.fortran_order, a._opener, a._seekable, a.source, a.view_of = (
            f"{first._item}/{param}", 0, False, None, False, None, None,
        )  # fmt: skip
        a._item, a._driver, a._ocdbt, a.param, a.sharding = (
            first._item, first._driver, first._ocdbt, param, sharding,
        )  # fmt: skip
        return a

    def __repr__(self) -> str:
        return super().__repr__().replace("LazyArray(", "OrbaxArray(", 1)

    def spec(self) -> dict[str, Any]:
        """The tensorstore spec of this array (JSON kvstores: nothing is percent-decoded)."""
        param = check_component(self.param, self._item)
        if self._ocdbt:
            kv: dict[str, Any] = {
                "driver": "ocdbt",
                "base": fs.kvstore(self._item),
                "path": f"{param}/",
            }
        else:
            kv = fs.kvstore(fs.join(self._item, param))
        return {"driver": self._driver, "kvstore": kv}

    def _store(self) -> Any:
        """The opened tensorstore, after the path and size checks (see `allow_fill`)."""
        stored = stored_bytes(self._item, self.param, self._ocdbt)
        check_claim(self.nbytes, stored, self.file, f"array {_dtype_label(self)}")
        ts = _tensorstore(self._item)
        try:
            return fs.result(ts.open(self.spec(), open=True, read=True), self.file)
        except (ValueError, RuntimeError) as e:
            raise LoadError(f"{self.file}: cannot open the array: {_ts_error(e)}") from None

    def _read_block(self, store: Any, index: tuple) -> np.ndarray:
        import numpy as np

        try:
            return np.asarray(fs.result(store[index].read(), self.file))
        except (ValueError, RuntimeError) as e:
            raise LoadError(f"{self.file}: cannot read the array: {_ts_error(e)}") from None

    def read(self) -> np.ndarray:
        """Read the whole array (refused when it claims far more than is stored)."""
        import numpy as np

        store = self._store()
        out = np.ascontiguousarray(self._read_block(store, ()))
        if out.shape != self.shape and out.size == self.size:
            out = out.reshape(self.shape)  # orbax stores a scalar as an array of shape (1,)
        return out

    def __getitem__(self, index: Any) -> np.ndarray:
        rows = _row_range(index, self.shape[0]) if self.shape else None
        if rows is not None:  # rows of the leading axis: one tensorstore slice
            start, stop, squeeze = rows
            block = self._read_block(self._store(), (slice(start, stop),))
            return block[0] if squeeze else block
        return self.read()[index]

    def corners(self, edge: int = 3) -> np.ndarray | None:
        """The first and last `edge` entries along each axis, read as one tensorstore slice."""
        import numpy as np

        if self.ndim > 4:
            return None
        store = self._store()
        picks = tuple(
            list(range(n)) if n <= 2 * edge else [*range(edge), *range(n - edge, n)]
            for n in self.shape
        )
        try:
            return np.asarray(fs.result(store.oindex[picks].read(), self.file))
        except (ValueError, RuntimeError) as e:
            raise LoadError(f"{self.file}: cannot read the array: {_ts_error(e)}") from None

    def iter_chunks(self, max_elems: int = 1 << 20) -> Iterator[np.ndarray]:
        """The elements in C order, as 1-D chunks of at most `max_elems`, read slice by slice."""
        import numpy as np

        store = self._store()
        for block in c_order_blocks(self.shape, max_elems):
            yield np.ascontiguousarray(self._read_block(store, block)).reshape(-1)

    def _open(self) -> IO[bytes]:
        return io.BytesIO(self.read().tobytes())


def _ts_error(e: BaseException) -> str:
    """tensorstore's message without the spec it appends (`[tensorstore_spec=...]`)."""
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text.split(" [tensorstore_spec=")[0].split(" [source locations=")[0]


def _dtype_label(x: LazyArray) -> str:
    return f"{short_dtype(x.dtype)}[{','.join(map(str, x.shape))}]"


def _tensorstore(item: str) -> Any:
    try:
        import tensorstore
    except ImportError:
        raise LoadError(
            f"{item}: reading an orbax OCDBT checkpoint needs tensorstore "
            "(pip install 'treetool[orbax]')"
        ) from None
    return tensorstore
