"""The details pane: the selected node's path, facts, stats, histogram and value preview.

Facts come from metadata and show at once; everything that reads array data or walks a
subtree (stats, histogram, preview, totals of an inner node) runs in a thread worker of the
`stats` group, which is exclusive, so moving the cursor drops the stale result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.containers import VerticalScroll
from textual.reactive import var
from textual.widgets import Static
from textual.worker import Worker, get_current_worker
from treetool.tui._workers import report_failure
from treetool.tui.messages import DetailsReady, TabItem
from treetool.tui.widgets.histogram import histogram_text

from treetool._leaves._arrays import LazyArray, has_stats, stats
from treetool._leaves._callables import OpaqueFunction
from treetool._leaves._stats import is_remote
from treetool._lowering._labels import Budget, dtype_style, fmt_bytes, fmt_count, label
from treetool._text import safe, safe_text
from treetool._tree._chain import expression
from treetool._tree._model import Aggregates, Node
from treetool._typetests import is_opaque

__all__ = ["DetailsPane", "compute_parts"]

#: largest children listed for an inner node, and how many children are scanned for them
TOP_CHILDREN = 8
SCAN_CHILDREN = 100_000
#: leaves the largest-children scan may walk to total the children (off the UI thread)
SCAN_LEAVES = 1_000_000
#: subtrees bigger than this are not totalled in the pane (the header has the whole tree's)
TOTAL_LIMIT = 300_000
#: leaves bigger than this get stats only on request (key S)
STATS_AUTO_BYTES = 256 * 1024 * 1024
#: leaves whose stats the pane keeps (a leaf's stats are computed once, `S` included)
KEEP_LEAVES = 64
#: bytes of a leaf read for its value preview
PREVIEW_BYTES = 1 << 20
#: remote leaves bigger than this get stats only on request (key S; the app's `stats_limit`)
REMOTE_STATS_AUTO_BYTES = 8 * 1024 * 1024
#: elements read at a time by the pane's one read of a leaf (a moved cursor stops it between)
READ_CHUNK_ELEMS = 1 << 20


#: characters of a path the pane shows whole; a longer one shows its two ends (y copies it all)
LONG_NAME = 300


def fold_long(text: str, limit: int = LONG_NAME) -> str:
    """`text`, or its first and last characters around the count of those left out, so a
    5,000-character name does not push the facts out of the pane.

    Example:
        >>> fold_long("a" * 10 + "b" * 10, 12)
        'aaaa…(12 more characters)…bbbb'
    """
    if len(text) <= limit:
        return text
    keep = limit // 3
    return f"{text[:keep]}…({len(text) - 2 * keep:,} more characters)…{text[-keep:]}"


def _facts_table(rows: list[tuple[str, Any]]) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold dim", no_wrap=True)
    t.add_column(overflow="fold")
    for k, v in rows:
        t.add_row(Text(k), v if isinstance(v, Text) else safe_text(v))  # plain: Text or safe_text
    return t


def _file_rows(facts: dict[str, Any]) -> list[tuple[str, Any]]:
    """Rows for the file's metadata and step; file text JSON-escaped (no control characters)."""
    import json

    rows: list[tuple[str, Any]] = []
    if "metadata" in facts:
        rows.append(("metadata", json.dumps(facts["metadata"], ensure_ascii=True)))
    if "steps" in facts:
        steps = ", ".join(map(str, facts["steps"]))
        rows.append(("step", f"{facts['step']} (steps: {steps})"))
    if "torch" in facts:  # a torch file: its kind, the weights_only report, tied names
        from treetool.io._torch import fact_lines

        for i, line in enumerate(fact_lines(facts["torch"])):
            rows.append(("torch" if i == 0 else "", line))
    return rows


def _tied_row(facts: dict[str, Any], path: str) -> tuple[str, Any] | None:
    """("tied", "same storage as P") for a torch leaf whose storage another path holds."""
    tied = (facts.get("torch") or {}).get("tied") or {}
    what = tied.get(path)
    return ("tied", what) if what else None


def leaf_facts(node: Node) -> list[tuple[str, Any]]:
    """The metadata rows of a leaf (no data read)."""
    info = node.info
    obj = node.obj
    rows: list[tuple[str, Any]] = [("type", f"{type(obj).__module__}.{type(obj).__qualname__}")]
    if is_opaque(obj):
        rows.append(
            ("not executed", safe_text(getattr(obj, "class_path", node.type_name), "bold red"))
        )
    elif isinstance(obj, OpaqueFunction):  # a function from a file, named, not run
        rows.append(("not executed", Text(f"{obj.kind} {obj.label}", "bold red")))
    if node.error is not None:  # a node whose flatten raised: shown as a leaf with its error
        rows.append(("error", safe_text(node.error, "bold red")))
    if info.shape is not None:
        rows.append(("shape", str(info.shape)))
        rows.append(("dtype", safe_text(info.dtype, dtype_style(info.dtype))))
        rows.append(("params", f"{info.params:,}"))
        rows.append(("bytes", _both(f"{info.nbytes:,}", fmt_bytes(info.nbytes))))
        if info.device:
            rows.append(("device", info.device))
        sharding = getattr(obj, "sharding", None)
        if sharding is not None and info.kind == "jax":
            rows.append(("sharding", str(sharding)))
        rows.append(("PRNG key", "yes" if info.is_key else "no"))
        if info.weak_type:
            rows.append(("weak type", "yes"))
        if isinstance(obj, LazyArray):
            rows.append(("file", f"{obj.file} @ {obj.offset:,} (read on demand)"))
    else:
        rows.append(("value", _short(obj)))
    return rows


def _opaque_row(obj: Any) -> tuple[str, Text]:
    """The row that marks a placeholder for a pickled object whose code was not run."""
    path = safe(str(getattr(obj, "class_path", type(obj).__name__)))
    return (
        "not executed",
        Text(
            f"{path} (not run: pass --trust, or trust=True to treetool.load, to run it)", "bold red"
        ),
    )


def _short(x: Any, limit: int = 400) -> str:
    try:
        r = repr(x)
    except Exception as e:  # a broken __repr__ must not break the pane
        r = f"<repr failed: {type(e).__name__}: {e}>"
    return r if len(r) <= limit else r[: limit - 1] + "…"


def _preview(x: Any, width: int = 60, data: np.ndarray | None = None) -> str:
    """The value preview of `x`; `data` is its values when they were read already (the
    pane's one read of a file-backed leaf), so nothing is read again."""
    with np.printoptions(threshold=60, edgeitems=3, precision=4, linewidth=max(width, 20)):
        if isinstance(x, LazyArray):
            rows = x.shape[0] if x.shape else 1
            row_bytes = max(1, x.nbytes // max(rows, 1))
            take = max(1, min(rows, PREVIEW_BYTES // row_bytes))
            if x.shape and take < rows:  # too big to read for a preview
                dims = "x".join(map(str, x.shape))
                if data is not None and data.ndim <= 4:
                    corners: np.ndarray | None = data[np.ix_(*[_ends(n) for n in data.shape])]
                else:
                    corners = x.corners(3)
                if corners is not None:  # what numpy's summary shows: the array's real ends
                    text = np.array2string(corners)
                    return f"{text}\n(the first and last 3 along each axis of {dims})"
                head = np.array2string(data[0:take] if data is not None else np.asarray(x[0:take]))
                return f"{head}\n(the first {take} of {rows} rows; the array goes on)"
            return np.array2string(data if data is not None else np.asarray(x))
        return np.array2string(np.asarray(x))


def _ends(n: int, edge: int = 3) -> list[int]:
    return list(range(n)) if n <= 2 * edge else [*range(edge), *range(n - edge, n)]


def read_once(x: LazyArray, cancelled: Callable[[], bool] = lambda: False) -> np.ndarray | None:
    """All of `x`'s values in one pass over its bytes (chunk by chunk, so that a cursor that
    moved on stops it between chunks: None when `cancelled()` said so).

    Stats, histogram and preview are then computed from this one read: a remote leaf is
    fetched once, not once per statistic.

    Example:
        >>> import tempfile, os
        >>> f = tempfile.NamedTemporaryFile(delete=False)
        >>> _ = f.write(np.arange(6, dtype=np.int16).tobytes()); f.close()
        >>> read_once(LazyArray((2, 3), "int16", f.name)).tolist()
        [[0, 1, 2], [3, 4, 5]]
        >>> os.unlink(f.name)
    """
    flat = np.empty(x.size, dtype=x.dtype)
    done = 0
    for chunk in x.iter_chunks(READ_CHUNK_ELEMS):
        if cancelled():
            return None
        flat[done : done + chunk.size] = chunk
        done += chunk.size
    return flat.reshape(x.shape, order="F" if x.fortran_order else "C")


def compute_parts(
    node: Node,
    width: int = 60,
    totals: Aggregates | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> dict[str, Any] | None:
    """Everything slow about a node: stats, histogram and preview of a leaf; totals, dtypes
    and largest children of an inner node. Runs in a worker thread.

    A file-backed leaf is read once (`read_once`) and every part computed from that read;
    None when `cancelled()` stopped the read (the cursor moved on).

    Example:
        >>> from treetool._tree._model import view
        >>> parts = compute_parts(view({"w": np.arange(4.0)}).children[0])
        >>> parts["stats"].max, parts["preview"]
        (3.0, '[0. 1. 2. 3.]')
    """
    out: dict[str, Any] = {}
    if node.is_leaf:
        info = node.info
        if info.shape is not None and info.kind != "abstract" and not info.is_key and info.params:
            if not has_stats(node.obj):  # strings, records, datetimes: values only
                try:
                    out["preview"] = _preview(node.obj, width)
                except Exception as e:
                    out["error"] = f"preview failed: {type(e).__name__}: {e}"
                return out
            data: np.ndarray | None = None
            try:
                if isinstance(node.obj, LazyArray) and node.obj.nbytes <= STATS_AUTO_BYTES:
                    data = read_once(node.obj, cancelled)
                    if data is None:
                        return None
                out["stats"] = stats(node.obj if data is None else data)
            except Exception as e:
                out["error"] = f"stats failed: {type(e).__name__}: {e}"
                return out  # the preview would fail the same way
            try:
                out["preview"] = _preview(node.obj, width, data)
            except Exception as e:
                out["error"] = f"preview failed: {type(e).__name__}: {e}"
        return out
    out["aggregates"] = totals if totals is not None else node.aggregates_within(TOTAL_LIMIT)
    n = node.num_children
    kids = node.child_range(0, min(n, SCAN_CHILDREN))
    budget = Budget(SCAN_LEAVES)
    sized = []
    unknown = 0
    for c in kids:
        lbl = label(c, budget)
        if not c.is_leaf and c._agg is None and c.cycle is None:
            unknown += 1  # its subtree was past the budget: not ranked
            continue
        sized.append((lbl.params or 0, lbl.nbytes or 0, c))
    sized.sort(key=lambda t: (-t[1], -t[0]))
    out["largest"] = [(str(c.key), p, b) for p, b, c in sized[:TOP_CHILDREN] if b or p]
    out["scanned"] = len(kids) - unknown
    out["children"] = n
    return out


class DetailsPane(VerticalScroll):
    """Shows the node under the cursor; updated by `show(node)`."""

    DEFAULT_CSS = """
    DetailsPane { padding: 0 1; }
    DetailsPane > Static { margin-bottom: 1; }
    DetailsPane > #details-path { color: $text; }
    """

    #: the whole tree's totals (the app binds it to its own `totals`; None: not counted yet)
    totals: var[Aggregates | None] = var(None, init=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failure(self, event)

    def show_failure(self, text: str) -> None:
        """Show a failed worker's one-line error in this tab."""
        self.query_one("#details-stats", Static).update(Text(text, style="bold red"))

    def __init__(
        self,
        root_name: str,
        root: Node | None = None,
        *,
        id: str | None = None,
        file_facts: dict[str, Any] | None = None,
        stats_limit: int | None = None,
    ) -> None:
        super().__init__(id=id)
        #: remote leaves over this many bytes get their stats only when asked (key S)
        self.stats_limit = REMOTE_STATS_AUTO_BYTES if stats_limit is None else stats_limit
        self.root_name = root_name
        self.node: Node | None = None
        self.root: Node | None = root
        # the file's own facts (safetensors `__metadata__`, an orbax run's step), root only
        self.file_facts = file_facts or {}
        #: id(leaf) -> (leaf, its computed parts): stats are computed once per leaf (`S`)
        self._kept: dict[int, tuple[Any, dict[str, Any]]] = {}

    def _keep(self, node: Node, parts: dict[str, Any]) -> None:
        if len(self._kept) >= KEEP_LEAVES:
            self._kept.pop(next(iter(self._kept)))
        self._kept[id(node.obj)] = (node.obj, parts)

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(id="details-path")
        yield Static(id="details-facts")
        yield Static(id="details-stats")
        yield Static(id="details-preview")

    def show(self, node: Node, *, force: bool = False) -> None:
        """Show `node`: facts now, the slow parts when the worker is done.

        Leaves over `STATS_AUTO_BYTES` get their stats only when asked (`force`, key `S`):
        reading gigabytes must not start just because the cursor passed by.
        """
        self.node = node
        keystr = safe(str(node.path))
        path = Text()
        path.append(fold_long(expression(self.root_name, keystr)), style="bold")
        path.append("\n")
        path.append(fold_long(keystr) or "(root)", style="dim")
        self.query_one("#details-path", Static).update(path)
        if node.is_leaf:
            facts = leaf_facts(node)
            tie = _tied_row(self.file_facts, keystr) if self.file_facts else None
            if tie is not None:
                facts.append(tie)
            pending = (
                bool(node.info.params) and node.info.kind != "abstract" and not node.info.is_key
            )
        else:
            facts = [
                ("type", node.type_name),
                ("kind", node.node_kind),
                ("children", f"{node.num_children:,}"),
            ]
            if is_opaque(node.obj):
                facts.insert(1, _opaque_row(node.obj))
            if not node.path and self.file_facts:
                facts.extend(_file_rows(self.file_facts))
            pending = True
        self.query_one("#details-facts", Static).update(_facts_table(facts))
        kept = self._kept.get(id(node.obj)) if node.is_leaf else None
        if pending and kept is not None and kept[0] is node.obj:  # computed before (S): show it
            self.post_message(DetailsReady(node, kept[1]))
            return
        nbytes = node.info.nbytes if node.is_leaf else 0
        remote = isinstance(node.obj, LazyArray) and is_remote(node.obj)
        big = not force and (nbytes > STATS_AUTO_BYTES or (remote and nbytes > self.stats_limit))
        if pending and big:
            where = " over the network" if remote else ""
            self.query_one("#details-stats", Static).update(
                Text(
                    f"press S to compute stats (reads {fmt_bytes(nbytes)}{where})",
                    style="dim italic",
                )
            )
            self.query_one("#details-preview", Static).update("")
            return
        self.query_one("#details-stats", Static).update(
            Text("computing…", style="dim italic") if pending else ""
        )
        self.query_one("#details-preview", Static).update("")
        if pending and node is self.root and self.totals is None:
            return  # the root waits for the leaf index's totals (`watch_totals` shows it)
        if pending:
            self._compute([(node, max(20, self.scrollable_content_region.width - 1))])

    def show_item(self, item: TabItem) -> None:
        """Show what another tab's cursor is on (a change, an equation, a device, a plan
        row): its title and facts; no stats."""
        self.node = None  # a stats answer still on its way is for a node: dropped
        self.workers.cancel_group(self, "stats")
        path = Text()
        path.append(safe(item.title), style="bold")
        if item.keystr and item.keystr != item.title:
            path.append("\n")
            path.append(safe(item.keystr), style="dim")
        self.query_one("#details-path", Static).update(path)
        self.query_one("#details-facts", Static).update(_facts_table(item.rows))
        self.query_one("#details-stats", Static).update("")
        self.query_one("#details-preview", Static).update("")

    def watch_totals(self, totals: Aggregates | None) -> None:
        """The whole tree's totals (from the leaf index), used when the root is shown."""
        if totals is not None and self.root is not None and self.node is self.root:
            self.show(self.root)

    # (described: not by the repr of its nodes, as Textual would)
    @work(
        thread=True,
        exclusive=True,
        group="stats",
        exit_on_error=False,
        description="leaf statistics",
    )
    def _compute(self, job: list[tuple[Node, int]]) -> None:
        # the job is taken out of its box: a finished worker outlives its run (Textual keeps
        # the last worker of each thread), and must not keep the node (a snapshot of a file
        # being read, after the whole tree has replaced it)
        node, width = job.pop()
        totals = self.totals if node is self.root else None
        worker = get_current_worker()
        parts = compute_parts(node, width, totals, cancelled=lambda: worker.is_cancelled)
        if parts is not None and not worker.is_cancelled:
            self.post_message(DetailsReady(node, parts))

    def on_details_ready(self, message: DetailsReady) -> None:
        if message.node is not self.node:
            return
        parts = message.parts
        stats_w = self.query_one("#details-stats", Static)
        preview_w = self.query_one("#details-preview", Static)
        if "aggregates" in parts:
            stats_w.update(self._inner(parts))
            return
        self._keep(message.node, parts)
        blocks: list[Any] = []
        s = parts.get("stats")
        if s is not None:
            rows = [
                ("min", _num(s.min)),
                ("max", _num(s.max)),
                ("mean", _num(s.mean)),
                ("std", _num(s.std)),
                ("zeros", f"{s.zeros:,}"),
                ("NaN", Text(f"{s.nan:,}", "bold red" if s.nan else "")),
                ("Inf", Text(f"{s.inf:,}", "bold red" if s.inf else "")),
            ]
            blocks.append(Text("stats", style="bold underline"))
            blocks.append(_facts_table(rows))
            if s.histogram is not None and s.min is not None and s.min == s.max:
                # numpy would draw one bar over an invented range [x-0.5, x+0.5]
                blocks.append(Text("histogram", style="bold underline"))
                blocks.append(Text(f"every finite value is {_num(s.min)}", style="dim"))
            elif s.histogram is not None:
                counts, edges = s.histogram
                blocks.append(Text("histogram", style="bold underline"))
                blocks.append(histogram_text(counts, edges))
        if "error" in parts:
            blocks.append(safe_text(parts["error"], "bold red"))
        stats_w.update(Group(*blocks))
        if "preview" in parts:
            preview = Text(safe(parts["preview"], newlines=True))  # array2string's own lines
            preview_w.update(Group(Text("values", style="bold underline"), preview))

    def _inner(self, parts: dict[str, Any]) -> Group:
        agg = parts["aggregates"]
        if agg is None:
            return Group(
                Text(
                    f"more than {TOTAL_LIMIT:,} leaves: not totalled here (the header totals "
                    "the whole tree; the Leaves tab lists every leaf)",
                    style="dim italic",
                ),
                self._largest(parts),
            )
        rows = [
            ("leaves", f"{agg.leaves:,}"),
            ("arrays", f"{agg.arrays:,}"),
            ("params", _both(f"{agg.params:,}", fmt_count(agg.params))),
            ("bytes", _both(f"{agg.nbytes:,}", fmt_bytes(agg.nbytes))),
        ]
        if agg.tied:
            rows.append(("tied", f"{agg.tied:,} leaves share arrays"))
        if agg.errors:  # nodes that could not be opened: not in the counts above
            rows.append(("errors", f"{agg.errors:,} nodes could not be opened"))
        blocks: list[Any] = [_facts_table(rows)]
        if agg.dtypes:
            t = Table("dtype", "arrays", box=None, padding=(0, 2), header_style="bold dim")
            for dt, n in agg.dtypes.most_common():
                t.add_row(safe_text(dt, dtype_style(dt)), f"{n:,}")
            blocks.append(t)
        blocks.append(self._largest(parts))
        return Group(*blocks)

    def _largest(self, parts: dict[str, Any]) -> Any:
        if not parts["largest"]:
            return Text("")
        scanned, n = parts.get("scanned", 0), parts.get("children", 0)
        title = "largest children"
        if scanned < n:  # say what was ranked: never a silent partial answer
            title = f"largest of {scanned:,} of {n:,} children"
        t = Table(title, "params", "bytes", box=None, padding=(0, 2), header_style="bold dim")
        for key, p, b in parts["largest"]:
            t.add_row(safe_text(key), fmt_count(p), fmt_bytes(b))
        return t


def _both(exact: str, short: str) -> str:
    """`1,234,567 (1.2M)`, or just `123` when the short form says the same."""
    return exact if short.replace(" B", "") == exact else f"{exact} ({short})"


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.6g}"
