"""The tree: the node-type table, walks, flat views, the `Node` model, totals, lookups, custom nodes,
the leaf index and search.

Modules:
    _chain: Where a path is in the Node model (`node_chain`), and its Python expression.
    _haystack: Every leaf path in one byte buffer, searched with numpy.
    _leaf_index: `LeafIndex`: columns over every leaf (the TUI's Leaves table, search, `ls --search`).
    _lookup: Finding nodes by path: `get`/`resolve` (one exact or loose path) and `find` (globs).
    _model: The Node model: one lazy view of any pytree, shared by every renderer.
    _node_table: The node-type table: how to open any object one level, the way jax does.
    _nodes: Registering custom node classes with jax, with key paths and static fields.
    _search: Searching leaves as the TUI's `/` does: globs over nodes, text over the index.
    _totals: One totals pass: leaves, params, bytes, dtypes, devices, tied arrays once, error entries.
    _views: Flat views of pytrees: leaves with paths, flatten/unflatten, flat dicts, non-finite leaves.
    _walk: The walks behind the flat views: every leaf with its path, in jax's order.
"""
