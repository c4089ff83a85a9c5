"""A remote file's first GET, sent before the reader's own modules are imported.

`read(url)` imports detection, the table of formats and the tree model (tens of
milliseconds) before it asks for the file's first bytes; on a real network one round trip is
as long. `start(src)` sends that GET (`SizedByFirstGet._first_block`: the first 64 KiB and
the size) on a thread at once, so that it is in flight while those modules are imported; the
source's own first block then takes its outcome, the bytes or the error, as if it had made
the request itself: one request, the same checks, the same retries, the same latency.

It is sent from inside the read's session (`treetool._source.session`), whose context the
thread runs in: an S3 key that may name a prefix (an orbax checkpoint) gets its listing beside
the GET, as in the read itself. Nothing is sent early for a directory URL, a bucket, or a
source that already knows its size.

The process is left as it was found (no switch-interval change: an interrupted read, its
GET abandoned, must not leave the interpreter tuned; the remote rows of bench_remote.py did not
move when the 1 ms interval was removed).

Example (a local file has no first GET to send):
    >>> from treetool._source import source_for
    >>> start(source_for(__file__))
    False
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

from treetool._source import Source

__all__ = ["start"]


def start(src: Source) -> bool:
    """Send `src`'s first GET on a thread now (the source's client imported and set up here,
    on the caller's thread); whether it was sent. Its first `_first_block()` call waits for
    that GET and gives its outcome; later ones are the source's own again."""
    from treetool.io._sources._remote import SizedByFirstGet

    if not isinstance(src, SizedByFirstGet) or src._size is not None or "_first_block" in vars(src):
        return False
    prepare = getattr(src, "prepare_first_get", None)
    if prepare is None or not prepare():
        return False
    real = type(src)._first_block
    done = threading.Event()
    outcome: list[Any] = []  # [body] or [None, the exception]

    def fetch() -> None:
        try:
            outcome.append(real(src))
        except BaseException as e:  # replayed on the reader's thread, whatever it was
            outcome[:] = [None, e]
        finally:
            done.set()

    def first_block() -> bytes:
        done.wait()
        vars(src).pop("_first_block", None)  # once: a later call is the source's own
        if len(outcome) == 2:
            raise outcome[1]
        return outcome[0]

    src._first_block = first_block  # type: ignore[method-assign]
    # the read's context (its session, its stop event) goes with the request
    context = contextvars.copy_context()
    threading.Thread(
        target=context.run, args=(fetch,), name="treetool-first-get", daemon=True
    ).start()
    return True
