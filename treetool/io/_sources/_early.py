"""The first request of a remote read, sent while the rest of the program is still importing.

The CLI knows the URL it will read as soon as its arguments are parsed, long before the
reader's modules are imported: `start(url)` sends that URL's first ranged GET (its size and
first block, as `SizedByFirstGet` reads them) on a daemon thread at once, and the read's own
source for that URL is the one this thread made (`take`), so its first read waits for the
answer already on its way instead of sending a second request. Only http(s) URLs: their
first GET is the read's first request whatever the format (S3 and GCS reads start with
listings or metadata that depend on the format).

Example (no URL given: nothing started):
    >>> start("model.safetensors"), take("model.safetensors")
    (False, None)
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["start", "take"]

#: url -> the source of each first read started and not yet taken by a read
_started: dict[str, Any] = {}
_lock = threading.Lock()


def start(url: str, registered: threading.Event | None = None) -> bool:
    """Read `url`'s size and first block on this thread, for the read that `take`s its
    source (http(s) URLs only; `registered` is set once a read would find it); whether it
    was started."""
    if not url.startswith(("http://", "https://")):
        return False
    from treetool.io._sources._http import HttpSource

    src = HttpSource(url)
    src.hold_first_read()  # before the read can have it: it waits for this answer
    with _lock:
        if url in _started:
            return False
        _started[url] = src
    if registered is not None:
        registered.set()
    src.first_read_early()
    return True


def take(url: str) -> Any:
    """The source `start(url)` made (its first GET sent, maybe answered), or None; once."""
    with _lock:
        return _started.pop(url, None)
