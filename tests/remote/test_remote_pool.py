"""`treetool.io._sources._pool.Pool`, the read-ahead's threads: results and failures come back
through the futures, no more than `workers` calls run at once, a cancelled call never runs,
and idle threads are reused (no thread per call)."""

from __future__ import annotations

import threading
import time

import pytest

from treetool.io._sources._pool import Pool


def test_results_and_failures_come_back_through_the_futures() -> None:
    pool = Pool(3)
    futs = [pool.submit(divmod, 7, k) for k in (1, 2, 3)]
    assert [f.result(timeout=10) for f in futs] == [(7, 0), (3, 1), (2, 1)]
    bad = pool.submit(divmod, 1, 0)
    with pytest.raises(ZeroDivisionError):
        bad.result(timeout=10)


def test_at_most_workers_calls_run_at_once() -> None:
    pool = Pool(3)
    lock = threading.Lock()
    running, peak = [0], [0]

    def call(k: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return k

    futs = [pool.submit(call, k) for k in range(12)]
    assert [f.result(timeout=10) for f in futs] == list(range(12))
    assert peak[0] == 3
    assert pool._threads == 3


def test_a_cancelled_call_never_runs_and_idle_threads_are_reused() -> None:
    pool = Pool(1)
    gate = threading.Event()
    ran: list[str] = []
    first = pool.submit(gate.wait, 10)
    later = pool.submit(ran.append, "later")
    assert later.cancel()  # still queued behind `first`
    gate.set()
    assert first.result(timeout=10) is True
    assert pool.submit(ran.append, "next").result(timeout=10) is None
    assert ran == ["next"]
    for k in range(20):  # one call at a time: the one thread does them all
        assert pool.submit(pow, k, 2).result(timeout=10) == k * k
    assert pool._threads == 1
