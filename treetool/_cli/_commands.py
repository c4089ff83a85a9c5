"""The `treetool` commands (`inspect`, `ls`, `get`, `summary`, `diff`, `demo`).

Each takes the parsed arguments and returns the exit code; `cli.py` holds the parser.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from typing import Any

from treetool._cli import _files as _files
from treetool._cli._json import _json_listing, _print_json
from treetool._cli._sides import diff_sides, like_skeleton
from treetool._cli._target import EXIT_DIFFERENT, EXIT_OK, CliError, Target
from treetool._cli._target import console as _console
from treetool._cli._targets import _select, _trace_target, load_target
from treetool._text import all_printable, safe


def _note_opaque(target: Target) -> None:
    """One line on stderr when a loaded tree holds objects whose code was not run (unless the
    read already said so)."""
    from treetool._tree._model import view
    from treetool._typetests import is_opaque

    if target.reported:
        return

    classes: list[str] = []
    for n in view(target.tree).walk():
        if is_opaque(n.obj):
            cp = getattr(n.obj, "class_path", n.type_name)
            if cp not in classes:
                classes.append(cp)
        if len(classes) > 8:
            break
    if classes:
        print(
            safe(
                f"treetool: {len(classes)} class(es) not executed ({', '.join(classes[:8])}); "
                "shown as placeholders: pass --trust to run the file's code"
            ),
            file=sys.stderr,
        )


def _result_object(obj: Any) -> Any:
    """A treetool result (JaxprView, TreeDiff, Placement, Summary) or a raw jaxpr, else None."""
    from treetool._typetests import is_raw_jaxpr

    if is_raw_jaxpr(obj):
        from treetool._jaxpr._view import JaxprView

        return JaxprView(obj)
    from treetool._display._render import lowers_itself

    if lowers_itself(obj) and hasattr(obj, "to_dict"):
        return obj  # a result class that draws itself (see _lowering/_drawn.py)
    return None


def cmd_inspect(args: argparse.Namespace) -> int:
    if args.args is None:  # a big pickle on a terminal: the app opens first, then reads it
        from treetool._cli import _live as _cli_live

        spec = _files.target_spec(args, args.target)
        if _cli_live.wanted(args, spec):
            return _cli_live.inspect_live(args, spec)
    if args.args is not None:
        target = Target(_trace_target(args.target, args.args, trust=args.trust), "python")
    else:
        with _listing(not _tui_wanted(args)):  # printed: structure only, no numpy needed
            target = load_target(
                _files.target_spec(args, args.target),
                trust=args.trust,
                partial=args.partial,
                like=like_skeleton(args),
                raw=args.raw,
            )
    tree = target.tree
    result = _result_object(tree)
    if result is not None and (args.json or args.no_tui or not sys.stdout.isatty()):
        # `treetool inspect mymod:make_jaxpr_view` and the like: the object's own rendering
        if args.json:
            _print_json(result.to_dict())
        else:
            from treetool._display._render import render

            _console().print(render(result, depth=args.depth, width=args.width))
        return EXIT_OK
    if args.json:
        _print_json(_json_listing(tree, target.format, args.filter, file_facts=target.facts))
        _note_opaque(target)
        return EXIT_OK
    if target.facts and (args.no_tui or not sys.stdout.isatty()):
        _files.print_facts(_console(), target.facts)
    _show(target, args, title=args.target)
    _note_opaque(target)
    return EXIT_OK


def _tui_wanted(args: argparse.Namespace) -> bool:
    """Whether `inspect` opens the TUI (on a terminal, unless --no-tui/--json/--filter)."""
    return (
        not args.no_tui
        and not args.json
        and sys.stdout.isatty()
        and sys.stdin.isatty()
        and not args.filter
    )


def _listing(on: bool = True) -> Any:
    """Reads for a command that lists structure, shapes, dtypes and bytes: pickled arrays held
    inline stay bytes (`treetool.io._listing.listing`), so numpy is not imported."""
    if not on:
        return contextlib.nullcontext()
    from treetool.io._listing import (
        listing,  # not the pickle machinery: the file may be of any format
    )

    return listing()


def _show(target: Target, args: argparse.Namespace, title: str) -> None:
    """The TUI on a terminal, a rich tree otherwise."""
    tree = target.tree
    if not args.no_tui and sys.stdout.isatty() and sys.stdin.isatty() and not args.filter:
        try:
            from treetool.tui import run as tui_run
        except ImportError:
            pass  # textual missing: the rich tree below
        else:
            tui_run(
                tree,
                title=title,
                note=target.note,
                file_facts=target.facts or None,
            )
            return
    from treetool._tree._model import view
    from treetool._tree._rich import TreeView

    console = _console()
    matches = _select(tree, args.filter)
    if matches is None:
        console.print(TreeView(view(tree), depth=args.depth, width=args.width))
        return
    if not matches:
        raise CliError(f"{title}: nothing matches {args.filter!r}")
    from treetool._tree._model import Node

    for path, sub in matches:
        node = Node(sub, path)
        console.print(TreeView(node, depth=max(args.depth - len(path), 0), width=args.width))


def cmd_ls(args: argparse.Namespace) -> int:
    target = _files.target_spec(args, args.target)
    with _listing():
        read = load_target(
            target, trust=args.trust, partial=args.partial, like=like_skeleton(args), raw=args.raw
        )
    tree = read.tree
    found = _searched(tree, args) if args.search is not None else None
    if args.json:
        _print_json(_json_listing(tree, read.format, args.glob, found, file_facts=read.facts))
        return EXIT_OK
    from treetool._tree._model import no_gc
    from treetool._tree._views import find, leaf_text_chunks

    out = sys.stdout
    rows = _LsRows()
    with no_gc():  # rows make small objects by the thousand: no GC passes meanwhile
        if found is not None:
            out.write(rows.text(found))
        elif args.glob:
            pairs = [(str(p), x) for p, x in find(tree, args.glob, leaves_only=True)]
            out.write(rows.text(pairs))
        else:  # a node whose flatten raised is one line: its path and its error
            for chunk in leaf_text_chunks(tree, None, errors=True):
                out.write(rows.text(chunk))
    if args.glob and rows.count == 0:
        raise CliError(f"{args.target}: no leaf matches {args.glob!r}")
    return EXIT_OK


def _searched(tree: Any, args: argparse.Namespace) -> list[tuple[str, Any]]:
    """The leaves `ls --search QUERY` lists: what the TUI's `/` search finds, through the
    same leaf index (`treetool._tree._leaf_index`), as (path text, leaf) pairs in leaf order."""
    from treetool._tree._leaf_index import LeafIndex
    from treetool._tree._search import search

    query = args.search.strip()
    if args.glob:
        raise CliError("ls: give GLOB or --search QUERY, not both")
    if not query:
        raise CliError("ls: --search needs a QUERY (text or a glob)")
    index = LeafIndex.build(tree)
    _, rows = search(query, index, tree)
    if rows is None or not len(rows):
        raise CliError(f"{args.target}: no leaf matches --search {query!r}")
    paths, leaves = index.paths, index.leaves
    return [(paths[r], leaves[r]) for r in rows.tolist()]


class _LsRows:
    """The lines of `treetool ls`, a chunk of `(path text, leaf)` pairs at a time.

    A file-backed array's line ends in its shape and dtype, the same for every array of that
    shape and dtype: that ending is made once and reused (a checkpoint of 10,000 arrays has a
    handful). Other leaves go through `leaf_info` one by one.
    """

    __slots__ = ("_dtypes", "_ends", "count")

    def __init__(self) -> None:
        self._ends: dict[tuple[Any, str], str] = {}  # (shape, dtype name) -> line ending
        self._dtypes: dict[Any, str] = {}  # a file's dtype names, escaped once each
        self.count = 0  # lines of leaves (not of errors)

    def text(self, pairs: list[tuple[str, Any]]) -> str:
        """The lines of `pairs`, joined."""
        from treetool._leaves._lazy_array import LazyArray
        from treetool._tree._model import Unopened

        ends, lazy, unopened = self._ends, LazyArray, Unopened
        parts: list[str] = []
        append = parts.append
        errors = 0
        # one check of the chunk's paths; only a chunk with an unprintable one checks each
        printable = all_printable([p for p, _ in pairs])
        # the last array's shape and dtype name, and its line ending: a reader that shares
        # them between arrays (orbax) gets the next one by two identity checks
        last_shape: Any = None
        last_name: Any = None
        last_end = ""
        for path, x in pairs:
            # one line per leaf, whatever the file named it: `safe` escapes newlines and tabs
            if not printable and not path.isprintable():
                path = safe(path)
            end = None
            if isinstance(x, lazy):
                shape, name = x.shape, x.dtype_name
                if shape is last_shape and name is last_name:
                    end = last_end
                elif type(shape) is tuple:
                    end = ends.get((shape, name))
                    if end is None:
                        end = self._end(x)
                        if name.startswith("key<"):  # a key's dtype: not by its name alone
                            append(path)
                            append(end)
                            continue
                        ends[(shape, name)] = end
                    last_shape, last_name, last_end = shape, name, end
            if end is None:
                if type(x) is unopened:  # an error line, not a leaf
                    errors += 1
                end = self._end(x)
            append(path)
            append(end)
        self.count += len(pairs) - errors
        return "".join(parts)

    def _end(self, x: Any) -> str:
        """What follows the path on the line of leaf `x` (from its tab to its newline)."""
        from treetool._leaves._arrays import leaf_info
        from treetool._tree._model import Node, Unopened

        if type(x) is Unopened:
            return f"\t!\t{safe('error: ' + x.error)}\n"
        info = leaf_info(x)
        if info.shape is not None:
            dtype = self._dtypes.get(info.dtype)
            if dtype is None:
                dtype = self._dtypes[info.dtype] = safe(str(info.dtype))
            return f"\t{list(info.shape)}\t{dtype}\n"
        node = Node(x)
        if node.is_leaf and node.error is not None:  # a broken node matched by a glob
            return f"\t!\t{safe('error: ' + node.error)}\n"
        from treetool._lowering._labels import leaf_text

        return f"\t-\t{leaf_text(node)}\n"


def cmd_get(args: argparse.Namespace) -> int:
    from treetool._errors import PathError
    from treetool._tree._views import resolve

    target = _files.target_spec(args, args.target)
    tree = load_target(
        target, trust=args.trust, partial=args.partial, like=like_skeleton(args), raw=args.raw
    ).tree
    try:
        path = resolve(tree, args.path)
    except PathError as e:
        raise CliError(f"{args.target}: {e}") from None
    from treetool._tree._views import get

    value = get(tree, path)
    from treetool._tree._model import Node

    node = Node(value)
    if node.is_leaf and node.error is not None:  # a node whose flatten raised
        raise CliError(f"{args.target}: {path}: cannot open this node: {node.error}")
    from treetool._tree._leaf_report import leaf_report

    report = leaf_report(path, value, stats=args.stats)
    if args.json:
        _print_json(report.to_dict())
    else:
        _console().print(report)
    return EXIT_OK


def cmd_summary(args: argparse.Namespace) -> int:
    from treetool._summary._summary import summary

    target = _files.target_spec(args, args.target)
    with _listing():
        tree = load_target(
            target, trust=args.trust, partial=args.partial, like=like_skeleton(args), raw=args.raw
        ).tree
    s = summary(tree, depth=args.depth)
    if args.json:
        _print_json(s.to_dict())
    else:
        _console().print(s)
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    if not (args.rtol >= 0 and args.atol >= 0):
        raise CliError(f"--rtol and --atol must be >= 0, got {args.rtol:g} and {args.atol:g}")
    a, b = diff_sides(args)
    from treetool._diff._tree_diff import diff_with_progress
    from treetool._tree._model import aggregate

    opts = {"rtol": args.rtol, "atol": args.atol, "values": args.values}
    opts["strict_types"] = args.strict_types
    total = aggregate(a).nbytes if args.values and sys.stderr.isatty() else 0
    if total >= 64 << 20:
        # a progress bar on stderr, only on a terminal and only for sizeable value diffs
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        bar = Progress(
            "comparing values",
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            console=_console(stderr=True),
            transient=True,
        )
        task = bar.add_task("diff", total=total)
        with bar:
            d = diff_with_progress(a, b, progress=lambda n: bar.advance(task, n), **opts)
    else:
        d = diff_with_progress(a, b, **opts)
    if args.stat:  # a summary: counts by kind and top-level path
        from treetool._diff._stat import diff_stat, stat_lines

        if args.json:
            _print_json(diff_stat(d))
        else:
            sys.stdout.write("".join(safe(line) + "\n" for line in stat_lines(d)))
    elif args.json:
        _print_json(d.to_dict())
    elif _diff_tui(args):  # a terminal: the Diff tab, every change navigable (--no-tui prints)
        from treetool.tui import run

        run(a, title=f"{args.a} → {args.b}", other=b, tab="diff")
    else:
        _console().print(d)
    return EXIT_DIFFERENT if d else EXIT_OK


def _diff_tui(args: argparse.Namespace) -> bool:
    """Whether `diff` opens the TUI: on a terminal, without --no-tui, and with the Diff tab's
    own options (it compares values exactly: --rtol/--atol/--strict-types print instead)."""
    if args.no_tui or not args.values or args.rtol or args.atol or args.strict_types:
        return False
    return sys.stdout.isatty() and sys.stdin.isatty()


def cmd_demo(args: argparse.Namespace) -> int:
    from treetool._cli._demo import demo_tree

    tree = demo_tree()
    if args.json:
        _print_json(_json_listing(tree, "python", None))
        return EXIT_OK
    args.filter = None
    args.width = 20
    _show(
        Target(tree, "python"),
        args,
        title="treetool demo: an equinox transformer and its adamw state",
    )
    return EXIT_OK


def cmd_port(args: argparse.Namespace) -> int:
    from treetool._cli._port import cmd_port as run

    return run(args)


#: subcommand name -> the function that runs it (`cli.main` imports this table after parsing)
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "inspect": cmd_inspect,
    "ls": cmd_ls,
    "get": cmd_get,
    "summary": cmd_summary,
    "diff": cmd_diff,
    "port": cmd_port,
    "demo": cmd_demo,
}
