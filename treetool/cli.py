"""The `treetool` command.

Imports stay inside the commands: `treetool --help` imports neither jax nor textual. Every
failure is one line on stderr, `treetool: error: …`, with exit code 2 (a traceback only with
`--debug`). stdout carries only the requested output, so `--json` pipes cleanly.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

from . import _cli_files as _files
from ._text import safe

__all__ = ["load_target", "main"]

EXIT_OK, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


# --- targets ------------------------------------------------------------------------------


def load_target(
    spec: str, *, trust: bool = False, partial: bool = False, like: Any = None
) -> tuple[Any, str]:
    """Turn `FILE`, `DIR` or `module:attr` into `(pytree, format name)`.

    A file or directory is read by `treetool.io.read` (safe by default). When objects were not
    executed, one line on stderr names their classes and `--trust`; with `partial`, a damaged
    file gives the tree read up to the error, and the error as a warning on stderr.
    `module:attr` imports the module (the current directory is on the import path) and follows
    the dotted attribute; a function or a class found there is called with no arguments.
    `like` is the skeleton of a structure-less file (equinox `tree_serialise_leaves`): its
    records take the skeleton's paths; without one, a note on stderr says why the paths are
    positional.
    """
    from .io._source import is_url

    if is_url(spec) or os.path.exists(spec) or _files.is_run_step(spec):
        import treetool.io as io

        from ._progress import ReadProgress

        if like is not None and os.path.isfile(spec) and io.detect(spec) == "equinox":
            return _files.load_eqx_like(spec, like), "equinox"
        with ReadProgress(spec):  # a line on a terminal's stderr while a big file is read
            loaded = io.read(spec, trust=trust, partial=partial)
        _files.remember(loaded)
        if loaded.format == "equinox":
            _files.note_positional(spec)
        if loaded.steps and spec == io.split_step(spec)[0]:
            _files.note_steps(spec, loaded)
        if loaded.error:
            print(
                safe(f"treetool: warning: {loaded.error}; showing what was read before it"),
                file=sys.stderr,
            )
        if loaded.blocked:
            _print_blocked(spec, loaded.blocked)
            n = len(loaded.blocked)
            _TUI_NOTES[id(loaded.tree)] = (
                f"{n} class{'es' if n != 1 else ''} not executed: pass --trust to run them"
            )
        _NOTED.add(id(loaded.tree))
        if _KEEP is not None:
            _KEEP.append(loaded)
        return loaded.tree, loaded.format
    if _is_module_spec(spec):
        from ._progress import ReadProgress

        with ReadProgress(spec, verb="importing"):  # the module may take seconds (jax)
            return _import_target(spec), "python"
    raise CliError(f"{spec}: no such file or directory (and not a module:attr object)")


_DOTTED = re.compile(r"^[^\W\d]\w*(\.[^\W\d]\w*)*$")


def _is_module_spec(spec: str) -> bool:
    """`X:Y` names a module attribute only when X is a dotted identifier and no file `X:Y`
    exists (a file always wins: `ckpt:v2` on disk is read, never imported).

    Example:
        >>> _is_module_spec("mypkg.models:make_model"), _is_module_spec("./ckpt:v2")
        (True, False)
    """
    module_name, sep, _ = spec.partition(":")
    return bool(sep) and bool(_DOTTED.match(module_name)) and not os.path.exists(spec)


def _import_target(spec: str, *, call: bool = True) -> Any:
    import importlib
    import inspect

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise CliError(f"{spec}: expected module:attr, e.g. mypkg.models:make_model")
    if not _DOTTED.match(module_name):
        raise CliError(f"{spec}: expected module:attr with a dotted module name before ':'")
    # The current directory is appended, never prepended: a stray `rich.py` or `numpy.py`
    # there must not shadow the libraries treetool itself imports.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise CliError(f"{spec}: cannot import module {e.name!r}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = [n for n in dir(obj) if not n.startswith("_")]
            from ._paths import suggest

            close = suggest(part, names)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise CliError(f"{spec}: {module_name} has no attribute {part!r}{hint}") from None
    if call and (inspect.isroutine(obj) or inspect.isclass(obj)):
        try:
            obj = obj()
        except Exception as e:  # the user's factory failed: say which target (--debug: both)
            text = " ".join(s.strip() for s in str(e).splitlines()[:4] if s.strip())
            raise CliError(
                f"{spec}: calling {attr}() failed: {type(e).__name__}"
                + (f": {text}" if text else "")
            ) from e
    return obj


_ARRAY_SPEC = re.compile(r"^(bool|[a-z]+\d*)\[([\d, ]*)\]$")
_DTYPE_PREFIX = {"bf": "bfloat", "f": "float", "i": "int", "u": "uint", "c": "complex"}


def _trace_target(spec: str, arg_specs: list[str], *, trust: bool) -> Any:
    """`treetool inspect module:fn --args ...`: the JaxprView of `fn` traced on those arguments.

    An argument is an array spec (`f32[8,4]`: a `jax.ShapeDtypeStruct`, nothing allocated), a
    `module:attr` object or a checkpoint file (a pytree, e.g. the model), or a Python literal.
    """
    fn = _import_target(spec, call=False) if _is_module_spec(spec) else None
    if not callable(fn):
        raise CliError(f"{spec}: --args needs module:function naming a function to trace")
    args = [_trace_arg(a, trust=trust) for a in arg_specs]
    from ._jaxpr import jaxpr

    try:
        return jaxpr(fn, *args)
    except Exception as e:  # the user's function failed to trace: one line, not a traceback
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CliError(
            f"{spec}: tracing it with {len(args)} argument(s) failed: {type(e).__name__}: {first}"
        ) from None


def _trace_arg(text: str, *, trust: bool) -> Any:
    m = _ARRAY_SPEC.match(text.strip())
    if m:
        import jax
        import numpy as np

        short, dims = m.groups()
        name = short
        for prefix, long in _DTYPE_PREFIX.items():
            if short.startswith(prefix) and short[len(prefix) :].isdigit():
                name = long + short[len(prefix) :]
                break
        try:
            dtype = np.dtype(jax.numpy.dtype(name))
        except TypeError:
            raise CliError(
                f"--args {text}: unknown dtype {short!r} (e.g. f32, bf16, i32, bool)"
            ) from None
        shape = tuple(int(d) for d in dims.replace(" ", "").split(",") if d)
        return jax.ShapeDtypeStruct(shape, dtype)
    from .io._source import is_url

    if is_url(text) or os.path.exists(text) or _is_module_spec(text):
        return load_target(text, trust=trust)[0]
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise CliError(
            f"--args {text}: expected an array spec like f32[8,4], a module:attr object, "
            "a file, or a Python literal"
        ) from None


def _select(tree: Any, pattern: str | None) -> list[tuple[Any, Any]] | None:
    if not pattern:
        return None
    from ._views import find

    return find(tree, pattern)


# --- output helpers -----------------------------------------------------------------------


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    from .render.plain import output_width

    stream = sys.stderr if stderr else sys.stdout
    # no markup and no :emoji: codes in plain strings either: file text is never parsed
    return Console(
        stderr=stderr,
        highlight=False,
        soft_wrap=False,
        markup=False,
        emoji=False,
        width=output_width(stream),
    )


class _Records(list):
    """Leaf records already encoded as JSON text, one per leaf (see `_print_json`)."""


def _json_listing(tree: Any, fmt: str, pattern: str | None) -> dict[str, Any]:
    """The `inspect --json` / `ls --json` object; one pass over the leaves without a filter."""
    from ._arrays import LazyArray, leaf_info
    from ._callables import callable_identity
    from ._model import Unopened, aggregate, no_gc

    with no_gc():
        if pattern:
            from ._views import find, unopened_or_leaf

            found = find(tree, pattern, leaves_only=True)
            chunks: Any = [[(str(p), unopened_or_leaf(x)) for p, x in found]]
        else:  # only the text of each path is needed: the walk makes no Path objects
            from ._views import leaf_text_chunks

            chunks = leaf_text_chunks(tree, errors=True)  # a broken node: an "error" entry
        from json.encoder import encode_basestring as q

        import numpy as np

        records, seen = _Records(), set()
        append, add = records.append, seen.add
        leaves = params = nbytes = errors = 0
        # numpy and lazy (file) leaves of one type, shape and dtype share the tail of their
        # record and their counts: their facts depend on nothing else
        tails: dict[tuple[Any, Any, Any], tuple[str, int, int]] = {}
        same_facts = {np.ndarray}
        with_sharding: set[type] = set()  # lazy leaf types that carry a recorded sharding
        shard_texts: dict[int, str] = {}
        in_shards = fmt == "sharded"  # a sharded set: each leaf names the file holding it
        for chunk in chunks:
            leaves += len(chunk)
            for text, x in chunk:
                t = type(x)
                if t not in same_facts and issubclass(t, LazyArray):
                    same_facts.add(t)
                    if "sharding" in getattr(t, "__slots__", ()):
                        with_sharding.add(t)
                if t in with_sharding and x.sharding is not None:
                    st = shard_texts.get(id(x.sharding))
                    if st is None:
                        st = shard_texts[id(x.sharding)] = _json_text(x.sharding)
                    key = (t, x.shape, x.dtype)
                    facts = tails.get(key) or _lazy_tail(tails, key, x)
                    append(f'{{"path": {q(text)}, "sharding": {st}, {facts[0]}')
                    if id(x) not in seen:
                        add(id(x))
                        params += facts[1]
                        nbytes += facts[2]
                    continue
                if t in same_facts:
                    key = (t, x.shape, x.dtype)
                    facts = tails.get(key)
                    if facts is None:
                        info = leaf_info(x)
                        dims = ", ".join(map(str, info.shape))
                        tail = (
                            f'"shape": [{dims}], "dtype": {q(info.dtype)}, '
                            f'"nbytes": {info.nbytes}, "device": {q(info.device)}, '
                            f'"type": {q(info.type_name)}}}'
                        )
                        facts = tails[key] = (tail, info.params, info.nbytes)
                    if in_shards and isinstance(x, LazyArray):  # where its bytes live
                        append(
                            f'{{"path": {q(text)}, "shard": {q(x.file)}, '
                            f'"offset": {x.offset}, {facts[0]}'
                        )
                    else:
                        append(f'{{"path": {q(text)}, {facts[0]}')
                    if id(x) not in seen:  # tied arrays count once
                        add(id(x))
                        params += facts[1]
                        nbytes += facts[2]
                    continue
                if t is Unopened:  # a node whose flatten raised: its message at its path
                    append(f'{{"path": {q(text)}, "error": {q(x.error)}}}')
                    errors += 1
                    continue
                info = leaf_info(x)
                shape = info.shape
                if shape is None:
                    fn = callable_identity(x)  # a function leaf: its label (jax.nn.relu)
                    named = f', "function": {q(fn[3])}' if fn is not None else ""
                    append(
                        f'{{"path": {q(text)}, "shape": null, "dtype": null, "nbytes": 0, '
                        f'"device": null, "type": {q(info.type_name)}{named}}}'
                    )
                    continue
                dims = ", ".join(map(str, shape))
                device = "null" if info.device is None else q(info.device)
                append(
                    f'{{"path": {q(text)}, "shape": [{dims}], "dtype": {q(info.dtype)}, '
                    f'"nbytes": {info.nbytes}, "device": {device}, "type": {q(info.type_name)}}}'
                )
                if id(x) not in seen:  # tied arrays count once
                    add(id(x))
                    params += info.params
                    nbytes += info.nbytes
        totals = {"leaves": leaves - errors, "params": params, "bytes": nbytes}
        if errors:
            totals["errors"] = errors
        if pattern:
            try:
                agg = aggregate(tree)
                totals = {"leaves": agg.leaves, "params": agg.params, "bytes": agg.nbytes}
            except Exception:  # a node whose flatten raises: the summary's tolerant count
                from ._summary import summary

                t = summary(tree, depth=0).total
                totals = {"leaves": t.leaves, "params": t.params, "bytes": t.nbytes}
                totals["errors"] = t.errors
    return {"format": fmt, **_files.file_facts(tree), "totals": totals, "leaves": records}


def _lazy_tail(tails: dict, key: tuple, x: Any) -> tuple[str, int, int]:
    """The shared end of a numpy/lazy leaf's JSON record, and its params and bytes."""
    from json.encoder import encode_basestring as q

    from ._arrays import leaf_info

    info = leaf_info(x)
    dims = ", ".join(map(str, info.shape))
    tail = (
        f'"shape": [{dims}], "dtype": {q(info.dtype)}, '
        f'"nbytes": {info.nbytes}, "device": {q(info.device)}, '
        f'"type": {q(info.type_name)}}}'
    )
    facts = tails[key] = (tail, info.params, info.nbytes)
    return facts


def _json_text(x: Any) -> str:
    import json

    return json.dumps(x, default=_json_default, separators=(", ", ": "))


def _print_json(data: Any) -> None:
    """Indented JSON; a leaf listing is written one compact record per line."""
    import json

    if _KEEP is not None:
        _KEEP.append(data)

    out = sys.stdout
    leaves = data.get("leaves") if isinstance(data, dict) else None
    if not isinstance(leaves, _Records):
        json.dump(data, out, indent=2, default=_json_default)
        out.write("\n")
        return
    head = {k: v for k, v in data.items() if k != "leaves"}
    text = json.dumps(head, indent=2, default=_json_default)
    out.write(text[:-2] + ',\n  "leaves": [')
    out.write(",".join("\n    " + r for r in leaves))
    out.write("\n  ]\n}\n" if leaves else "]\n}\n")


def _json_default(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "to_dict"):
        return x.to_dict()
    return repr(x)


_NOTED: set[int] = set()  # trees whose opaque objects load_target already reported


def _print_blocked(spec: str, blocked: list[str]) -> None:
    shown = ", ".join(blocked[:8]) + (f" and {len(blocked) - 8} more" if len(blocked) > 8 else "")
    print(
        safe(
            f"treetool: note: {spec}: not executed (shown as opaque placeholders): {shown}; "
            "pass --trust to run the file's code"
        ),
        file=sys.stderr,
    )


def _note_opaque(tree: Any) -> None:
    """One line on stderr when a loaded tree holds objects whose code was not run."""
    from ._model import view

    if id(tree) in _NOTED:
        return

    classes: list[str] = []
    for n in view(tree).walk():
        if type(n.obj).__name__ == "Opaque":
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


# --- commands -----------------------------------------------------------------------------


def _result_object(obj: Any) -> Any:
    """A treetool result (JaxprView, TreeDiff, Placement, Summary) or a raw jaxpr, else None."""
    from .render import _is_raw_jaxpr

    if _is_raw_jaxpr(obj):
        from ._jaxpr import JaxprView

        return JaxprView(obj)
    t = type(obj)
    if (
        t.__module__.startswith("treetool.")
        and hasattr(obj, "to_dict")
        and hasattr(t, "__rich_console__")
    ):
        return obj
    return None


def cmd_inspect(args: argparse.Namespace) -> int:
    if args.args is not None:
        tree, fmt = _trace_target(args.target, args.args, trust=args.trust), "python"
    else:
        tree, fmt = load_target(
            _files.target_spec(args, args.target),
            trust=args.trust,
            partial=args.partial,
            like=_files.like_skeleton(args),
        )
    result = _result_object(tree)
    if result is not None and (args.json or args.no_tui or not sys.stdout.isatty()):
        # `treetool inspect mymod:make_jaxpr_view` and the like: the object's own rendering
        if args.json:
            _print_json(result.to_dict())
        else:
            from .render import render

            _console().print(render(result, depth=args.depth, width=args.width))
        return EXIT_OK
    if args.json:
        _print_json(_json_listing(tree, fmt, args.filter))
        _note_opaque(tree)
        return EXIT_OK
    facts = _files.file_facts(tree)
    if facts and (args.no_tui or not sys.stdout.isatty()):
        _files.print_facts(_console(), facts)
    _show(tree, args, title=args.target)
    _note_opaque(tree)
    return EXIT_OK


def _show(tree: Any, args: argparse.Namespace, title: str) -> None:
    """The TUI on a terminal, a rich tree otherwise."""
    if not args.no_tui and sys.stdout.isatty() and sys.stdin.isatty() and not args.filter:
        try:
            from treetool.tui import run
        except ImportError:
            run = None
        if run is not None:
            facts = _files.file_facts(tree)
            run(
                tree,
                title=title,
                note=_TUI_NOTES.get(id(tree)),
                **({"file_facts": facts} if facts else {}),
            )
            return
    from .render.text import TreeView

    console = _console()
    matches = _select(tree, args.filter)
    if matches is None:
        console.print(TreeView(tree, depth=args.depth, width=args.width))
        return
    if not matches:
        raise CliError(f"{title}: nothing matches {args.filter!r}")
    from ._model import Node

    for path, sub in matches:
        node = Node(sub, path)
        console.print(TreeView(node, depth=max(args.depth - len(path), 0), width=args.width))


def cmd_ls(args: argparse.Namespace) -> int:
    target = _files.target_spec(args, args.target)
    tree, fmt = load_target(
        target, trust=args.trust, partial=args.partial, like=_files.like_skeleton(args)
    )
    if args.json:
        _print_json(_json_listing(tree, fmt, args.glob))
        return EXIT_OK
    from ._views import _walk, find

    if args.glob:
        pairs: Any = find(tree, args.glob, leaves_only=True)
    else:  # a node whose flatten raised is one line: its path and its error
        pairs = (px for chunk in _walk(tree, None, False, True) for px in chunk)
    from ._arrays import leaf_info
    from ._model import Node, Unopened
    from .render.labels import leaf_text

    out = sys.stdout
    count = 0
    dtypes: dict[Any, str] = {}  # a file's dtype names, escaped once each
    for p, x in pairs:
        if type(x) is Unopened:
            out.write(f"{safe(str(p))}\t!\t{safe('error: ' + x.error)}\n")
            continue
        info = leaf_info(x)
        # one line per leaf, whatever the file named it: `safe` escapes newlines and tabs
        path = str(p)
        if not path.isprintable():  # the common case costs one C-level scan, no call
            path = safe(path)
        if info.shape is not None:
            dtype = dtypes.get(info.dtype)
            if dtype is None:
                dtype = dtypes[info.dtype] = safe(str(info.dtype))
            out.write(f"{path}\t{list(info.shape)}\t{dtype}\n")
        else:
            node = Node(x)
            if node.is_leaf and node.error is not None:  # a broken node matched by a glob
                out.write(f"{path}\t!\t{safe('error: ' + node.error)}\n")
            else:
                out.write(f"{path}\t-\t{leaf_text(node)}\n")
        count += 1
    if args.glob and count == 0:
        raise CliError(f"{args.target}: no leaf matches {args.glob!r}")
    return EXIT_OK


def cmd_get(args: argparse.Namespace) -> int:
    from ._errors import PathError
    from ._views import resolve

    target = _files.target_spec(args, args.target)
    tree, _ = load_target(
        target, trust=args.trust, partial=args.partial, like=_files.like_skeleton(args)
    )
    try:
        path = resolve(tree, args.path)
    except PathError as e:
        raise CliError(f"{args.target}: {e}") from None
    from ._views import get

    value = get(tree, path)
    from ._model import Node

    node = Node(value)
    if node.is_leaf and node.error is not None:  # a node whose flatten raised
        raise CliError(f"{args.target}: {path}: cannot open this node: {node.error}")
    from .render.leaf import leaf_report

    report = leaf_report(path, value)
    if args.json:
        _print_json(report.to_dict())
    else:
        _console().print(report)
    return EXIT_OK


def cmd_summary(args: argparse.Namespace) -> int:
    from ._summary import summary

    target = _files.target_spec(args, args.target)
    tree, _ = load_target(
        target, trust=args.trust, partial=args.partial, like=_files.like_skeleton(args)
    )
    s = summary(tree, depth=args.depth)
    if args.json:
        _print_json(s.to_dict())
    else:
        _console().print(s)
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    if not (args.rtol >= 0 and args.atol >= 0):
        raise CliError(f"--rtol and --atol must be >= 0, got {args.rtol:g} and {args.atol:g}")
    a, b = _files.diff_sides(args)
    from ._diff import diff_with_progress
    from ._model import aggregate

    opts = {"rtol": args.rtol, "atol": args.atol, "values": args.values}
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
    if args.json:
        _print_json(d.to_dict())
    else:
        _console().print(d)
    return EXIT_DIFFERENT if d else EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from ._demo import demo_tree

    tree = demo_tree()
    if args.json:
        _print_json(_json_listing(tree, "python", None))
        return EXIT_OK
    args.filter = None
    args.width = 20
    _show(tree, args, title="treetool demo: an equinox transformer and its adamw state")
    return EXIT_OK


# --- parser -------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="treetool",
        description="Look inside JAX pytrees, checkpoints and models: paths, shapes, dtypes, "
        "params, bytes; diffs; a terminal UI. TARGET is a checkpoint file or directory "
        "(read safely: no code from the file runs without --trust) or module:attr (a pytree, "
        "or a function/class called with no arguments).",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--version", action="version", version="treetool 0.1.0")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def common(sp: argparse.ArgumentParser, json: bool = True) -> None:
        sp.add_argument("--trust", action="store_true", help="run code from pickles (unsafe)")
        sp.add_argument(
            "--partial",
            action="store_true",
            help="on a damaged file, show what was read before the error",
        )
        sp.add_argument(
            "--allow-fill",
            action="store_true",
            help="read orbax arrays that claim far more bytes than the checkpoint stores "
            "(missing chunks read as the fill value)",
        )
        if json:
            sp.add_argument("--json", action="store_true", help="machine-readable output")
        sp.add_argument(
            "--step",
            type=int,
            metavar="STEP",
            help="the step of an orbax CheckpointManager run (default: the latest); "
            "the same as TARGET@STEP",
        )
        sp.add_argument(
            "--like",
            metavar="MODULE:ATTR",
            help="skeleton for a file that stores no structure (equinox tree_serialise_leaves): "
            "e.g. mypkg.models:make_model; in diff, a module:attr side is used automatically",
        )

    sp = sub.add_parser("inspect", help="show a tree (TUI on a terminal, printed otherwise)")
    sp.add_argument("target", metavar="TARGET")
    sp.add_argument("--no-tui", action="store_true", help="print instead of opening the TUI")
    sp.add_argument("--depth", type=int, default=3, help="levels to print (default 3)")
    sp.add_argument("--width", type=int, default=20, help="rows per node before '… N more'")
    sp.add_argument("--filter", metavar="GLOB", help="only paths matching GLOB (e.g. '**.bias')")
    sp.add_argument(
        "--args",
        nargs="*",
        metavar="ARG",
        help="trace TARGET (module:function) on these arguments and show its jaxpr; "
        "each is an array spec (f32[8,4]), a module:attr object or file, or a literal",
    )
    common(sp)
    sp.set_defaults(func=cmd_inspect)

    sp = sub.add_parser("ls", help="one leaf per line: path, shape, dtype")
    sp.add_argument("target", metavar="TARGET")
    sp.add_argument("glob", metavar="GLOB", nargs="?", help="only leaves matching GLOB")
    common(sp)
    sp.set_defaults(func=cmd_ls)

    sp = sub.add_parser("get", help="one leaf: facts, stats and values (reads only that leaf)")
    sp.add_argument("target", metavar="TARGET")
    sp.add_argument("path", metavar="PATH", help="keystr (['a'][0].w) or dotted (a.0.w) path")
    common(sp)
    sp.set_defaults(func=cmd_get)

    sp = sub.add_parser("summary", help="params, bytes and dtypes per subtree")
    sp.add_argument("target", metavar="TARGET")
    sp.add_argument("--depth", type=int, default=1, help="subtree depth (default 1)")
    common(sp)
    sp.set_defaults(func=cmd_summary)

    sp = sub.add_parser("diff", help="what differs between two trees (exit 0 equal, 1 different)")
    sp.add_argument("a", metavar="A")
    sp.add_argument("b", metavar="B")
    sp.add_argument("--rtol", type=float, default=0.0)
    sp.add_argument("--atol", type=float, default=0.0)
    sp.add_argument(
        "--values", action=argparse.BooleanOptionalAction, default=True, help="compare values"
    )
    common(sp)
    sp.set_defaults(func=cmd_diff)

    sp = sub.add_parser("demo", help="a small equinox model with its optax state")
    sp.add_argument("--no-tui", action="store_true", help="print instead of opening the TUI")
    sp.add_argument("--depth", type=int, default=3, help="levels to print (default 3)")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `treetool` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_ERROR
    try:
        from ._cli_progress import remote_progress

        with remote_progress(_shows_read_progress(args)):
            if getattr(args, "allow_fill", False):
                from .io._orbax_data import allow_fill

                with allow_fill():
                    return int(args.func(args))
            return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:
        if args.debug:
            raise
        print(f"treetool: error: {safe(_one_line(e))}", file=sys.stderr)
        return EXIT_ERROR


def _shows_read_progress(args: argparse.Namespace) -> bool:
    """Remote reads show progress on stderr, except under the TUI and in `diff` (its own bar)."""
    if args.command in ("ls", "get", "summary"):
        return True
    tui = args.command == "inspect" and not (args.no_tui or args.json) and sys.stdout.isatty()
    return args.command == "inspect" and not tui


def _one_line(e: BaseException) -> str:
    from ._errors import TreetoolError

    text = (
        str(e) if isinstance(e, (CliError, TreetoolError, OSError)) else f"{type(e).__name__}: {e}"
    )
    lines = [s for s in text.splitlines() if s.strip()]
    if not lines:
        return type(e).__name__
    return lines[0] if len(lines) == 1 else lines[0] + " " + " ".join(s.strip() for s in lines[1:4])


#: id(loaded tree) -> the line the TUI shows in its header (objects not executed)
_TUI_NOTES: dict[int, str] = {}

#: set by `run`: what a command loaded stays alive until the process ends (see `run`)
_KEEP: list[Any] | None = None


def _cwd_last() -> None:
    """Move the current directory to the end of `sys.path`.

    `python -m treetool.cli` puts it first, so a stray `rich.py` or `numpy.py` next to a
    checkpoint would be imported in place of the library. `module:attr` still finds modules
    there, after the installed ones.
    """
    cwd = os.getcwd()
    entries = [p for p in sys.path if p not in ("", cwd)]
    if len(entries) != len(sys.path):
        sys.path[:] = [*entries, cwd]


def run() -> None:
    """The `treetool` command: `main`, then an exit that does not free what was loaded.

    Freeing a loaded tree object by object costs as much as a tenth of reading it (1e5
    arrays); the process is ending anyway. The output is flushed first; when jax or textual
    were imported, the normal exit runs, with their exit handlers.
    """
    global _KEEP
    _KEEP = []
    _cwd_last()
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `treetool ls FILE | head`
        code = code or EXIT_OK
    else:
        if "jax" in sys.modules or "textual" in sys.modules:
            sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    run()
