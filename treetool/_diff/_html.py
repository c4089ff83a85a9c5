"""HTML of a `TreeDiff`, coloured like the terminal: `+` added, `-` removed, `~` changed.

The rows are the rich view's (`_diff._rich.DiffView`): changes grouped under their common
parents, chains of parents with one changed child folded into one row (`.layers[1]`), a dim
`· N unchanged` row where a parent has untouched children, and a header that counts them.
"""

from __future__ import annotations

from typing import Any

from treetool._diff._rich import DiffView, _Group, change_text, group_changes
from treetool._lowering._html_base import PATH_LIMIT, clip, copy_button, esc, wrap

__all__ = ["diff_html"]

#: changes drawn before `… N more changes` (as in the terminal)
LIMIT = 1000

_SIGN_CLASS = {"+": "tt-add", "-": "tt-rm", "~": "tt-chg"}
#: a faint background on changed rows, as in a code review
_ROW_CLASS = {"+": "tt-ra", "-": "tt-rr", "~": "tt-rc"}


def _header(diff: Any) -> str:
    if not diff.changes:
        return '<div class="tt-head"><b class="tt-add">no differences</b></div>'
    n = len(diff.changes)
    out = [f'<div class="tt-head"><b>{n:,} change{"s" if n != 1 else ""}</b>']
    counts = diff.counts
    for sign, name in (("+", "added"), ("-", "removed"), ("~", "changed")):
        if counts[name]:
            out.append(f'<b class="{_SIGN_CLASS[sign]}">{sign}{counts[name]:,} {name}</b>')
    changed = [(k, v) for k, v in diff.by_kind.items() if k not in ("added", "removed")]
    if changed:
        kinds = ", ".join(f"{v:,} {k}" for k, v in changed)
        out.append(f'<span class="tt-m">({esc(kinds)})</span>')
    out.append("</div>")
    return "".join(out)


class _DiffHtml(DiffView):
    """DiffView's grouping, drawn as nested `<details>`."""

    def html(self) -> str:
        diff = self.diff
        head = _header(diff)
        if not diff.changes:
            return head
        root, shown = group_changes(diff.changes, self.limit)
        self._complete = len(shown) == len(diff.changes)
        out = [head]
        rest = len(diff.changes) - len(shown)
        tail = f'<div class="tt-more">… {rest:,} more changes</div>' if rest else ""
        self._emit(root, "", out, tail)
        return "".join(out)

    def _emit(self, root: _Group, key: str, out: list[str], tail: str) -> None:
        stack: list[Any] = [(root, key, tail)]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                out.append(item)
                continue
            g, key_text, extra = item
            row = self._row_html(g, key_text)
            unchanged = self._unchanged(g)
            tint = f" {_ROW_CLASS[g.change.sign]}" if g.change is not None and g.keys else ""
            if not g.kids and not extra:
                out.append(f'<div class="tt-l{tint}">{row}</div>')
                continue
            summary = f'<summary class="{tint[1:]}">' if tint else "<summary>"
            out.append(f'<details open>{summary}{row}</summary><div class="tt-c">')
            close = ""
            if unchanged:
                close += f'<div class="tt-more">· {unchanged:,} unchanged</div>'
            stack.append(close + extra + "</div></details>")
            pending = []
            for kid in g.kids.values():
                text = str(kid.key)
                # fold chains of groups that hold nothing but one changed child
                while kid.change is None and len(kid.kids) == 1 and self._unchanged(kid) == 0:
                    kid = next(iter(kid.kids.values()))
                    text += str(kid.key)
                pending.append((kid, text, ""))
            stack.extend(reversed(pending))

    def _row_html(self, g: _Group, key_text: str) -> str:
        c = g.change
        path = "".join(map(str, g.keys))
        out = []
        if not g.keys and (c is None or c.kind != "node_type"):
            out.append(f'<span class="tt-t tt-root">{esc(self._type_label(g))}</span>')
        if c is not None:
            cls = _SIGN_CLASS[c.sign]
            out.append(f'<span class="{cls}"><span class="tt-sign">{c.sign}</span>')
            if key_text:
                title = esc(clip(c.path, PATH_LIMIT))
                out.append(f'<span class="tt-k" title="{title}">{esc(clip(key_text))}</span>')
            if c.kind not in ("added", "removed"):
                out.append(f'<span class="tt-kd">{esc(c.kind)}</span>')
            out.append(f'</span><span class="tt-w">{esc(clip(change_text(c), 1000))}</span>')
            if key_text:
                out.append(copy_button(c.path))
            return "".join(out)
        if key_text:
            title = esc(clip(path, PATH_LIMIT))
            out.append(f'<span class="tt-k" title="{title}">{esc(clip(key_text))}</span>')
            out.append(f'<span class="tt-m">{esc(self._type_label(g))}</span>{copy_button(path)}')
        return "".join(out)


def diff_html(diff: Any, *, limit: int = LIMIT) -> str:
    """The HTML fragment of a TreeDiff (see `treetool._display.to_html`).

    Example:
        >>> import treetool as tt
        >>> page = diff_html(tt.diff({"a": 1.0}, {"a": 2.0, "b": 1}))
        >>> "+1 added" in page and "1.0 → 2.0" in page
        True
    """
    return wrap("diff", _DiffHtml(diff, limit=limit).html())
