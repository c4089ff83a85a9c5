"""Pytree techniques for transformations: batch axes, key trees and `autojit`.

Modules:
    _autojit: `autojit`: jit any function of pytrees; arrays are traced, every other leaf is static.
    _axes: Pytree techniques for transformations: batch axes for vmap, and independent key trees.
"""
