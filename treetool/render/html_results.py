"""HTML of a `Summary` (a table with a params bar per row) and of a `Placement`.

A placement draws what the terminal draws (`render.devices.PlacementView`): the summary line,
one bytes bar per device (plain HTML and CSS), the mesh axes, the leaves grouped by sharding,
and the warnings.
"""

from __future__ import annotations

from typing import Any

from treetool._sharding._devices import Placement, layout_label
from treetool._summary._summary import Summary
from treetool.render._registry import register
from treetool.render.html_base import PATH_LIMIT, badge, clip, copy_button, esc, wrap
from treetool.render.labels import fmt_bytes, fmt_count

__all__ = ["placement_html", "summary_html"]


def _bar(value: int, top: int, *, small: bool = False) -> str:
    pct = 0.0 if top <= 0 else max(min(100.0 * value / top, 100.0), 0.0)
    cls = "tt-bar tt-sm" if small else "tt-bar"
    return f'<span class="{cls}"><span style="width:{pct:.1f}%"></span></span>'


def _dtypes(counter: Any) -> str:
    return "".join(
        badge(k + (f" ×{v}" if v > 1 else ""), k)
        for k, v in counter.most_common()  # numpy names, as the terminal's table
    )


def _path_cell(path: str, cls: str = "") -> str:
    if not path:
        return '<td class="tt-dim">(root)</td>'
    p = esc(clip(path, PATH_LIMIT))
    td = f'<td class="{cls}">' if cls else "<td>"
    return f'{td}<span class="tt-k" title="{p}">{p}</span>{copy_button(path)}</td>'


def summary_html(s: Any) -> str:
    """The HTML fragment of a Summary (see `treetool.render.html.to_html`).

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
    for r in s.rows:
        pct = f"{100 * r.params / total.params:.1f}%" if total.params else ""
        out.append(
            f"<tr>{_path_cell(r.path)}<td>{badge(r.type, None)}</td>"
            f'<td class="tt-n">{fmt_count(r.leaves)}</td><td class="tt-n">{fmt_count(r.params)}</td>'
            f'<td class="tt-n">{pct}</td><td>{_bar(r.params, total.params, small=True)}</td>'
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
            f'<div class="tt-warn">tied: one array at {len(paths)} paths '
            f"({esc(', '.join(paths))}), {fmt_count(params)} params counted once in the total</div>"
        )
    return wrap("summary", "".join(out))


def _leaves(n: int) -> str:
    return f"{n:,} {'leaf' if n == 1 else 'leaves'}"


def placement_html(
    p: Any, *, per_group: int = 8, max_groups: int = 20, max_devices: int = 64
) -> str:
    """The HTML fragment of a Placement (see `treetool.render.html.to_html`).

    Example:
        >>> import numpy as np, treetool as tt
        >>> page = placement_html(tt.placement({"a": np.zeros(4, np.float32)}))
        >>> "host" in page and "16 B" in page
        True
    """
    from treetool.render.devices import PlacementView

    pv = PlacementView(p)
    out = [f'<div class="tt-head"><b>{esc(pv.summary().plain)}</b></div>']
    out.append(_device_bars(p, max_devices))
    axes = pv.axes()
    if axes is not None:
        out.append(f'<div class="tt-m">{esc(axes.plain)}</div>')
    out.append(_sharding_table(p, per_group, max_groups))
    for w in p.warnings:
        out.append(f'<div class="tt-warn">⚠ {esc(w.message)}</div>')
    return wrap("placement", "".join(out))


def _device_bars(p: Any, max_devices: int) -> str:
    rows: list[tuple[str, int, int, str]] = []
    for u in list(p.per_device.values())[:max_devices]:
        rows.append((u.name + ("" if u.addressable else "*"), u.bytes, u.leaves, ""))
    host = sum(1 for lp in p.leaves.values() if lp.kind == "host")
    files = sum(1 for lp in p.leaves.values() if lp.kind == "file")
    if host:
        rows.append(("host", p.host_bytes, host, "tt-dim"))
    if files:
        rows.append(("file", p.file_bytes, files, "tt-dim"))
    if not rows:
        return '<div class="tt-dim">no arrays on devices, on the host or in files</div>'
    top = max(r[1] for r in rows)
    out = ['<table class="tt-tab"><tbody>']
    for name, nbytes, leaves, cls in rows:
        out.append(
            f'<tr><td class="{cls or "tt-v"}">{esc(name)}</td><td>{_bar(nbytes, top)}</td>'
            f'<td class="tt-n">{fmt_bytes(nbytes)}</td><td class="tt-m">{_leaves(leaves)}</td></tr>'
        )
    out.append("</tbody></table>")
    hidden = len(p.per_device) - max_devices
    if hidden > 0:
        out.append(f'<div class="tt-more">… {hidden} more devices</div>')
    if any(not u.addressable for u in p.per_device.values()):
        out.append('<div class="tt-dim">* not addressable from this process</div>')
    return "".join(out)


def _sharding_table(p: Any, per_group: int, max_groups: int) -> str:
    out = [
        '<table class="tt-tab"><thead><tr><th>sharding / leaf</th><th>array</th><th>block</th>'
        '<th class="tt-n">copies</th><th class="tt-n">bytes</th></tr></thead><tbody>'
    ]
    groups = list(p.shardings.items())
    for desc, paths in groups[:max_groups]:
        leaves = [p.leaves[q] for q in paths]
        total = sum(lp.nbytes for lp in leaves)
        out.append(
            f'<tr class="tt-grp"><td>{esc(desc)}</td><td class="tt-m">{_leaves(len(leaves))}</td>'
            f'<td></td><td></td><td class="tt-n">{fmt_bytes(total)}</td></tr>'
        )
        for lp in leaves[:per_group]:
            block = lp.shard_shape
            block_text = (
                "" if block is None or not lp.on_device else f"[{','.join(map(str, block))}]"
            )
            out.append(
                f"<tr>{_path_cell(str(lp.path), 'tt-in')}<td>{badge(layout_label(lp), lp.dtype)}</td>"
                f"<td>{esc(block_text)}</td>"
                f'<td class="tt-n">{f"×{lp.replication}" if lp.on_device else ""}</td>'
                f'<td class="tt-n">{fmt_bytes(lp.nbytes)}</td></tr>'
            )
        if len(leaves) > per_group:
            out.append(
                f'<tr><td class="tt-more" colspan="5">… {len(leaves) - per_group:,} more</td></tr>'
            )
    out.append("</tbody></table>")
    if len(groups) > max_groups:
        out.append(f'<div class="tt-more">… {len(groups) - max_groups} more shardings</div>')
    return "".join(out)


def _summary_html(s: Summary, **_: Any) -> str:
    return summary_html(s)


def _placement_html(p: Placement, **_: Any) -> str:
    return placement_html(p)


register(Summary, html=_summary_html)
register(Placement, html=_placement_html)
