"""The first request of a remote read, sent while the rest of the program is still importing.

The CLI knows the URL it will read as soon as its arguments are parsed, long before the
reader's modules are imported: `start(url)` sends that URL's first ranged GET (its size and
first block, as `SizedByFirstGet` reads them) on the CLI's thread at once, and the read's
own source for that URL is the one this thread made (`_http.started_early`), so its first
read waits for the answer already on its way instead of sending a second request. Only http(s) URLs: their
first GET is the read's first request whatever the format (S3 and GCS reads start with
listings or metadata that depend on the format).

Example (a local path: nothing started):
    >>> start("model.safetensors")
    False
"""

from __future__ import annotations

import threading

__all__ = ["start"]


def start(url: str, registered: threading.Event | None = None) -> bool:
    """Read `url`'s size and first block on this thread, for the read whose source for `url`
    is this one (http(s) URLs only; `registered` is set once a read would find it); whether
    it was started (not when one for `url` is still waiting for its read)."""
    if not url.startswith(("http://", "https://")):
        return False
    from treetool.io._sources import _http

    src = _http.HttpSource(url)
    src.hold_first_read()  # before the read can have it: it waits for this answer
    with _http.started_early_lock:
        if url in _http.started_early:
            return False
        _http.started_early[url] = src
    if registered is not None:
        registered.set()
    src.first_read_early()
    return True
