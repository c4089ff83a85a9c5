"""What the app does when one of its workers fails: say so, keep running.

Every worker of the app runs with `exit_on_error=False`; its widget's
`on_worker_state_changed` calls `report_failure`, which shows one line in a toast and, where
the widget has a `show_failure(text)` method, in the widget itself.
"""

from __future__ import annotations

from typing import Any

from textual.worker import Worker, WorkerState

__all__ = ["failure_text", "report_failure"]


def failure_text(worker: Worker[Any]) -> str:
    """One line naming the worker and its error: `index failed: RuntimeError: boom`."""
    err = worker.error
    what = (worker.group or worker.name or "a task").replace("-", " ")
    msg = f"{type(err).__name__}: {err}" if err is not None else "failed"
    line = " ".join(f"{what} failed: {msg}".split())
    return line if len(line) <= 300 else line[:299] + "…"


def report_failure(owner: Any, event: Worker.StateChanged) -> bool:
    """Toast (and show in `owner`) a failed worker; True when it was a failure."""
    if event.state is not WorkerState.ERROR:
        return False
    text = failure_text(event.worker)
    show = getattr(owner, "show_failure", None)
    if show is not None:
        try:
            show(text)
        except Exception:  # the widget may be gone: the toast still says it
            pass
    owner.app.notify(text, severity="error", timeout=10, markup=False)
    return True
