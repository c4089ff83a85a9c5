"""Diffs of two pytrees: alignment, leaf comparison, the `TreeDiff` result and mismatch explanations.

Modules:
    _align: Aligning the children of two sequences, and structural signatures of subtrees.
    _compare: Comparing two leaves: shape, dtype, values (in chunks, NaN equal to NaN) and sharding.
    _explain: Why `jax.tree_util.tree_map(f, a, b)` fails: every structural mismatch, by key path.
    _nodes: How a diff names and describes a node, and compares a custom node's static (aux) data.
    _tree_diff: Structural and value diff of two pytrees, aligned by path, and explanations of mismatches.
"""
