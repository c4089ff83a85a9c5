"""The two sides of `treetool diff`: a `--like` skeleton, a live side filling an `.eqx` side,
and two remote files read at once.

Above `_targets` (one side is read as any target) and `_files`.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

from treetool._cli import _files as _files
from treetool._cli._target import CliError
from treetool._cli._targets import _import_target, finish_load, load_target

__all__ = ["diff_sides", "like_skeleton"]


def like_skeleton(args: argparse.Namespace) -> Any:
    """The `--like module:attr` skeleton, or None."""
    spec = getattr(args, "like", None)
    if not spec:
        return None
    if ":" not in spec or spec.startswith(("/", ".")):
        raise CliError(f"--like {spec}: expected module:attr, e.g. mypkg.models:make_model")
    return _import_target(spec)


def diff_sides(args: argparse.Namespace) -> tuple[Any, Any]:
    """Both sides of a diff; a live side (`module:attr`) is the skeleton of an `.eqx` side."""
    import treetool.io as io

    like = like_skeleton(args)
    opts = {"trust": args.trust, "partial": args.partial, "raw": getattr(args, "raw", False)}

    def structureless(spec: str) -> bool:
        return os.path.isfile(spec) and io.detect(spec) == "equinox"

    if getattr(args, "step", None) is not None:
        raise CliError("diff: give each side its step as RUN@STEP (e.g. run@1000 run@2000)")
    a_eqx, b_eqx = structureless(args.a), structureless(args.b)
    if like is None and a_eqx != b_eqx:
        live_spec = args.b if a_eqx else args.a
        if not os.path.exists(live_spec) and ":" in live_spec:
            live = load_target(live_spec, **opts).tree
            eqx_side = load_target(args.a if a_eqx else args.b, like=live, **opts).tree
            return (eqx_side, live) if a_eqx else (live, eqx_side)
    if _both_at_once(args.a, args.b, like):
        return _read_both(args.a, args.b, **opts)
    return load_target(args.a, like=like, **opts).tree, load_target(args.b, like=like, **opts).tree


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
        if not (os.path.exists(spec) or _files.is_run_step(spec)):
            return False
        if like is not None and os.path.isfile(spec):
            return False  # maybe an .eqx side for the skeleton: load_target decides
    return True


#: how long an interrupted diff waits for its reading threads before it exits anyway
_STOP_WAIT = 0.5


def _read_both(a: str, b: str, *, trust: bool, partial: bool, raw: bool = False) -> tuple[Any, Any]:
    """Both sides read at once, each in its own thread (remote reads wait on the network, with
    the GIL released).

    What the user sees is the sequential read's: A's notes before B's, and on failure the
    line of A's error if A failed (whatever failed first), else B's. A side still reading
    when the other failed stops at its next request; both threads are joined before this
    returns or raises. Ctrl-C stops both (at their next request) and exits at once.
    """
    import contextvars

    import treetool.io as io
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
                loaded[i] = io.read(specs[i], trust=trust, partial=partial, raw=raw)
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
        loaded[i] = finish_load(specs[i], loaded[i]).tree
    return loaded[0], loaded[1]


def _short(spec: str) -> str:
    """A side's name in the progress line: its last path segment."""
    return os.path.basename(spec.rstrip("/")) or spec
