"""Leaf facts: shape, dtype, bytes, devices, keys, stats, and file-backed `LazyArray` leaves.

Facts come from metadata only; array data is read by `stats` (in chunks) and by
`np.asarray(lazy_array)`. jax is never imported here: a jax array can only exist when jax
has already been imported, so `sys.modules` tells whether to look for one.
"""

from __future__ import annotations

from treetool._leaves._dtypes import dtype_bits as dtype_bits
from treetool._leaves._dtypes import dtype_name as dtype_name
from treetool._leaves._dtypes import scalar_value as scalar_value
from treetool._leaves._dtypes import short_dtype as short_dtype
from treetool._leaves._dtypes import values_list as values_list
from treetool._leaves._facts import LeafInfo as LeafInfo
from treetool._leaves._facts import is_array as is_array
from treetool._leaves._facts import is_key as is_key
from treetool._leaves._facts import leaf_info as leaf_info
from treetool._leaves._facts import may_be_raw_key as may_be_raw_key
from treetool._leaves._lazy_array import LazyArray as LazyArray
from treetool._leaves._lazy_array import _row_range as _row_range
from treetool._leaves._stats import Stats as Stats
from treetool._leaves._stats import _as_float as _as_float
from treetool._leaves._stats import _chunks as _chunks
from treetool._leaves._stats import has_stats as has_stats
from treetool._leaves._stats import stats as stats

__all__ = [
    "LazyArray",
    "LeafInfo",
    "Stats",
    "dtype_bits",
    "dtype_name",
    "is_array",
    "is_key",
    "has_stats",
    "leaf_info",
    "may_be_raw_key",
    "scalar_value",
    "values_list",
    "short_dtype",
    "stats",
]
