"""HTML of a `Summary`: a table with a params bar per row, and the tied arrays.

Imported by `Summary` itself, the first time it is drawn as HTML; it never imports the result
module back.
"""

from __future__ import annotations

from typing import Any

from treetool._lowering._html_base import badge, bar_html, esc, path_cell, wrap
from treetool._lowering._labels import fmt_bytes, fmt_count

__all__ = ["summary_html"]


def _dtypes(counter: Any) -> str:
    return "".join(
        badge(k + (f" ×{v}" if v > 1 else ""), k)
        for k, v in counter.most_common()  # numpy names, as the terminal's table
    )


def summary_html(s: Any) -> str:
    """The HTML fragment of a Summary (see `treetool._display.to_html`).

    Example:
        >>> import numpy as np, treetool as tt
        >>> page = summary_html(tt.summary({"enc": {"w": np.ones((4, 4), np.float32)}}))
        >>> "<td class=\\"tt-n\\">16</td>" in page
        True
    """
    total = s.total
    out = [
        '<table class="tt-tab"><thead><tr><th>path</th><th>type</th><th class="tt-n">leaves</th>'
        '<th class="tt-n">params</th><th class="tt-n">%</th><th></th><th class="tt-n">bytes</th>'
        "<th>dtypes</th></tr></thead><tbody>"
    ]
    for r in [*s.rows, s.more] if s.more is not None else s.rows:
        pct = f"{100 * r.params / total.params:.1f}%" if total.params else ""
        out.append(
            f"<tr>{path_cell(r.path) if r is not s.more else _more_cell(r.path)}<td>{badge(r.type, None)}</td>"
            f'<td class="tt-n">{fmt_count(r.leaves)}</td><td class="tt-n">{fmt_count(r.params)}</td>'
            f'<td class="tt-n">{pct}</td><td>{bar_html(r.params, total.params, small=True)}</td>'
            f'<td class="tt-n">{fmt_bytes(r.nbytes)}</td><td>{_dtypes(r.dtypes)}</td></tr>'
        )
    out.append(
        f"</tbody><tfoot><tr><td>total</td><td>{badge(total.type, None, root=True)}</td>"
        f'<td class="tt-n">{fmt_count(total.leaves)}</td>'
        f'<td class="tt-n">{fmt_count(total.params)}</td>'
        f'<td class="tt-n">{"100%" if total.params else ""}</td><td></td>'
        f'<td class="tt-n">{fmt_bytes(total.nbytes)}</td><td>{_dtypes(total.dtypes)}</td></tr>'
        "</tfoot></table>"
    )
    for paths, params in s.tied:
        out.append(
            f'<div class="tt-warn">tied: {len(paths)} paths share memory '
            f"({esc(', '.join(paths))}), {fmt_count(params)} params counted once in the total</div>"
        )
    return wrap("summary", "".join(out))


def _more_cell(text: str) -> str:
    """The cell of the "N more" row: not a path, so no copy button."""
    return f'<td class="tt-dim">{esc(text)}</td>'
