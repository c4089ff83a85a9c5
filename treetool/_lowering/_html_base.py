"""The parts every HTML view shares: escaping, the scoped stylesheet, the copy script, badges.

Everything here builds strings. Every text that comes from a tree (keys, reprs, type names,
paths) goes through `esc` before it is written, since checkpoints are untrusted input.
"""

from __future__ import annotations

import html
from typing import Any

from treetool._leaves._arrays import Stats, short_dtype
from treetool._lowering._labels import NodeLabel, dtype_style, fmt_bytes, fmt_count

__all__ = [
    "CSS",
    "PATH_LIMIT",
    "SCRIPT",
    "badge",
    "bar_html",
    "clip",
    "copy_button",
    "dtype_class",
    "esc",
    "histogram_svg",
    "label_html",
    "num",
    "path_cell",
    "stats_html",
    "wrap",
]


#: paths longer than this are shown cut (and get no copy button); long texts are cut too
PATH_LIMIT = 2000
TEXT_LIMIT = 300


def clip(text: str, limit: int = TEXT_LIMIT) -> str:
    """`text`, cut to `limit` characters with a trailing `…` (keeps a hostile key small).

    Example:
        >>> clip("abcdef", 4)
        'abc…'
    """
    return text if len(text) <= limit else text[: limit - 1] + "…"


def esc(text: Any) -> str:
    """`text` escaped for HTML text and for double- or single-quoted attribute values.

    Example:
        >>> esc("<script>alert('x')</script>")
        '&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;'
    """
    return html.escape(str(text), quote=True)


# rich colour of a dtype (labels.DTYPE_STYLES) -> the CSS class of its badge
DTYPE_CLASSES = {
    "cyan": "tt-f",
    "bright_cyan": "tt-bf",
    "magenta": "tt-i",
    "bright_magenta": "tt-u",
    "blue": "tt-cx",
    "yellow": "tt-b",
    "green": "tt-key",
}


def dtype_class(dtype: str | None) -> str:
    """The badge class of a dtype, the same colour family as in the terminal.

    Example:
        >>> dtype_class("float32"), dtype_class("bfloat16"), dtype_class("int8"), dtype_class(None)
        ('tt-f', 'tt-bf', 'tt-i', 'tt-o')
    """
    return DTYPE_CLASSES.get(dtype_style(dtype), "tt-o")


def badge(text: str, dtype: str | None, *, root: bool = False) -> str:
    """A type badge: `f32[3,4]` coloured by dtype; node types without a dtype are plain."""
    if root:
        return f'<span class="tt-t tt-root">{esc(text)}</span>'
    cls = dtype_class(dtype) if dtype else "tt-o"
    return f'<span class="tt-t {cls}">{esc(text)}</span>'


def copy_button(path: str = "") -> str:
    """The copy-path button of a row; the script copies the `title` of the row's `.tt-k`.

    None for a path cut to `PATH_LIMIT` (a cut path would paste wrong).
    """
    if len(path) > PATH_LIMIT:
        return ""
    return '<button class="tt-cp" type="button" title="copy path" aria-label="copy path"></button>'


def bar_html(value: int, top: int, *, small: bool = False) -> str:
    """A bar filled `value / top` of its width (a summary's params, a device's bytes).

    Example:
        >>> bar_html(1, 4)
        '<span class="tt-bar"><span style="width:25.0%"></span></span>'
    """
    pct = 0.0 if top <= 0 else max(min(100.0 * value / top, 100.0), 0.0)
    cls = "tt-bar tt-sm" if small else "tt-bar"
    return f'<span class="{cls}"><span style="width:{pct:.1f}%"></span></span>'


def path_cell(path: str, cls: str = "") -> str:
    """A table cell holding a path with its copy button (`(root)` for the empty path)."""
    if not path:
        return '<td class="tt-dim">(root)</td>'
    p = esc(clip(path, PATH_LIMIT))
    td = f'<td class="{cls}">' if cls else "<td>"
    return f'{td}<span class="tt-k" title="{p}">{p}</span>{copy_button(path)}</td>'


def num(x: float | None) -> str:
    """A statistic in 4 significant digits (`-` when undefined).

    Example:
        >>> num(0.000123456), num(1234567.0), num(None)
        ('0.0001235', '1.235e+06', '-')
    """
    return "-" if x is None else f"{x:.4g}"


def histogram_svg(counts: list[int], *, title: str = "") -> str:
    """A tiny inline SVG histogram (one path, `currentColor`), 40x12 px.

    Example:
        >>> histogram_svg([0, 2, 1]).startswith('<svg class="tt-hist"')
        True
    """
    top = max(counts) if counts else 0
    bins = max(len(counts), 1)
    step = 40 / bins
    parts = []
    for i, c in enumerate(counts):
        if c <= 0 or top <= 0:
            continue
        h = max(round(12 * c / top, 1), 0.8)
        parts.append(f"M{i * step:.1f},12v-{h:g}h{step * 0.8:.1f}v{h:g}z")
    t = f"<title>{esc(title)}</title>" if title else ""
    return (
        '<svg class="tt-hist" width="40" height="12" viewBox="0 0 40 12" aria-hidden="true">'
        f'{t}<path d="{"".join(parts)}"/></svg>'
    )


def stats_html(st: Stats, dtype: str | None) -> str:
    """A leaf's statistics on its row: histogram, min, max, mean, std, and NaN/Inf when any."""
    tip = (
        f"min {num(st.min)} · max {num(st.max)} · mean {num(st.mean)} · std {num(st.std)}"
        f" · nan {st.nan} · inf {st.inf} · zeros {fmt_count(st.zeros)}"
    )
    out = [f'<span class="tt-st {dtype_class(dtype)}" title="{esc(tip)}">']
    if st.histogram is not None and st.max != st.min:  # a constant array has no shape
        out.append(histogram_svg(st.histogram[0]))
    if st.min is not None:
        out.append(
            f"<i>min</i> {num(st.min)} <i>max</i> {num(st.max)} "
            f"<i>mean</i> {num(st.mean)} <i>std</i> {num(st.std)}"
        )
    out.append("</span>")
    if st.nan or st.inf:
        bad = f"nan {fmt_count(st.nan)} · inf {fmt_count(st.inf)}"
        out.append(f'<span class="tt-bad tt-nan">{bad}</span>')
    return "".join(out)


def label_html(lbl: NodeLabel, path: str, *, root: bool = False, value: bool = False) -> str:
    """A row's label: key (its `title` is the full path), type badge, params · bytes, flags.

    `value` draws the type as a plain value (a leaf that is not an array: `'relu'`, `3`).
    """
    out = []
    if lbl.key:
        title = esc(clip(path, PATH_LIMIT))
        out.append(f'<span class="tt-k" title="{title}">{esc(clip(lbl.key))}</span>')
    if value:
        out.append(f'<span class="tt-val">{esc(clip(lbl.type))}</span>')
    else:
        out.append(badge(clip(lbl.type), lbl.dtype, root=root))
    stats = lbl.stats_text
    if stats:
        out.append(f'<span class="tt-m">{esc(stats)}</span>')
    for f in lbl.flags:
        cls = "tt-fl tt-fx" if f == "not executed" else "tt-fl"
        out.append(f'<span class="{cls}">[{esc(f)}]</span>')
    if lbl.error:
        out.append(f'<span class="tt-bad">⚠ {esc(clip(lbl.error))}</span>')
    return "".join(out)


def totals_html(
    *, leaves: int, arrays: int, params: int, nbytes: int, dtypes: dict, where: str
) -> str:
    """The header chips: leaves, params, bytes, dtype badges and where the arrays live."""
    out = [
        f'<span class="tt-m">{fmt_count(leaves)} lea{"f" if leaves == 1 else "ves"}'
        + (f" ({fmt_count(arrays)} array{'s' if arrays != 1 else ''})" if arrays != leaves else "")
        + "</span>"
    ]
    if params:
        out.append(
            f'<span class="tt-m">{fmt_count(params)} param{"s" if params != 1 else ""}</span>'
        )
    if nbytes:
        out.append(f'<span class="tt-m">{fmt_bytes(nbytes)}</span>')
    for dt, n in sorted(dtypes.items(), key=lambda kv: -kv[1])[:8]:
        text = short_dtype(dt) + (f" ×{fmt_count(n)}" if n > 1 else "")
        out.append(badge(text, dt))
    if len(dtypes) > 8:
        out.append(f'<span class="tt-m">+{len(dtypes) - 8} dtypes</span>')
    if where:
        out.append(f'<span class="tt-dev">{esc(where)}</span>')
    return "".join(out)


_DARK = (
    'body[data-jp-theme-light="false"] .treetool,body.vscode-dark .treetool,'
    "body.vscode-high-contrast:not(.vscode-high-contrast-light) .treetool,"
    'html[theme="dark"] .treetool'
)

#: The stylesheet, scoped to `.treetool`; mid-tone colours that read on light and dark cells,
#: brighter ones where JupyterLab, VS Code or Colab say the theme is dark.
CSS = (
    ".treetool{--tt-f:8,145,178;--tt-bf:2,132,199;--tt-i:192,38,211;--tt-u:219,39,119;"
    "--tt-cx:59,100,230;--tt-b:202,138,4;--tt-key:22,163,74;--tt-o:120,120,120;"
    "--tt-add:22,163,74;--tt-rm:220,38,38;--tt-chg:202,138,4;--tt-acc:124,58,237;"
    "--tt-line:rgba(128,128,128,.35);--tt-hov:rgba(128,128,128,.12);"
    "font-family:var(--jp-code-font-family,ui-monospace,SFMono-Regular,Menlo,Consolas,monospace);"
    "font-size:var(--jp-code-font-size,12.5px);line-height:1.55;color:inherit;"
    "text-align:left;padding:2px 0;overflow-x:auto}"
    f"{_DARK}{{--tt-f:34,211,238;--tt-bf:56,189,248;--tt-i:232,121,249;--tt-u:244,114,182;"
    "--tt-cx:129,140,248;--tt-b:250,204,21;--tt-key:74,222,128;--tt-o:170,170,170;"
    "--tt-add:74,222,128;--tt-rm:248,113,113;--tt-chg:250,204,21;--tt-acc:167,139,250}"
    ".treetool *{box-sizing:border-box}"
    ".treetool details,.treetool summary,.treetool .tt-r{margin:0;padding:0}"
    ".treetool summary{display:block;list-style:none;cursor:pointer;border-radius:3px;"
    "white-space:nowrap}"
    ".treetool summary::-webkit-details-marker{display:none}"
    ".treetool summary::before{content:'';display:inline-block;width:0;height:0;"
    "border-style:solid;border-width:.32em 0 .32em .5em;border-color:transparent transparent "
    "transparent currentColor;margin:0 .45em 0 .15em;vertical-align:.05em;opacity:.55;"
    "transition:transform .1s}"
    ".treetool details[open]>summary::before{transform:rotate(90deg)}"
    ".treetool .tt-l{white-space:nowrap;border-radius:3px;padding-left:1.1em}"
    ".treetool summary:hover,.treetool .tt-l:hover{background:var(--tt-hov)}"
    ".treetool .tt-c{margin-left:.45em;padding-left:.75em;border-left:1px solid var(--tt-line)}"
    ".treetool .tt-k{font-weight:600;margin-right:.6em}"
    ".treetool .tt-t{display:inline-block;padding:0 .4em;border-radius:4px;margin-right:.6em;"
    "color:rgb(var(--c));background:rgba(var(--c),.13);line-height:1.35}"
    ".treetool .tt-o{--c:var(--tt-o)}.treetool .tt-f{--c:var(--tt-f)}"
    ".treetool .tt-bf{--c:var(--tt-bf)}.treetool .tt-i{--c:var(--tt-i)}"
    ".treetool .tt-u{--c:var(--tt-u)}.treetool .tt-cx{--c:var(--tt-cx)}"
    ".treetool .tt-b{--c:var(--tt-b)}.treetool .tt-key{--c:var(--tt-key)}"
    ".treetool .tt-root{--c:var(--tt-acc);font-weight:700}"
    ".treetool .tt-m{opacity:.65;margin-right:.8em}"
    ".treetool .tt-val{margin-right:.6em}"
    ".treetool .tt-dev{opacity:.8;margin-right:.8em;font-style:italic}"
    ".treetool .tt-fl{color:rgb(var(--tt-b));margin-right:.6em}"
    ".treetool .tt-fx,.treetool .tt-bad{color:rgb(var(--tt-rm));font-weight:600;margin-right:.6em}"
    ".treetool .tt-more,.treetool .tt-dim{opacity:.6;font-style:italic}"
    ".treetool .tt-more{padding-left:1.1em;white-space:nowrap}"
    ".treetool summary.tt-more{padding-left:0}"
    ".treetool .tt-st{font-size:.92em;margin-right:.6em;color:inherit}"
    ".treetool .tt-st i{font-style:normal;opacity:.55}"
    ".treetool .tt-hist{vertical-align:-1px;margin-right:.45em;color:rgb(var(--c))}"
    ".treetool .tt-hist path{fill:currentColor;opacity:.8}"
    ".treetool .tt-cp{position:relative;display:inline-block;width:1.35em;height:1.2em;"
    "padding:0;margin-left:.2em;border:1px solid var(--tt-line);border-radius:3px;"
    "background:transparent;color:inherit;cursor:pointer;opacity:0;vertical-align:-.2em}"
    ".treetool .tt-cp::before,.treetool .tt-cp::after{content:'';position:absolute;width:.45em;"
    "height:.55em;border:1px solid currentColor;border-radius:1px}"
    ".treetool .tt-cp::before{left:.25em;top:.15em}.treetool .tt-cp::after{left:.5em;top:.35em}"
    '.treetool .tt-cp[data-ok="1"]{color:rgb(var(--tt-add));opacity:1}'
    '.treetool .tt-cp[data-ok="0"]{color:rgb(var(--tt-rm));opacity:1}'
    ".treetool:not([data-tt-js]) .tt-cp{display:none}"
    ".treetool summary:hover>.tt-cp,.treetool .tt-l:hover>.tt-cp,.treetool .tt-cp:focus"
    "{opacity:.75}"
    ".treetool .tt-cp:hover{opacity:1;background:var(--tt-hov)}"
    ".treetool .tt-head{margin:0 0 .3em;white-space:normal}"
    ".treetool .tt-head b{margin-right:.6em}"
    ".treetool .tt-add{color:rgb(var(--tt-add))}.treetool .tt-rm{color:rgb(var(--tt-rm))}"
    ".treetool .tt-chg{color:rgb(var(--tt-chg))}"
    ".treetool .tt-sign{font-weight:700;margin-right:.4em}"
    ".treetool .tt-ra{background:rgba(var(--tt-add),.08)}"
    ".treetool .tt-rr{background:rgba(var(--tt-rm),.08)}"
    ".treetool .tt-rc{background:rgba(var(--tt-chg),.07)}"
    ".treetool .tt-kd{margin-right:.6em}"
    ".treetool .tt-add>.tt-k,.treetool .tt-rm>.tt-k,.treetool .tt-chg>.tt-k{color:inherit}"
    ".treetool .tt-ty{color:rgb(var(--c))}"
    ".treetool .tt-sec{font-weight:700;margin-top:.35em}"
    ".treetool table.tt-tab{border-collapse:collapse;margin:.2em 0;font:inherit;width:auto}"
    ".treetool table.tt-tab th,.treetool table.tt-tab td{padding:.05em .8em .05em 0;"
    "text-align:left;border:none;background:none;white-space:nowrap;vertical-align:middle}"
    ".treetool table.tt-tab th{font-weight:700;border-bottom:1px solid var(--tt-line)}"
    ".treetool table.tt-tab td.tt-n,.treetool table.tt-tab th.tt-n{text-align:right}"
    ".treetool table.tt-tab tfoot td{font-weight:700;border-top:1px solid var(--tt-line)}"
    ".treetool table.tt-tab tr.tt-grp td{font-weight:700;padding-top:.35em}"
    ".treetool table.tt-tab td.tt-in{padding-left:1.2em}"
    ".treetool table.tt-tab tr:hover td{background:var(--tt-hov)}"
    ".treetool .tt-bar{display:inline-block;width:14em;height:.8em;vertical-align:-1px;"
    "border-radius:2px;background:var(--tt-hov);overflow:hidden}"
    ".treetool .tt-bar>span{display:block;height:100%;background:rgb(var(--tt-f))}"
    ".treetool .tt-bar.tt-sm{width:5em}"
    ".treetool .tt-prim{color:rgb(var(--tt-add));font-weight:600}"
    ".treetool .tt-par,.treetool .tt-loc{opacity:.6}.treetool .tt-loc{font-style:italic}"
    ".treetool .tt-lit{color:rgb(var(--tt-b))}.treetool .tt-v{font-weight:600}"
    ".treetool .tt-path{color:rgb(var(--tt-f))}"
    ".treetool .tt-sub{color:rgb(var(--tt-cx));font-weight:600}"
    ".treetool .tt-warn{color:rgb(var(--tt-b))}"
    ".treetool[data-tt=jaxpr] .tt-l,.treetool[data-tt=jaxpr] summary{white-space:normal;"
    "padding-left:2.2em;text-indent:-1.1em}"
    ".treetool[data-tt=jaxpr] summary{padding-left:1.1em}"
)

#: The optional copy script: safe to run once per output (a page may hold many). It marks
#: every view as scripted (which shows the copy buttons) and installs one click listener.
SCRIPT = (
    "(function(){var d=document;"
    "d.querySelectorAll('.treetool').forEach(function(r){r.setAttribute('data-tt-js','1')});"
    "if(window.__treetoolCopy)return;window.__treetoolCopy=1;"
    "d.addEventListener('click',function(e){"
    "var t=e.composedPath?e.composedPath()[0]:e.target;"
    "var b=t&&t.closest&&t.closest('.treetool .tt-cp');if(!b)return;"
    "e.preventDefault();e.stopPropagation();"
    "var k=b.parentNode.querySelector('.tt-k'),p=k?k.getAttribute('title'):'';"
    "b.setAttribute('data-copied',p);"
    "function done(ok){b.setAttribute('data-ok',ok?'1':'0');"
    "setTimeout(function(){b.removeAttribute('data-ok')},900)}"
    "function old(){var a=d.createElement('textarea');a.value=p;"
    "a.style.position='fixed';a.style.opacity='0';d.body.appendChild(a);a.select();"
    "var ok=false;try{ok=d.execCommand('copy')}catch(x){}d.body.removeChild(a);done(ok)}"
    "if(navigator.clipboard&&navigator.clipboard.writeText)"
    "navigator.clipboard.writeText(p).then(function(){done(true)},old);else old()},true)})();"
)


def wrap(kind: str, body: str) -> str:
    """The outer fragment: `<div class="treetool">`, its stylesheet, `body`, the copy script."""
    return (
        f'<div class="treetool" data-tt="{esc(kind)}"><style>{CSS}</style>{body}'
        f"<script>{SCRIPT}</script></div>"
    )
