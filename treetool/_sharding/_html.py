"""HTML of a `Placement`: what the terminal draws (`_sharding._rich.PlacementView`).

The summary line, one bytes bar per device (plain HTML and CSS), the mesh axes, the leaves
grouped by sharding, and the warnings. Imported by `Placement` itself, the first time it is
drawn as HTML; it never imports the result module back (types only under TYPE_CHECKING).
"""

from __future__ import annotations

from typing import Any

from treetool._lowering._html_base import badge, bar_html, esc, path_cell, wrap
from treetool._lowering._labels import fmt_bytes
from treetool._sharding._layout import layout_label

__all__ = ["placement_html"]


def _leaves(n: int) -> str:
    return f"{n:,} {'leaf' if n == 1 else 'leaves'}"


def placement_html(
    p: Any, *, per_group: int = 8, max_groups: int = 20, max_devices: int = 64
) -> str:
    """The HTML fragment of a Placement (see `treetool._display.to_html`).

    Example:
        >>> import numpy as np, treetool as tt
        >>> page = placement_html(tt.placement({"a": np.zeros(4, np.float32)}))
        >>> "host" in page and "16 B" in page
        True
    """
    from treetool._sharding._rich import PlacementView

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
            f'<tr><td class="{cls or "tt-v"}">{esc(name)}</td><td>{bar_html(nbytes, top)}</td>'
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
                f"<tr>{path_cell(str(lp.path), 'tt-in')}<td>{badge(layout_label(lp), lp.dtype)}</td>"
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
