"""The front door to drawing: `render`, `show`, `to_html` (the front-end layer).

Modules:
    _html: `to_html`: one self-contained HTML fragment per object, foldable without script.
    _render: `render(obj)` and `lower(obj, medium)`: results draw themselves, the rest as a tree.
    _show: `show()`: HTML in a notebook, the TUI at an interactive terminal, text elsewhere.
"""

from treetool._display._html import to_html as to_html
from treetool._display._render import lower as lower
from treetool._display._render import render as render
from treetool._display._show import environment as environment
from treetool._display._show import show as show
