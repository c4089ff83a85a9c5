"""`treetool inspect BIG.pkl` on a terminal: the app opens at once and reads the file itself.

A big pickle takes seconds to read. Instead of a progress line and then the app, the app
opens within a fraction of a second and reads the file in a thread, showing the tree read so
far (the reader's snapshots), then the whole tree (see `treetool._reading`). What
`load_target` says on stderr (not executed classes, a damaged file's warning) is said once
the app has closed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from treetool._cli import _files as _files
from treetool._cli import _targets as _targets
from treetool._cli._target import EXIT_OK

__all__ = ["LIVE_BYTES", "inspect_live", "wanted"]

#: pickles at least this big are read by the app itself. Measured (`inspect` in a pty, dicts of
#: one-element arrays, best of 5): the plain path (progress line, read, app) paints the tree
#: as soon or sooner up to ~6.5 MB (4.3 MB: 0.70 s against 0.75 s) and has the totals sooner
#: at every size (snapshots cost the read time); past ~8 MB the app reading the file paints
#: it 0.3-0.4 s sooner (8.7 MB: 0.98 s against 1.28 s; 13 MB: 1.09 s against 1.49 s), and
#: the gap grows with the file. Both print their first output within 0.3 s.
LIVE_BYTES = 8 << 20


def wanted(args: argparse.Namespace, spec: str) -> bool:
    """Whether `inspect` opens the app before reading: a local pickle of `LIVE_BYTES` or
    more, shown in the TUI (a terminal, no --json/--no-tui/--filter/--like/--args).

    Example:
        >>> args = argparse.Namespace(args=None, json=True, no_tui=False, filter=None, like=None)
        >>> wanted(args, __file__)
        False
    """
    if args.args is not None or args.json or args.no_tui or args.filter:
        return False
    if getattr(args, "like", None):
        return False
    try:
        if not (sys.stdout.isatty() and sys.stdin.isatty()):
            return False
        if not os.path.isfile(spec) or os.path.getsize(spec) < LIVE_BYTES:
            return False
    except (OSError, ValueError):
        return False
    import treetool.io as io

    try:
        return io.detect(spec) == "pickle"
    except Exception:  # the normal path reports what is wrong with the file
        return False


def inspect_live(args: argparse.Namespace, spec: str) -> int:
    """Open the app on `spec` and let it read the file; the read's error is raised here."""
    from treetool._progress import ReadProgress

    with ReadProgress(spec, verb="opening"):  # until the app's first frame replaces it
        from treetool.tui import run

    from treetool._reading._read import Read, Reading

    held: list[Any] = []

    def read(watch: Any) -> Read:
        import treetool.io as io

        loaded = io.read(spec, trust=args.trust, partial=args.partial, watch=watch)
        held.append(loaded)
        note = _targets.blocked_note(loaded.blocked) if loaded.blocked else None
        return Read(loaded.tree, note, _files.file_facts(loaded) or None)

    from treetool.io._partial import PartialWatch

    run(None, title=args.target, reading=Reading(spec, read, PartialWatch(path=spec)))
    for loaded in held:  # said now that the terminal is ours again
        _targets.report_loaded(spec, loaded)
    return EXIT_OK
