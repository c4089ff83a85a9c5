"""Paths into pytrees: `Path`, its key entries, parsing and glob matching.

Modules:
    _keys: Path key entries: one step of a path, mirroring jax's key entries, and the pattern steps.
    _match: Glob matching of paths: `*` one step, `**` any number of steps, `[*]`, `.lin*`.
    _parse: Parsing path text: keystr form (`['a'][0].w`), dotted form (`a.0.w`) and globs (`**.bias`).
    _path: Paths into pytrees: the `Path` class, and the names of its parts re-exported in one place.
"""
