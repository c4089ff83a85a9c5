"""`Deadlines`: one thread that cuts off every HTTP request whose total deadline has passed.

A request's deadline covers its connect, its redirects, its head and its whole body: a
server that sends a byte a second never trips a socket's idle timeout, so a watchdog shuts
the socket when the deadline passes (`_http.HttpSource._one`).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

__all__ = ["Deadlines"]


class Deadlines:
    """One thread that enforces every request's deadline (a thread per request would cost a
    start and a join each: a walk's 129 requests on 2 cores spent ~40 ms on them).

    `arm(at, cut)` has `cut()` called at monotonic time `at` unless `disarm` comes first;
    `disarm` says whether it did (False: `cut` ran or is running, the connection is not
    reused).

    Example:
        >>> d = Deadlines()
        >>> fired = []
        >>> t = d.arm(time.monotonic() + 60, lambda: fired.append(1))
        >>> d.disarm(t), fired
        (True, [])
        >>> t = d.arm(time.monotonic(), lambda: fired.append(2))
        >>> while not fired: time.sleep(0.001)
        >>> d.disarm(t), fired
        (False, [2])
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._armed: set[int] = set()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, at: float, cut: Callable[[], None]) -> int:
        with self._cond:
            token = next(self._ids)
            heapq.heappush(self._heap, (at, token, cut))
            self._armed.add(token)
            if self._thread is None or not self._thread.is_alive():  # (first use, or a fork)
                self._thread = threading.Thread(
                    target=self._run, name="treetool-http-deadlines", daemon=True
                )
                self._thread.start()
            elif self._heap[0][1] == token:
                self._cond.notify()  # sooner than the one it waits for
        return token

    def disarm(self, token: int) -> bool:
        with self._cond:
            armed = token in self._armed
            self._armed.discard(token)
            return armed

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    heap = self._heap
                    while heap and heap[0][1] not in self._armed:
                        heapq.heappop(heap)  # disarmed: the request ended in time
                    if not heap:
                        self._cond.wait()
                        continue
                    left = heap[0][0] - time.monotonic()
                    if left <= 0:
                        _at, token, cut = heapq.heappop(heap)
                        self._armed.discard(token)
                        break
                    self._cond.wait(left)
            try:
                cut()
            except Exception:  # (a cut only shuts a socket; nothing may stop the thread)
                pass
