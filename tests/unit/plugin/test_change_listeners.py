"""ChangeListeners: the callbacks a backend's ``subscribe`` was given, kept and called."""

from __future__ import annotations

import threading

from drakit.plugin import ChangeListeners


def test_notify_calls_every_kept_callback_in_the_order_they_were_added() -> None:
    listeners = ChangeListeners()
    calls: list[str] = []
    listeners.add(lambda: calls.append("core"))
    listeners.add(lambda: calls.append("publisher"))
    listeners.notify()
    listeners.notify()
    assert calls == ["core", "publisher", "core", "publisher"]


def test_after_clear_notify_calls_nothing() -> None:
    listeners = ChangeListeners()
    calls: list[str] = []
    listeners.add(lambda: calls.append("x"))
    listeners.clear()
    listeners.notify()
    assert calls == []


def test_a_callback_may_subscribe_again_while_being_notified() -> None:
    # notify calls outside the lock: a callback that calls back into the backend (here: add)
    # does not deadlock, and what it adds is called from the next notify on.
    listeners = ChangeListeners()
    calls: list[str] = []

    def first() -> None:
        calls.append("first")
        listeners.add(lambda: calls.append("added"))

    listeners.add(first)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (listeners.notify(), done.set()))
    worker.start()
    worker.join(timeout=10)
    assert done.is_set()
    assert calls == ["first"]
    listeners.notify()
    assert calls == ["first", "first", "added"]
