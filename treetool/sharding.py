"""Where every leaf of a pytree lives: devices, shardings, per-device memory, mesh axes.

`import treetool.sharding as tts` (the four names are also at `tt.*`):

- `placement`: the `Placement` of a tree: per leaf, per device and per mesh axis;
- `Placement`: the result: `p[path]`, `p.per_device`, `p.host_bytes`, its warnings;
- `LeafPlacement`: one leaf: its kind (host, single, named, ...), shard shape, replication;
- `DeviceUsage`: one device: the bytes and the leaves it holds.

Example:
    >>> import jax, numpy as np
    >>> import treetool.sharding as tts
    >>> p = tts.placement({"w": jax.device_put(np.zeros((4, 2), np.float32)), "b": np.zeros(2)})
    >>> p["w"].kind, p["w"].shard_shape, p["b"].kind, p.host_bytes
    ('single', (4, 2), 'host', 16)
    >>> isinstance(p, tts.Placement), type(p["w"]).__name__
    (True, 'LeafPlacement')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treetool._public import lazy_names

if TYPE_CHECKING:
    # Generated from `_LAZY` (below) by `python tests/project/test_typecheck.py`: the
    # names loaded on first use, imported for type checkers and editors only.
    from treetool._sharding._devices import placement as placement
    from treetool._sharding._leaf_placement import DeviceUsage as DeviceUsage
    from treetool._sharding._leaf_placement import LeafPlacement as LeafPlacement
    from treetool._sharding._placement import Placement as Placement

#: name -> the module it is imported from, on first use; the block above is generated from it
_LAZY: dict[str, str] = {
    "DeviceUsage": "treetool._sharding._leaf_placement",
    "LeafPlacement": "treetool._sharding._leaf_placement",
    "placement": "treetool._sharding._devices",
    "Placement": "treetool._sharding._placement",
}

__all__ = sorted(_LAZY)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_names(__name__, _LAZY)
