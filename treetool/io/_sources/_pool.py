"""`Pool`: threads for many small blocking requests, started without waiting for them.

`concurrent.futures.ThreadPoolExecutor.submit` starts a new thread with `Thread.start`, which
waits until the new thread runs: on a busy machine with 2 cores, ~0.9 ms a thread, so a walk
that asks for 32 blocks at once spent ~30 ms starting threads before its own next request
(100 starts: ~90 ms, against ~3-10 ms started by `_thread.start_new_thread`, which returns at
once). A `Pool`'s workers are started that way; each takes its tasks from one queue and ends
with the process (like a daemon thread: nothing waits for a read ahead at exit).

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
from concurrent.futures import Future
from typing import Any

__all__ = ["Pool"]

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
