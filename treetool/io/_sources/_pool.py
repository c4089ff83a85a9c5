"""`Pool`: threads for many small blocking requests, started without waiting for them.

`concurrent.futures.ThreadPoolExecutor.submit` starts a new thread with `Thread.start`, which
waits until the new thread runs: on a busy machine with 2 cores, ~0.9 ms a thread, so a walk
that asks for 32 blocks at once spent ~30 ms starting threads before its own next request
(100 starts: ~90 ms, against ~3-10 ms started by `_thread.start_new_thread`, which returns at
once). A `Pool`'s workers are started that way; each takes its tasks from one queue and ends
with the process (like a daemon thread: nothing waits for a read ahead at exit).

Its results are `Future`s of this module (`result`, `done`, `cancel`, as
`concurrent.futures.Future`'s): importing `concurrent.futures` imports `logging` (~5-9 ms, on
the path to a remote file's first request).

Example:
    >>> pool = Pool(4)
    >>> [f.result() for f in [pool.submit(pow, 2, k) for k in range(6)]]
    [1, 2, 4, 8, 16, 32]
"""

from __future__ import annotations

import _thread
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["CancelledError", "Future", "Pool"]

_T = TypeVar("_T")
_PENDING, _RUNNING, _CANCELLED, _FINISHED = range(4)


class CancelledError(Exception):
    """`Future.result()` of a call cancelled before it started."""


class Future(Generic[_T]):
    """The outcome of one call: `set_result` / `set_exception` once, `result()` waits for it.

    Example:
        >>> f = Future()
        >>> f.set_running_or_notify_cancel(), f.done()
        (True, False)
        >>> f.set_result(3); f.done(), f.result(), f.cancel()
        (True, 3, False)
        >>> g = Future()
        >>> g.cancel(), g.set_running_or_notify_cancel(), g.done()
        (True, False, True)
    """

    __slots__ = ("_error", "_event", "_lock", "_state", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._state = _PENDING
        self._value: Any = None
        self._error: BaseException | None = None

    def cancel(self) -> bool:
        """Cancel the call unless it has started; whether it is cancelled."""
        with self._lock:
            if self._state == _PENDING:
                self._state = _CANCELLED
                self._event.set()
            return self._state == _CANCELLED

    def set_running_or_notify_cancel(self) -> bool:
        """Mark it running (True), unless it was cancelled (False: do not run the call)."""
        with self._lock:
            if self._state == _CANCELLED:
                return False
            self._state = _RUNNING
            return True

    def done(self) -> bool:
        return self._state in (_CANCELLED, _FINISHED)

    def set_result(self, value: _T) -> None:
        with self._lock:
            self._value, self._state = value, _FINISHED
        self._event.set()

    def set_exception(self, error: BaseException) -> None:
        with self._lock:
            self._error, self._state = error, _FINISHED
        self._event.set()

    def result(self, timeout: float | None = None) -> _T:
        """The call's value (or its exception, raised), waiting at most `timeout` seconds."""
        if not self._event.wait(timeout):
            raise TimeoutError
        if self._state == _CANCELLED:
            raise CancelledError
        if self._error is not None:
            raise self._error
        return self._value


_pools: list[Pool] = []  # (emptied in a forked child: its workers did not come along)


class Pool:
    """At most `workers` threads running the submitted calls, in the order submitted; a
    thread is started only when no started one is idle."""

    def __init__(self, workers: int) -> None:
        self._max = workers
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple]] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0  # workers waiting for a task (each takes the next one put)
        _pools.append(self)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        self._tasks.put((fut, fn, args))
        with self._lock:
            if self._idle:
                self._idle -= 1  # an idle worker will take it
                return fut
            if self._threads >= self._max:
                return fut  # a busy worker will, when it is done
            self._threads += 1
        _thread.start_new_thread(self._work, ())
        return fut

    def map(self, fn: Callable[[Any], _T], items: Any) -> list[_T]:
        """`[fn(x) for x in items]`, the calls run on the pool; the first failure is raised
        (after every call has ended)."""
        futures = [self.submit(fn, x) for x in items]
        for f in futures:
            f._event.wait()
        return [f.result() for f in futures]

    def _work(self) -> None:
        while True:
            fut, fn, args = self._tasks.get()
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(*args))
                except BaseException as e:  # the caller's `result()` raises it
                    fut.set_exception(e)
            del fut, fn, args  # (holds no bytes while idle)
            with self._lock:
                self._idle += 1

    def _forget_workers(self) -> None:
        self._tasks = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = self._idle = 0


def _after_fork() -> None:
    for pool in _pools:
        pool._forget_workers()


os.register_at_fork(after_in_child=_after_fork)
