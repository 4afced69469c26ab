"""The home CPU: load parsing and the choice (pure), and moving a real process's threads."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from drakit.node_plugin.cpuhome import (
    MOVE_MARGIN,
    CpuTimes,
    busy_share,
    choose_home,
    parse_proc_stat,
)

PROC_STAT = """\
cpu  300 0 100 1600 0 0 0 0 0 0
cpu0 200 0 50 700 50 0 0 0 0 0
cpu1 100 0 50 900 0 0 0 10 0 0
intr 12345 0 0
ctxt 999
"""


def test_proc_stat_gives_each_cpus_total_and_busy_ticks_idle_and_iowait_not_busy() -> None:
    assert parse_proc_stat(PROC_STAT) == {
        0: CpuTimes(total=1000, busy=250),
        1: CpuTimes(total=1060, busy=160),  # steal counts as busy: the CPU was not ours
    }


def test_busy_share_is_the_busy_fraction_between_two_samples() -> None:
    before = {0: CpuTimes(1000, 250), 1: CpuTimes(1000, 100)}
    after = {0: CpuTimes(1100, 340), 1: CpuTimes(1100, 110), 2: CpuTimes(50, 0)}
    assert busy_share(before, after) == {0: pytest.approx(0.9), 1: pytest.approx(0.1)}


def test_first_home_is_the_least_busy_allowed_cpu() -> None:
    busy = {0: 0.7, 1: 0.2, 2: 0.05, 3: 0.5}
    assert choose_home({0, 1, 3}, busy, None, 0.0) == 1


def test_home_stays_when_no_cpu_was_less_busy_by_the_margin() -> None:
    busy = {0: 0.3, 1: 0.3 - MOVE_MARGIN / 2}
    assert choose_home({0, 1}, busy, 0, 0.0) == 0


def test_home_moves_when_another_cpu_was_less_busy_by_more_than_the_margin() -> None:
    busy = {0: 0.9, 1: 0.1}
    assert choose_home({0, 1}, busy, 0, 0.0) == 1


def test_the_plugins_own_load_does_not_push_it_off_its_home() -> None:
    # CPU 0 was 60 % busy, 50 % of it the plugin itself: others used 10 %, less than CPU 1.
    busy = {0: 0.6, 1: 0.2}
    assert choose_home({0, 1}, busy, 0, 0.5) == 0
    assert choose_home({0, 1}, busy, None, 0.0) == 1  # without that knowledge it would move


def test_a_home_that_left_the_allowed_cpus_is_replaced() -> None:
    assert choose_home({1, 2}, {0: 0.0, 1: 0.5, 2: 0.4}, 0, 0.0) == 2


def test_one_allowed_cpu_leaves_nothing_to_choose() -> None:
    assert choose_home({3}, {3: 0.1}, None, 0.0) is None


_CHILD = textwrap.dedent(
    """
    import os, threading, time
    from drakit.node_plugin.cpuhome import CpuHome

    def threads():
        out = set()
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as comm:
                    if comm.read().strip() == "cpu-home":
                        continue  # the keeper stays where the process may run
                out.add(frozenset(os.sched_getaffinity(int(tid))))
            except (FileNotFoundError, ProcessLookupError):
                continue  # a thread that ended while listed (the joined keeper's exit)
        return out

    before = frozenset(os.sched_getaffinity(0))
    stop = threading.Event()
    # Daemons: a failed check must end the child, not leave it waiting on them.
    workers = [threading.Thread(target=stop.wait, daemon=True) for _ in range(3)]
    for w in workers:
        w.start()
    home = CpuHome(period=0.2, first_choice_after=0.2)
    home.start()
    deadline = time.monotonic() + 20
    # Not eventually: this child has no test to fail; "home None" fails the parent's check.
    while home.home is None and time.monotonic() < deadline:
        time.sleep(0.05)
    late = threading.Thread(target=stop.wait, daemon=True)  # started at home: inherits it
    late.start()
    print("home", home.home)
    print("at_home", sorted(sorted(s) for s in threads()))
    home.stop()
    print("after_stop", sorted(sorted(s) for s in threads()) == [sorted(before)])
    stop.set()
    """
)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a choice of two CPUs")
def test_every_thread_but_the_keeper_is_moved_home_and_back_on_stop() -> None:
    # In a child process: pytest's own threads must keep their affinity.
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert out[0] != "home None", "the child's CpuHome chose no home in 20 s"
    home = int(out[0].split()[1])
    assert home in os.sched_getaffinity(0)
    assert out[1] == f"at_home [[{home}]]"
    assert out[2] == "after_stop True"
