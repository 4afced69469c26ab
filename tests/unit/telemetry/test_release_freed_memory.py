"""release_freed_memory: safe everywhere, and on glibc it gives freed heap pages back."""

from __future__ import annotations

import json
import platform
import sys
import textwrap

import pytest
from helpers.childpython import python_output

from drakit.telemetry.memory import release_freed_memory

# Run in a fresh interpreter: the pytest process's heap (and its other threads' arenas) would
# make the RSS figures depend on which tests ran before.
_FRAGMENTED_HEAP = textwrap.dedent(
    """
    import json

    from drakit.telemetry.memory import release_freed_memory

    def rss_anon_kib():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
        raise AssertionError("no RssAnon")

    before = rss_anon_kib()
    # 64 MiB in 1 KiB objects: above CPython's small-object limit, so each is one malloc'd
    # chunk in glibc's heap. Every 64th survives, so the freed chunks lie below chunks in
    # use and free() alone cannot shrink the heap from its top.
    chunks = [bytes(1024) for _ in range(64 * 1024)]
    survivors = chunks[::64]
    del chunks
    freed = rss_anon_kib()
    trimmed_ok = release_freed_memory()
    after = rss_anon_kib()
    print(json.dumps({"before": before, "freed": freed, "after": after, "ok": trimmed_ok}))
    assert survivors
    """
)


def test_release_freed_memory_is_safe_to_call_repeatedly() -> None:
    first = release_freed_memory()
    assert isinstance(first, bool)
    assert release_freed_memory() is first


@pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's"
)
def test_release_freed_memory_lowers_rss_of_a_fragmented_heap_on_glibc() -> None:
    figures = json.loads(python_output(_FRAGMENTED_HEAP))
    assert figures["ok"] is True
    # Precondition: free() alone kept most of the 64 MiB resident (else the test shows nothing).
    assert figures["freed"] - figures["before"] > 32 * 1024, figures
    # malloc_trim gave most of it back: at least half of the 64 MiB.
    assert figures["freed"] - figures["after"] > 32 * 1024, figures
