"""Resource use of a running process from /proc, for the benchmarks that compare processes."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process, from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may contain spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    """The peak resident set (VmHWM) of a running process, in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return (
        next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
        / 1024
    )
