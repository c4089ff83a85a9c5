"""`summary(tree, depth)`: parameters, bytes and dtypes per subtree.

Modules:
    _summary: `summary(tree, depth)`: parameters, bytes and dtypes per subtree, with honest totals.
"""
