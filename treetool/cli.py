"""The `treetool` command.

Imports stay inside the commands: `treetool --help` imports neither jax nor textual. Every
failure is one line on stderr, `treetool: error: …`, with exit code 2 (a traceback only with
`--debug`). stdout carries only the requested output, so `--json` pipes cleanly.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from treetool._cli._target import EXIT_ERROR, EXIT_OK, CliError, keep_until_exit
from treetool._cli._targets import load_target
from treetool._text import safe

if TYPE_CHECKING:
    from treetool._cli._demo import demo_tree

__all__ = ["demo_tree", "load_target", "main"]


def __getattr__(name: str) -> object:
    """`demo_tree`, imported when asked for (it needs equinox and optax; `--help` does not).

    `treetool.cli:demo_tree` is a target for every command: the demo's model and its state.

    Example:
        >>> from treetool.cli import demo_tree
        >>> sorted(demo_tree())
        ['model', 'opt_state']
    """
    if name == "demo_tree":
        from treetool._cli._demo import demo_tree

        return demo_tree
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- parser -------------------------------------------------------------------------------


#: the subcommands, in the order `treetool --help` lists them, with their one-line help
_COMMANDS: dict[str, str] = {
    "inspect": "show a tree (TUI on a terminal, printed otherwise)",
    "ls": "one leaf per line: path, shape, dtype",
    "get": "one leaf: facts, stats and values (reads only that leaf; a big leaf in a file "
    "only where it is shown)",
    "summary": "params, bytes and dtypes per subtree",
    "diff": "what differs between two trees (exit 0 equal, 1 different)",
    "port": "map a checkpoint onto a model of another framework by names, shapes and "
    "layouts (exit 0 complete, 1 not)",
    "demo": "a small equinox model with its optax state",
}

#: each subcommand's description (the first line of its --help) and its examples (the epilog)
_DESCRIPTIONS: dict[str, str] = {
    "inspect": "Show a tree: the terminal UI when stdout is a terminal, a printed tree "
    "otherwise (or JSON with --json).",
    "ls": "List the leaves, one per line: path, shape and dtype, tab-separated.",
    "get": "Show one leaf: its facts, stats and values (a big leaf in a file: only its "
    "corners are read; stats of a leaf up to 64 MB on disk or 8 MB remote).",
    "summary": "Params, bytes and dtypes per subtree, down to --depth.",
    "diff": "What differs between two trees, matched by path; exit 0 equal, 1 different, 2 error.",
    "port": "Map a checkpoint onto a model of another framework by names, shapes and "
    "layouts; exit 0 complete, 1 not.",
    "demo": "A small equinox transformer and its adamw state, shown as inspect shows a tree.",
}

_EXAMPLES: dict[str, str] = {
    "inspect": "  treetool inspect model.safetensors --no-tui --depth 2\n"
    "  treetool inspect ckpt.pkl --filter '**.bias' --json",
    "ls": "  treetool ls model.safetensors '**.weight'\n"
    "  treetool ls treetool.cli:demo_tree --search mlp.layers",
    "get": "  treetool get model.safetensors layers.0.weight\n"
    "  treetool get s3://bucket/big.safetensors embed.weight --stats --json",
    "summary": "  treetool summary treetool.cli:demo_tree --depth 2",
    "diff": "  treetool diff step1.safetensors step2.safetensors --atol 1e-6\n"
    "  treetool diff run@100 run@200 --stat",
    "port": "  treetool port pytorch_model.bin mypkg.models:make_model --write model.safetensors",
    "demo": "  treetool demo --no-tui --depth 2",
}


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `treetool` parser; of the subcommands, only the one `argv` names gets its arguments.

    Building every subcommand's arguments costs more than parsing (the commands run once per
    process): the others are listed by name and help only, which is all `treetool --help` and
    an unknown command's error show. Without a known command in `argv`, all are built.
    """
    p = argparse.ArgumentParser(
        prog="treetool",
        formatter_class=_Formatter,
        description="Look inside JAX pytrees, checkpoints and models: paths, shapes, dtypes, "
        "params, bytes; diffs; a terminal UI. TARGET is a checkpoint file or directory "
        "(read safely: no code from the file runs without --trust) or module:attr (a pytree, "
        "or a function/class called with no arguments).",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--version", action=_Version, help="show treetool's version and exit")
    # `prog` given: argparse would otherwise format the usage to find it (and import shutil)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", prog="treetool")
    wanted = _command_named(sys.argv[1:] if argv is None else argv)
    for name, help_text in _COMMANDS.items():
        sp = sub.add_parser(
            name,
            help=help_text,
            description=_DESCRIPTIONS[name],
            epilog=f"Example{'s' if chr(10) in _EXAMPLES[name] else ''}:\n{_EXAMPLES[name]}",
            formatter_class=_Formatter,
        )
        if wanted is None or wanted == name:
            _ARGUMENTS[name](sp)
    return p


class _Version(argparse.Action):
    """`--version`: the installed version, read from the package metadata only when asked for
    (importlib.metadata costs ~50 ms of start-up)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from treetool._version import version

        print(f"treetool {version()}")
        parser.exit()


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, told the terminal's width.

    argparse makes a formatter for every argument added (to check its metavar) and, given no
    width, imports `shutil` for `shutil.get_terminal_size` (2 ms, with the compression
    modules it imports): `_terminal_columns` gives the same width without it.
    """

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_columns() - 2)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Paragraphs filled to the width, except the indented lines of an example, which
        stay as written (one command a line, to copy)."""
        lines = []
        for part in text.split("\n"):
            if part.startswith("  ") or part.endswith(":"):
                lines.append(indent + part)
            else:
                lines.append(super()._fill_text(part, width, indent))
        return "\n".join(lines)


def _terminal_columns() -> int:
    """`shutil.get_terminal_size().columns`: `$COLUMNS` when it is a positive number, else the
    width of the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _command_named(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` runs: its first word that is not an option (the options before
    the command, `--debug`, `--version`, `-h`, take no value); None when it names none."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in _COMMANDS else None
        if word == "--":
            return None
    return None


_TARGET_HELP = (
    "a checkpoint file or directory, a URL (s3://, gs://, http(s)://), an orbax run "
    "(dir[@STEP]) or module:attr"
)


def _common(sp: argparse.ArgumentParser, json: bool = True) -> None:
    sp.add_argument("--trust", action="store_true", help="run code from pickles (unsafe)")
    sp.add_argument(
        "--raw",
        action="store_true",
        help="torch: a pickled nn.Module or TorchScript archive by its attributes "
        "(._modules['0']._parameters['weight']), not its state_dict() names (0.weight)",
    )
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
    _remote_options(sp)


def _remote_options(sp: argparse.ArgumentParser) -> None:
    """How remote reads (s3://, gs://, http(s)://) may take time and where they may go."""
    sp.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="total deadline of one remote request: connect, first byte and the whole body "
        "(default 30, or $TREETOOL_REMOTE_TIMEOUT)",
    )
    sp.add_argument(
        "--retries",
        type=int,
        metavar="N",
        help="tries of a remote request that failed with 5xx, a dropped connection or no "
        "answer in time, within one timeout in all; 4xx is never retried "
        "(default 3, or $TREETOOL_REMOTE_RETRIES)",
    )
    sp.add_argument(
        "--follow-redirects",
        action="store_true",
        help="follow HTTP redirects to another scheme, host or port (default: refused, "
        "or $TREETOOL_FOLLOW_REDIRECTS=1; redirects to non-http schemes never are)",
    )


def _apply_remote_options(args: argparse.Namespace) -> None:
    """The remote options, where given, as the environment the remote sources read."""
    if getattr(args, "timeout", None) is not None:
        if not args.timeout > 0:
            raise CliError(f"--timeout must be a positive number of seconds, got {args.timeout}")
        os.environ["TREETOOL_REMOTE_TIMEOUT"] = repr(args.timeout)
    if getattr(args, "retries", None) is not None:
        if args.retries < 1:
            raise CliError(f"--retries must be at least 1, got {args.retries}")
        os.environ["TREETOOL_REMOTE_RETRIES"] = str(args.retries)
    if getattr(args, "follow_redirects", False):
        os.environ["TREETOOL_FOLLOW_REDIRECTS"] = "1"


def _inspect_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
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
    _common(sp)


def _ls_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    sp.add_argument("glob", metavar="GLOB", nargs="?", help="only leaves matching GLOB")
    sp.add_argument(
        "-s",
        "--search",
        metavar="QUERY",
        help="only the leaves the TUI's / search finds: text is found in the paths "
        "(case-insensitive unless QUERY has a capital; enc.b finds ['enc']['b']), "
        "a glob (* ?) matches at any depth",
    )
    _common(sp)


def _get_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    sp.add_argument("path", metavar="PATH", help="keystr (['a'][0].w) or dotted (a.0.w) path")
    sp.add_argument(
        "--stats",
        action="store_true",
        help="also the stats of a leaf over 64 MB in a local file or 8 MB in a remote one "
        "(reads all of it; smaller and in-memory leaves always get them)",
    )
    _common(sp)


def _summary_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    sp.add_argument("--depth", type=int, default=1, help="subtree depth (default 1)")
    _common(sp)


def _diff_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("a", metavar="A", help="the first tree: " + _TARGET_HELP)
    sp.add_argument("b", metavar="B", help="the second tree, compared with A path by path")
    sp.add_argument(
        "--rtol",
        type=float,
        default=0.0,
        metavar="R",
        help="relative tolerance of the value comparison: equal when "
        "|a-b| <= atol + rtol*max(|a|,|b|) (default 0)",
    )
    sp.add_argument(
        "--atol",
        type=float,
        default=0.0,
        metavar="A",
        help="absolute tolerance of the value comparison (default 0: exactly equal; NaN "
        "equals NaN at the same place)",
    )
    sp.add_argument(
        "--values",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="compare values (default); --no-values compares only structure, shapes and dtypes",
    )
    sp.add_argument(
        "--strict-types",
        action="store_true",
        help="also report a change of container type between dict-like nodes (dict, "
        "OrderedDict, FrozenDict); by default they compare by keys and values",
    )
    sp.add_argument(
        "--stat",
        action="store_true",
        help="a summary only: the changes counted by kind, per top-level path and in all "
        "(as git diff --stat); with --json, `stat` rows instead of `changes`",
    )
    sp.add_argument(
        "--no-tui",
        action="store_true",
        help="print the changes instead of opening the TUI on its Diff tab (on a terminal)",
    )
    _common(sp)


def _demo_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--no-tui", action="store_true", help="print instead of opening the TUI")
    sp.add_argument("--depth", type=int, default=3, help="levels to print (default 3)")
    sp.add_argument("--json", action="store_true", help="machine-readable output")


def _port_arguments(sp: argparse.ArgumentParser) -> None:
    from treetool._cli._port import port_arguments

    port_arguments(sp)


#: subcommand -> what adds its arguments to its parser
_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "inspect": _inspect_arguments,
    "ls": _ls_arguments,
    "get": _get_arguments,
    "summary": _summary_arguments,
    "diff": _diff_arguments,
    "port": _port_arguments,
    "demo": _demo_arguments,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `treetool` console script."""
    parser = _parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_ERROR
    try:
        from treetool._cli._commands import COMMANDS
        from treetool._cli._progress import remote_progress

        command = COMMANDS[args.command]
        _apply_remote_options(args)

        with remote_progress(_shows_read_progress(args)):
            if getattr(args, "allow_fill", False):
                from treetool.io._orbax._data import allow_fill

                with allow_fill():
                    return int(command(args))
            return int(command(args))
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
    from treetool._errors import TreetoolError

    text = (
        str(e) if isinstance(e, (CliError, TreetoolError, OSError)) else f"{type(e).__name__}: {e}"
    )
    lines = [s for s in text.splitlines() if s.strip()]
    if not lines:
        return type(e).__name__
    return lines[0] if len(lines) == 1 else lines[0] + " " + " ".join(s.strip() for s in lines[1:4])


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
    keep_until_exit()
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
