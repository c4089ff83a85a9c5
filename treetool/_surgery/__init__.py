"""Model surgery: `tree_at`, selections, copy-on-write edits and structural edits.

Modules:
    _edit: Copy-on-write edits of pytrees: only the spine from the root to each edited node is rebuilt.
    _recorder: Replaying a `where` function on a recording proxy, to learn the paths it picks.
    _restructure: Structural edits that `tree_at` cannot express: insert, rename; partition and combine.
    _select: Model surgery: the public names, and selections that edit.
    _selectors: Selectors: what `select`, `partition` and `delete` accept, and finding what they pick.
    _tree_at: `tree_at`: equinox's `tree_at`, plus path strings and globs, editing only the spines.
"""
