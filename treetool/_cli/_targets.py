"""What a `treetool` command reads: `FILE`, `DIR`, `RUN@STEP`, `module:attr`, `--args` specs.

Split from `cli.py` (the parser and `main`). A read gives a `Target` (`_cli/_target.py`):
the tree with what the read found besides it.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from treetool._cli import _files as _files
from treetool._cli._target import CliError, Target, keep
from treetool._text import safe


def blocked_note(blocked: Any) -> str:
    """The terminal UI's header line for classes a read did not execute."""
    n = len(blocked)
    return f"{n} class{'es' if n != 1 else ''} not executed: pass --trust to run them"


def report_loaded(spec: str, loaded: Any) -> None:
    """What a read says on stderr (a damaged file's warning, the classes not executed); the
    read is kept until the process ends (`keep`)."""
    if loaded.error:
        print(
            safe(f"treetool: warning: {loaded.error}; showing what was read before it"),
            file=sys.stderr,
        )
    if loaded.blocked:
        _print_blocked(spec, loaded.blocked, loaded.format, loaded.facts)
    keep(loaded)


def load_target(
    spec: str, *, trust: bool = False, partial: bool = False, like: Any = None, raw: bool = False
) -> Target:
    """Turn `FILE`, `DIR` or `module:attr` into a `Target` (the pytree, its format name and
    what the read found besides it).

    A file or directory is read by `treetool.io.read` (safe by default). When objects were not
    executed, one line on stderr names their classes and `--trust`; with `partial`, a damaged
    file gives the tree read up to the error, and the error as a warning on stderr.
    `module:attr` imports the module (the current directory is on the import path) and follows
    the dotted attribute; a function or a class found there is called with no arguments.
    `like` is the skeleton of a structure-less file (equinox `tree_serialise_leaves`): its
    records take the skeleton's paths; without one, a note on stderr says why the paths are
    positional.
    """
    from treetool._source import is_url

    if is_url(spec) or os.path.exists(spec) or _files.is_run_step(spec):
        import treetool.io as io
        from treetool._progress import ReadProgress

        if like is not None and os.path.isfile(spec) and io.detect(spec) == "equinox":
            return Target(_files.load_eqx_like(spec, like), "equinox")
        with ReadProgress(spec):  # a line on a terminal's stderr while a big file is read
            loaded = io.read(spec, trust=trust, partial=partial, raw=raw)
        return finish_load(spec, loaded)
    if _is_module_spec(spec):
        from treetool._progress import ReadProgress

        with ReadProgress(spec, verb="importing"):  # the module may take seconds (jax)
            return Target(_import_target(spec), "python")
    raise CliError(f"{spec}: no such file or directory (and not a module:attr object)")


def finish_load(spec: str, loaded: Any) -> Target:
    """The `Target` of what `io.read` read for `spec`, saying on stderr what the read says
    (its notes, warnings, classes not executed). Kept apart from the read, so that two reads
    made at once (a diff's sides) say it in the order of their sides."""
    from treetool.io import split_step

    if loaded.format == "equinox":
        _files.note_positional(spec)
    if loaded.steps and spec == split_step(spec)[0]:
        _files.note_steps(spec, loaded)
    report_loaded(spec, loaded)
    return Target(
        loaded.tree,
        loaded.format,
        facts=_files.file_facts(loaded),
        note=blocked_note(loaded.blocked) if loaded.blocked else None,
        reported=True,
    )


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
            from treetool._paths._path import suggest

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
    from treetool._jaxpr._view import jaxpr

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
    from treetool._source import is_url

    if is_url(text) or os.path.exists(text) or _is_module_spec(text):
        return load_target(text, trust=trust).tree
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
    from treetool._tree._search import glob_matches

    return glob_matches(tree, pattern)  # as the TUI's search: no `None` fields


#: up to this many globals (not torch): the note is one line
_ONE_LINE = 3


def _print_blocked(spec: str, blocked: list[str], fmt: str = "", facts: Any = None) -> None:
    """The note on stderr naming every global the file references that was not executed.

    A few (not torch): one line. Otherwise a line saying what the tree shows in their place,
    then the globals grouped by package as the torch reader's report is (`_grouped`); for a
    torch file each with what it is. Whole nn.Modules of a torch file (`facts["torch"]
    ["modules"]`) are read under their state_dict() names, so the note says so.
    """
    from treetool.io._torch._weights_only import _grouped, describe

    names = list(blocked)
    if fmt != "torch" and len(names) <= _ONE_LINE:
        print(
            safe(
                f"treetool: note: {spec}: not executed (shown as opaque placeholders): "
                f"{', '.join(names)}; pass --trust to run the file's code"
            ),
            file=sys.stderr,
        )
        return
    n = f"{len(names)} global{'s' if len(names) != 1 else ''}"
    if fmt == "torch":
        modules = list(((facts or {}).get("torch") or {}).get("modules") or ())
        many = len(modules) != 1
        shown = (
            f"the whole nn.Module{'s' if many else ''} {', '.join(modules)} "
            f"{'are' if many else 'is'} shown by {'their' if many else 'its'} state_dict() "
            "names (the modules inside included), any other object as an opaque placeholder "
            "of its saved attributes"
            if modules
            else "each object is shown as an opaque placeholder of its saved attributes"
        )
        head = (
            f"treetool: note: {spec}: {n} not executed (treetool reads torch files without "
            f"torch and never runs their code); {shown}:"
        )
        lines = _grouped([{"global": g, "what": describe(g)} for g in names])
    else:
        head = (
            f"treetool: note: {spec}: {n} not executed (shown as opaque placeholders); pass "
            "--trust to run the file's code:"
        )
        lines = _grouped([{"global": g, "what": "not executed"} for g in names])
    print(safe(head), file=sys.stderr)
    for line in lines:  # already through the sanitiser
        print(line, file=sys.stderr)
