"""Where every leaf lives: device placement, per-leaf placement facts and block layouts.

Modules:
    _devices: Device placement and sharding: where every leaf lives, and how memory is spread.
    _layout: Block layouts of shardings: which device holds which block of an array.
    _leaf_placement: Placement facts of one leaf (`LeafPlacement`) and of one device, mesh axis or warning.
    _placement: `Placement`: where every leaf of a tree lives, per leaf, per device and per mesh axis.
"""
