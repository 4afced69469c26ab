"""The shared test helper ``helpers.waiting.eventually`` that every tier waits with."""

from __future__ import annotations

import itertools

import pytest
from helpers.waiting import eventually


def test_eventually_returns_the_first_truthy_answer() -> None:
    answers = itertools.chain([None, 0, ""], itertools.repeat("ready"))
    assert eventually(lambda: next(answers), "ready", interval=0) == "ready"


def test_eventually_fails_the_test_naming_what_it_waited_for() -> None:
    with pytest.raises(pytest.fail.Exception, match="timed out after 0s waiting for the pool"):
        eventually(lambda: False, "the pool", timeout=0, interval=0)


def test_eventually_asks_what_it_saw_only_when_it_fails() -> None:
    seen = iter(range(100))
    asked: list[int] = []

    def what() -> str:
        asked.append(next(seen))
        return "the pool (last seen 3 devices)"

    assert eventually(lambda: True, what) is True
    assert asked == []
    with pytest.raises(pytest.fail.Exception, match=r"waiting for the pool \(last seen 3"):
        eventually(lambda: False, what, timeout=0, interval=0)
    assert asked == [0]
