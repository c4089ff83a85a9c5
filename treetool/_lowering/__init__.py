"""The lowering kit: what every drawing shares, below the results that own their lowerings.

Modules:
    _drawn: The `__treetool_lower__` protocol, and the mixins (`_repr_html_`, `__rich_console__`).
    _html_base: HTML parts every view shares: escaping, the scoped stylesheet, badges, bars.
    _labels: The one set of node labels every view shows (rich, TUI, HTML, CLI).
    _plain: Plain text of a renderable, and the line width output gets.
    _rows: The rows of a drawn tree: labels as rich Text, runs of identical siblings folded.
"""
