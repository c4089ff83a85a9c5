"""A tree of rows drawn with Textual's Line API: `RowTree`, a `ScrollView` over `TreeRow`s.

It looks and answers keys like `textual.widgets.Tree` (the same guides, icons, component
classes and keys) through Textual's public API only, and builds its lines without one
recursion per level: a row 1,000 levels deep is drawn, and indented, like one `MAX_GUIDES`
levels deep. `PytreeTree` is a `RowTree` over treetool's node model.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import ClassVar, Generic, TypeVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip

__all__ = ["MAX_GUIDES", "TreeRow", "RowTree"]

#: rows deeper than this many levels are indented no further (drawing guides is per level)
MAX_GUIDES = 40
#: lines drawn that are kept for the next paint (a held key repaints two rows, not all)
LINE_CACHE = 1024

T = TypeVar("T")
#: the data of the rows a message is about
M = TypeVar("M")

_TOGGLE = Style.from_meta({"toggle": True})
_PLAIN = Style()


class TreeRow(Generic[T]):
    """A row of a `RowTree`: a label, the data it stands for, and its child rows."""

    def __init__(
        self, tree: RowTree[T], parent: TreeRow[T] | None, label: Text, data: T | None, leaf: bool
    ) -> None:
        self.tree = tree
        self.parent = parent
        self.label = label
        self.data = data
        self.id = tree.new_row_id()
        self.kids: list[TreeRow[T]] = []
        self.expanded = False
        self.openable = not leaf
        #: the line of the row in the lines built in `generation` of its tree
        self.line_no = -1
        self.generation = -1

    def __repr__(self) -> str:
        return f"TreeRow({self.label.plain!r})"

    @property
    def children(self) -> tuple[TreeRow[T], ...]:
        return tuple(self.kids)

    @property
    def line(self) -> int:
        """The row's line in the tree as drawn now; -1 when it is not drawn (a closed
        parent) or the lines are not built yet."""
        return self.line_no if self.generation == self.tree.generation else -1

    @property
    def is_expanded(self) -> bool:
        return self.expanded

    @property
    def is_collapsed(self) -> bool:
        return not self.expanded

    @property
    def allow_expand(self) -> bool:
        return self.openable

    @property
    def is_root(self) -> bool:
        return self.parent is None

    @property
    def is_last(self) -> bool:
        return self.parent is None or self.parent.kids[-1] is self

    def set_label(self, label: Text | str) -> None:
        self.label = self.tree.process_label(label)
        self.tree.invalidate(layout=False)

    def add(
        self, label: Text | str, data: T | None = None, *, before: TreeRow[T] | None = None
    ) -> TreeRow[T]:
        """A child row that can be opened, before `before` (one of the children) or last."""
        return self._add(label, data, before, leaf=False)

    def add_leaf(
        self, label: Text | str, data: T | None = None, *, before: TreeRow[T] | None = None
    ) -> TreeRow[T]:
        """A child row that cannot be opened."""
        return self._add(label, data, before, leaf=True)

    def _add(
        self, label: Text | str, data: T | None, before: TreeRow[T] | None, leaf: bool
    ) -> TreeRow[T]:
        row = TreeRow(self.tree, self, self.tree.process_label(label), data, leaf)
        if before is None:
            self.kids.append(row)
        else:
            self.kids.insert(self.kids.index(before), row)
        self.tree.invalidate()
        return row

    def remove(self) -> None:
        """Take the row (and its rows) out of the tree."""
        if self.parent is None:
            raise ValueError("the root row cannot be removed")
        self.parent.kids.remove(self)
        self.tree.invalidate()

    def remove_children(self) -> None:
        self.kids.clear()
        self.tree.invalidate()

    def expand(self) -> TreeRow[T]:
        """Open the row; the tree posts `NodeExpanded` (rows are added lazily on it)."""
        if not self.expanded:
            self.expanded = True
            self.tree.invalidate()
            self.tree.post_message(RowTree.NodeExpanded(self))
        return self

    def collapse(self) -> TreeRow[T]:
        if self.expanded:
            self.expanded = False
            self.tree.invalidate()
            self.tree.post_message(RowTree.NodeCollapsed(self))
        return self

    def toggle(self) -> TreeRow[T]:
        return self.collapse() if self.expanded else self.expand()


class _Line(Generic[T]):
    """One drawn line: the rows from the root (at most `MAX_GUIDES`) and whether the row is
    the last of its parent's."""

    __slots__ = ("last", "path")

    def __init__(self, path: list[TreeRow[T]], last: bool) -> None:
        self.path = path
        self.last = last

    @property
    def row(self) -> TreeRow[T]:
        return self.path[-1]


class RowTree(ScrollView, Generic[T], can_focus=True):
    """A tree of `TreeRow`s that looks and answers keys like Textual's `Tree`."""

    ICON_NODE = "▶ "
    ICON_NODE_EXPANDED = "▼ "

    GUIDES: ClassVar[dict[str, tuple[str, str, str, str]]] = {
        "default": ("  ", "│ ", "└─", "├─"),
        "bold": ("  ", "┃ ", "┗━", "┣━"),
        "double": ("  ", "║ ", "╚═", "╠═"),
    }

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("shift+left", "cursor_parent", "Cursor to parent", show=False),
        Binding("shift+right", "cursor_parent_next_sibling", "Cursor to next ancestor", show=False),
        Binding("shift+up", "cursor_previous_sibling", "Cursor to previous sibling", show=False),
        Binding("shift+down", "cursor_next_sibling", "Cursor to next sibling", show=False),
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("space", "toggle_node", "Toggle", show=False),
        Binding("up", "cursor_up", "Cursor Up", show=False),
        Binding("down", "cursor_down", "Cursor Down", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "tree--cursor",
        "tree--guides",
        "tree--guides-hover",
        "tree--guides-selected",
        "tree--highlight",
        "tree--highlight-line",
        "tree--label",
    }

    DEFAULT_CSS = """
    RowTree {
        background: $surface;
        color: $foreground;
        & > .tree--label {}
        & > .tree--guides { color: $surface-lighten-2; }
        & > .tree--guides-hover { color: $surface-lighten-2; }
        & > .tree--guides-selected { color: $block-cursor-blurred-background; }
        & > .tree--cursor {
            text-style: $block-cursor-blurred-text-style;
            background: $block-cursor-blurred-background;
        }
        & > .tree--highlight {}
        & > .tree--highlight-line { background: $block-hover-background; }
        &:focus {
            background-tint: $foreground 5%;
            & > .tree--cursor {
                color: $block-cursor-foreground;
                background: $block-cursor-background;
                text-style: $block-cursor-text-style;
            }
            & > .tree--guides { color: $surface-lighten-3; }
            & > .tree--guides-hover { color: $surface-lighten-3; }
            & > .tree--guides-selected { color: $block-cursor-background; }
        }
        &:light {
            & > .tree--guides { color: $surface-darken-1; }
            & > .tree--guides-hover { color: $block-cursor-background; }
            & > .tree--guides-selected { color: $block-cursor-background; }
        }
    }
    RowTree:ansi {
        color: ansi_default;
        & > .tree--guides { color: $ansi-background; }
        &:nocolor > .tree--cursor { text-style: reverse; }
    }
    """

    #: the line under the cursor (-1: none)
    cursor_line: var[int] = var(-1, always_update=True)
    #: the line under the mouse pointer (-1: none)
    hover_line: var[int] = var(-1)
    #: cells of indentation per level (2 to 10)
    guide_depth: var[int] = var(4, init=False)
    #: open or close a row when it is selected (enter, a click)
    auto_expand: var[bool] = var(True)
    #: keep the cursor's row in the middle when scrolling to it
    center_scroll: var[bool] = var(False)

    class NodeExpanded(Generic[M], Message):
        """A row was opened."""

        def __init__(self, node: TreeRow[M]) -> None:
            super().__init__()
            self.node: TreeRow[M] = node

    class NodeCollapsed(Generic[M], Message):
        """A row was closed."""

        def __init__(self, node: TreeRow[M]) -> None:
            super().__init__()
            self.node: TreeRow[M] = node

    class NodeSelected(Generic[M], Message):
        """A row was selected (enter, a click)."""

        def __init__(self, node: TreeRow[M]) -> None:
            super().__init__()
            self.node: TreeRow[M] = node

    class NodeHighlighted(Generic[M], Message):
        """The cursor moved onto another row."""

        def __init__(self, node: TreeRow[M]) -> None:
            super().__init__()
            self.node: TreeRow[M] = node

    def __init__(self, label: Text | str, data: T | None = None, *, id: str | None = None) -> None:
        self.next_id = 0
        #: bumped each time the lines are rebuilt: a row's `line` holds for one generation
        self.generation = 0
        self.built: list[_Line[T]] | None = None
        self.cursor_row: TreeRow[T] | None = None
        #: `frame_state()` while a paint draws its lines
        self.frame: tuple[Style, object, bool] | None = None
        self.drawn: OrderedDict[tuple[object, ...], Strip] = OrderedDict()
        self.root: TreeRow[T] = TreeRow(self, None, self.process_label(label), data, leaf=False)
        super().__init__(id=id)

    def new_row_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def process_label(self, label: Text | str) -> Text:
        """A label's first line (a str is plain text, never markup)."""
        text = Text(label) if isinstance(label, str) else label
        lines = text.split()
        return lines[0] if lines else text

    # --- the rows ------------------------------------------------------------------------

    @property
    def cursor_node(self) -> TreeRow[T] | None:
        """The row under the cursor."""
        return self.cursor_row

    def reset(self, label: Text | str, data: T | None = None) -> None:
        """A new root row (no children) in place of every row."""
        self.root = TreeRow(self, None, self.process_label(label), data, leaf=False)
        self.cursor_row = None
        self.invalidate()
        self.cursor_line = -1

    def invalidate(self, layout: bool = True) -> None:
        """The rows changed: the lines are built again (`layout`) and redrawn."""
        if layout:
            self.built = None
        self.drawn.clear()
        self.refresh()

    @property
    def lines(self) -> list[_Line[T]]:
        """The drawn lines, built again when rows changed."""
        if self.built is None:
            self.build_lines()
        assert self.built is not None
        return self.built

    def build_lines(self) -> None:
        """The lines of the open rows, depth first, with no recursion."""
        self.generation += 1
        gen = self.generation
        lines: list[_Line[T]] = []
        add = lines.append
        stack: list[tuple[list[TreeRow[T]], TreeRow[T], bool]] = [([], self.root, True)]
        while stack:
            path, row, last = stack.pop()
            row_path = [*path, row]
            if len(row_path) > MAX_GUIDES:  # deeper rows are indented no further
                row_path = [row_path[0], *row_path[2:]]
            row.line_no, row.generation = len(lines), gen
            add(_Line(row_path, last))
            if row.expanded:
                kids = row.kids
                n = len(kids)
                stack.extend((row_path, kids[i], i == n - 1) for i in range(n - 1, -1, -1))
        self.built = lines
        depth = self.guide_depth
        width = max(self.get_label_width(ln.row) + (len(ln.path) - 1) * depth for ln in lines)
        self.virtual_size = Size(width, len(lines))
        if self.cursor_line != -1:  # as Textual's Tree: the cursor's row, else its line
            cursor = self.cursor_row
            line = cursor.line if cursor is not None and cursor.line >= 0 else self.cursor_line
            self.cursor_line = line if line < len(lines) else -1

    def on_mount(self) -> None:
        self.cursor_line = -1  # validated: the first line, as in Textual's Tree

    def on_idle(self) -> None:
        self.lines  # noqa: B018 (builds the lines once rows changed, between paints)

    def get_node_at_line(self, line: int) -> TreeRow[T] | None:
        lines = self.lines
        return lines[line].row if 0 <= line < len(lines) else None

    def get_label_width(self, node: TreeRow[T]) -> int:
        """The cells of a row's label as `render_label` draws it."""
        return self.render_label(node, _PLAIN, _PLAIN).cell_len

    def render_label(self, node: TreeRow[T], base_style: Style, style: Style) -> Text:
        """A row's label as drawn: the open/closed icon, then the label."""
        label = node.label.copy()
        label.stylize(style)
        if node.openable:
            icon = self.ICON_NODE_EXPANDED if node.expanded else self.ICON_NODE
            return Text.assemble((icon, base_style + _TOGGLE), label)
        return Text.assemble(("", base_style), label)

    def label_region(self, line: int) -> Region | None:
        """Where the label of line `line` is drawn (in the tree's virtual space)."""
        lines = self.lines
        if not 0 <= line < len(lines):
            return None
        ln = lines[line]
        x = (len(ln.path) - 1) * self.guide_depth
        return Region(x, line, self.get_label_width(ln.row), 1)

    # --- the cursor ----------------------------------------------------------------------

    def validate_cursor_line(self, value: int) -> int:
        return max(0, min(value, len(self.lines) - 1))

    def validate_guide_depth(self, value: int) -> int:
        return max(2, min(value, 10))

    def watch_guide_depth(self) -> None:
        self.invalidate()

    def watch_cursor_line(self, previous: int, line: int) -> None:
        row = self.get_node_at_line(line)
        before, self.cursor_row = self.cursor_row, row
        if previous != line:  # lines drawn keep: the cursor's place is in their key
            self.refresh()
        if row is not None and row is not before:
            self.post_message(self.NodeHighlighted(row))

    def watch_hover_line(self) -> None:
        self.refresh()

    def move_cursor(self, node: TreeRow[T] | None, animate: bool = False) -> None:
        """Put the cursor on `node` (None: no cursor) and scroll to it."""
        before = self.cursor_line
        self.lines  # noqa: B018 (rows added this tick get their line numbers)
        self.cursor_line = -1 if node is None else node.line
        if node is not None and self.cursor_row is not None:
            self.scroll_to_line(self.cursor_line, animate=animate and abs(before - node.line) > 1)

    def scroll_to_line(self, line: int, animate: bool = True) -> None:
        region = self.label_region(line)
        if region is not None:
            self.scroll_to_region(
                region,
                animate=animate,
                force=True,
                center=self.center_scroll,
                origin_visible=False,
                x_axis=False,
            )

    def scroll_to_node(self, node: TreeRow[T], animate: bool = True) -> None:
        if node.line >= 0:
            self.scroll_to_line(node.line, animate=animate)

    # --- drawing -------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.drawn.clear()

    def on_resize(self) -> None:
        self.invalidate()

    def render_lines(self, crop: Region) -> list[Strip]:
        self.frame = self.frame_state()  # once per paint, not once per line
        try:
            return super().render_lines(crop)
        finally:
            self.frame = None

    def frame_state(self) -> tuple[Style, object, bool]:
        """What every line of a paint is drawn with: the base style, the pseudo classes
        (focus, hover…) and whether the tree has the focus."""
        return self.rich_style, self.get_pseudo_class_state(), self.has_focus

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        return self.draw_line(y + scroll_y, width).crop(scroll_x, scroll_x + width)

    def draw_line(self, y: int, width: int) -> Strip:
        base_style, pseudo, focus = self.frame or self.frame_state()
        lines = self.lines
        if y >= len(lines):
            return Strip.blank(width, base_style)
        line = lines[y]
        path = line.path
        hover_row = self.get_node_at_line(self.hover_line) if self.hover_line >= 0 else None
        cursor = self.cursor_row
        # where the cursor's and the mouse's rows are on the line's path: its guides light
        # from there (-1: not on it); a line whose key holds is drawn as it was
        cursor_at = hover_at = -1
        for i, r in enumerate(path):
            if r is cursor:
                cursor_at = i
            if r is hover_row:
                hover_at = i
        is_hover = hover_at >= 0
        key: tuple[object, ...] = (y, cursor_at, hover_at, self.cursor_line == y)
        key += (self.hover_line == y, width, pseudo, focus, self.virtual_size.width)
        strip = self.drawn.get(key)
        if strip is not None:
            self.drawn.move_to_end(key)
            return strip
        strip = self.draw_path(line, y, width, base_style, hover_row, cursor, is_hover, focus)
        self.drawn[key] = strip
        if len(self.drawn) > LINE_CACHE:
            self.drawn.popitem(last=False)
        return strip

    def draw_path(
        self,
        line: _Line[T],
        y: int,
        width: int,
        base_style: Style,
        hover_row: TreeRow[T] | None,
        cursor: TreeRow[T] | None,
        is_hover: bool,
        focus: bool,
    ) -> Strip:
        """Textual's `Tree` line: guides (lit under the cursor and the mouse), icon, label."""
        guides_of = self.get_component_styles
        base_hidden = guides_of("tree--guides").color.a == 0
        hover_hidden = guides_of("tree--guides-hover").color.a == 0
        selected_hidden = guides_of("tree--guides-selected").color.a == 0
        style_of = self.get_component_rich_style
        base_guide = style_of("tree--guides", partial=True)
        hover_guide = base_guide + style_of("tree--guides-hover", partial=True)
        selected_guide = base_guide + style_of("tree--guides-selected", partial=True)
        path = line.path
        hover = path[0] is hover_row
        selected = path[0] is cursor and focus
        line_style = style_of("tree--highlight-line") if is_hover else base_style
        line_style += Style(meta={"line": y})
        guides = Text(style=line_style)
        guide_style = base_guide
        hidden = True
        last_row = path[-1]
        for row in path[1:]:
            hidden = base_hidden
            if hover:
                guide_style, hidden = hover_guide, hover_hidden
            if selected:
                guide_style, hidden = selected_guide, selected_hidden
            space, vertical, _, _ = self.guide_chars(guide_style, hidden)
            if row is not last_row:
                guides.append(space if row.is_last else vertical, style=guide_style)
            hover = hover or row is hover_row
            selected = (selected or row is cursor) and focus
        if len(path) > 1:
            _, _, terminator, cross = self.guide_chars(guide_style, hidden)
            guides.append(terminator if line.last else cross, style=guide_style)
        label_style = style_of("tree--label", partial=True)
        if self.hover_line == y:
            label_style += style_of("tree--highlight", partial=True)
        if self.cursor_line == y:
            label_style += style_of("tree--cursor", partial=False)
        label = self.render_label(last_row, line_style, label_style).copy()
        label.stylize(Style(meta={"node": last_row.id}))
        guides.append(label)
        strip = Strip(guides.render(self.app.console))
        pad = max(self.virtual_size.width, width)
        return strip.extend_cell_length(pad, line_style)

    def guide_chars(self, style: Style, hidden: bool) -> tuple[str, str, str, str]:
        """The space, vertical, terminator and cross guides in `style` (blank: `hidden`)."""
        if hidden:
            sets = ("  ", "  ", "  ", "  ")
        else:
            name = "bold" if style.bold else "double" if style.underline2 else "default"
            sets = self.GUIDES[name]
        extra = max(0, self.guide_depth - 2)
        out = tuple(f"{chars[0]}{chars[1] * extra} " for chars in sets)
        return out[0], out[1], out[2], out[3]

    # --- the mouse -----------------------------------------------------------------------

    def on_mouse_move(self, event: events.MouseMove) -> None:
        meta = event.style.meta
        self.hover_line = meta["line"] if meta and "line" in meta else -1

    def on_leave(self) -> None:
        self.hover_line = -1

    def on_click(self, event: events.Click) -> None:
        meta = event.style.meta
        if "line" not in meta:
            return
        line = meta["line"]
        if meta.get("toggle", False):
            row = self.get_node_at_line(line)
            if row is not None and row.openable:
                row.toggle()
        else:
            self.cursor_line = line
            self.action_select_cursor()

    # --- keys ----------------------------------------------------------------------------

    def action_cursor_up(self) -> None:
        self.cursor_line = len(self.lines) - 1 if self.cursor_line == -1 else self.cursor_line - 1
        self.scroll_to_line(self.cursor_line, animate=False)

    def action_cursor_down(self) -> None:
        self.cursor_line = 0 if self.cursor_line == -1 else self.cursor_line + 1
        self.scroll_to_line(self.cursor_line, animate=False)

    def action_page_down(self) -> None:
        if self.cursor_line == -1:
            self.cursor_line = 0
        self.cursor_line += self.scrollable_content_region.height - 1
        self.scroll_to_line(self.cursor_line)

    def action_page_up(self) -> None:
        if self.cursor_line == -1:
            self.cursor_line = len(self.lines) - 1
        self.cursor_line -= self.scrollable_content_region.height - 1
        self.scroll_to_line(self.cursor_line)

    def action_scroll_home(self) -> None:
        self.cursor_line = 0
        self.scroll_to_line(self.cursor_line)

    def action_scroll_end(self) -> None:
        self.cursor_line = len(self.lines) - 1
        self.scroll_to_line(self.cursor_line)

    def action_toggle_node(self) -> None:
        row = self.get_node_at_line(self.cursor_line)
        if row is not None and row.openable:
            row.toggle()

    def action_select_cursor(self) -> None:
        """Post `NodeSelected` for the row under the cursor (and open or close it)."""
        row = self.get_node_at_line(self.cursor_line)
        if row is None:
            return
        self.post_message(self.NodeSelected(row))
        if self.auto_expand and row.openable:
            row.toggle()

    def action_cursor_parent(self) -> None:
        row = self.cursor_row
        if row is not None and row.parent is not None:
            self.move_cursor(row.parent, animate=True)

    def _sibling(self, row: TreeRow[T], step: int) -> TreeRow[T] | None:
        if row.parent is None:
            return None
        kids = row.parent.kids
        at = kids.index(row) + step
        return kids[at] if 0 <= at < len(kids) else None

    def action_cursor_parent_next_sibling(self) -> None:
        row = self.cursor_row
        if row is not None and row.parent is not None:
            nxt = self._sibling(row.parent, 1)
            if nxt is not None:
                self.move_cursor(nxt, animate=True)

    def action_cursor_previous_sibling(self) -> None:
        row = self.cursor_row
        if row is not None:
            self.move_cursor(self._sibling(row, -1) or row.parent, animate=True)

    def action_cursor_next_sibling(self) -> None:
        row = self.cursor_row
        if row is None:
            return
        nxt = self._sibling(row, 1)
        if nxt is None and row.parent is not None:
            nxt = self._sibling(row.parent, 1)
        if nxt is not None:
            self.move_cursor(nxt, animate=True)
