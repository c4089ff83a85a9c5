"""What the CLI says about the files it reads: skeletons (`--like`), steps (`@STEP`,
`--step`), and the file's own facts (safetensors `__metadata__`, an orbax run's steps).

Kept apart from `cli.py` (the parser) and `_cli_commands.py` (the commands); imported by them.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any

from treetool._text import safe

__all__ = [
    "LOADED",
    "diff_sides",
    "file_facts",
    "is_run_step",
    "like_skeleton",
    "load_eqx_like",
    "note_positional",
    "note_steps",
    "print_facts",
    "remember",
    "target_spec",
]


def is_run_step(spec: str) -> bool:
    """`run@1200` naming a step of an existing path (a file gets the error that says why not)."""
    from treetool.io import split_step

    base, step = split_step(spec)
    return step is not None and os.path.exists(base)


def note_steps(spec: str, loaded: Any) -> None:
    steps = loaded.steps
    shown = ", ".join(map(str, steps[:12])) + (
        f", … ({len(steps)} in all)" if len(steps) > 12 else ""
    )
    word = "steps" if len(steps) != 1 else "step"
    name = safe(spec)  # a file name can hold escapes too
    print(
        f"treetool: note: {name}: an orbax run with {word} {shown}; showing step {loaded.step} "
        f"(pick one: {name}@{steps[0]} or --step {steps[0]})",
        file=sys.stderr,
    )


#: what load_target read, by id of the tree: its metadata and steps go into the output
LOADED: dict[int, Any] = {}


def remember(loaded: Any) -> None:
    """Keep what `load_target` read (a `treetool.io.Loaded`) for `file_facts`."""
    LOADED[id(loaded.tree)] = loaded


def file_facts(tree: Any) -> dict[str, Any]:
    """`metadata` (safetensors `__metadata__`) and `step`/`steps` (orbax runs) of a loaded tree."""
    loaded = LOADED.get(id(tree))
    out: dict[str, Any] = {}
    if loaded is None:
        return out
    if loaded.metadata is not None:
        out["metadata"] = loaded.metadata
    if loaded.steps:
        out["step"], out["steps"] = loaded.step, loaded.steps
    facts = getattr(loaded, "facts", None)
    if facts:
        out.update(facts)  # a format's own facts (`torch`: weights_only report, ties)
    return out


def print_facts(console: Any, facts: dict[str, Any]) -> None:
    """The file's metadata and step as header lines; file text goes out JSON-escaped."""
    import json

    from rich.text import Text

    if "metadata" in facts:
        console.print(Text("metadata: " + json.dumps(facts["metadata"], ensure_ascii=True)))
    if "steps" in facts:
        steps = facts["steps"]
        console.print(Text(f"step {facts['step']}; steps: {', '.join(map(str, steps))}"))
    if "torch" in facts:
        from treetool.io._torch import fact_lines

        for line in fact_lines(facts["torch"]):
            console.print(Text(line))


def target_spec(args: argparse.Namespace, spec: str) -> str:
    """`spec`, with `@STEP` added when `--step` was given."""
    step = getattr(args, "step", None)
    if step is None:
        return spec
    from treetool._cli._targets import CliError
    from treetool.io import split_step

    if split_step(spec)[1] is not None:
        raise CliError(f"{spec}: give the step either as @STEP or with --step, not both")
    return f"{spec}@{step}"


def load_eqx_like(spec: str, like: Any) -> Any:
    """An equinox leaves file read into `like`'s structure (shapes may differ: diff shows them)."""
    from treetool.io.equinox import fill_like, read_records

    return fill_like(spec, like, read_records(spec), check_shapes=False)


def note_positional(spec: str) -> None:
    print(
        f"treetool: note: {safe(spec)}: an equinox tree_serialise_leaves file stores no structure, "
        "only its arrays in order: paths are positional ([0], [1], ...); pass --like "
        "module:attr (e.g. the function that builds the model) to read it into the model's paths",
        file=sys.stderr,
    )


def like_skeleton(args: argparse.Namespace) -> Any:
    """The `--like module:attr` skeleton, or None."""
    from treetool._cli._targets import CliError, _import_target

    spec = getattr(args, "like", None)
    if not spec:
        return None
    if ":" not in spec or spec.startswith(("/", ".")):
        raise CliError(f"--like {spec}: expected module:attr, e.g. mypkg.models:make_model")
    return _import_target(spec)


def diff_sides(args: argparse.Namespace) -> tuple[Any, Any]:
    """Both sides of a diff; a live side (`module:attr`) is the skeleton of an `.eqx` side."""
    import treetool.io as io
    from treetool._cli._targets import CliError, load_target

    like = like_skeleton(args)
    opts = {"trust": args.trust, "partial": args.partial}

    def structureless(spec: str) -> bool:
        return os.path.isfile(spec) and io.detect(spec) == "equinox"

    if getattr(args, "step", None) is not None:
        raise CliError("diff: give each side its step as RUN@STEP (e.g. run@1000 run@2000)")
    a_eqx, b_eqx = structureless(args.a), structureless(args.b)
    if like is None and a_eqx != b_eqx:
        live_spec = args.b if a_eqx else args.a
        if not os.path.exists(live_spec) and ":" in live_spec:
            live, _ = load_target(live_spec, **opts)
            eqx_side = load_target(args.a if a_eqx else args.b, like=live, **opts)[0]
            return (eqx_side, live) if a_eqx else (live, eqx_side)
    if _both_at_once(args.a, args.b, like):
        return _read_both(args.a, args.b, **opts)
    a, _ = load_target(args.a, like=like, **opts)
    b, _ = load_target(args.b, like=like, **opts)
    return a, b


def _both_at_once(a: str, b: str, like: Any) -> bool:
    """Whether the sides are read at once: both are files (not `module:attr`), at least one
    remote (a request's wait then overlaps the other side's); an `.eqx` side read into a
    skeleton, and two local files (no gain measured), are read one after the other."""
    from treetool._source import is_url

    if not (is_url(a) or is_url(b)):
        return False
    for spec in (a, b):
        if is_url(spec):
            continue
        if not (os.path.exists(spec) or is_run_step(spec)):
            return False
        if like is not None and os.path.isfile(spec):
            return False  # maybe an .eqx side for the skeleton: load_target decides
    return True


#: how long an interrupted diff waits for its reading threads before it exits anyway
_STOP_WAIT = 0.5


def _read_both(a: str, b: str, *, trust: bool, partial: bool) -> tuple[Any, Any]:
    """Both sides read at once, each in its own thread (remote reads wait on the network, with
    the GIL released).

    What the user sees is the sequential read's: A's notes before B's, and on failure the
    line of A's error if A failed (whatever failed first), else B's. A side still reading
    when the other failed stops at its next request; both threads are joined before this
    returns or raises. Ctrl-C stops both (at their next request) and exits at once.
    """
    import contextvars

    import treetool.io as io
    from treetool._cli._targets import finish_load
    from treetool._progress import ReadProgress
    from treetool._source import session, stop_on
    from treetool._tree._model import no_gc

    specs = (a, b)
    loaded: list[Any] = [None, None]
    failed: list[BaseException | None] = [None, None]
    stop = threading.Event()

    def read(i: int) -> None:
        try:
            with stop_on(stop):
                loaded[i] = io.read(specs[i], trust=trust, partial=partial)
        except BaseException as e:  # re-raised by the main thread, in the order of the sides
            failed[i] = e
            if i == 0:
                stop.set()  # A's line wins: B's read is not needed

    io.ensure_jax_registration()  # arm the one-shot jax hook here, not in two threads at once
    name = f"{_short(a)} + {_short(b)}"
    threads: list[threading.Thread] = []
    # one session (the sources and listings of the read shared by both threads); the garbage
    # collector paused around both reads (not turned back on by the first one done)
    with session(), no_gc(), ReadProgress(name):
        try:
            for i in (0, 1):
                t = threading.Thread(
                    target=contextvars.copy_context().run,
                    args=(read, i),
                    name=f"treetool-diff-{'ab'[i]}",
                    daemon=True,  # an interrupted diff exits without waiting for them
                )
                t.start()
                threads.append(t)
            for t in threads:
                t.join()
        except KeyboardInterrupt:
            stop.set()  # each stops at its next request; one stuck in a request is left
            deadline = time.monotonic() + _STOP_WAIT  # to the exit (a daemon thread)
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
            raise
    for i in (0, 1):
        error = failed[i]
        if error is not None:
            raise error
        loaded[i] = finish_load(specs[i], loaded[i])[0]
    return loaded[0], loaded[1]


def _short(spec: str) -> str:
    """A side's name in the progress line: its last path segment."""
    return os.path.basename(spec.rstrip("/")) or spec
