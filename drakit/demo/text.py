"""How the demo talks: numbered steps, ok/fail marks, key-value lines and tables."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from drakit.telemetry.safetext import clean, clean_lines


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as left-aligned columns two spaces apart, header first."""
    cells = [[clean(c) for c in row] for row in (header, *rows)]
    widths = [max(len(c) for c in col) for col in zip(*cells, strict=False)]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip()
        for row in cells
    ]


class Printer:
    """Writes the demo's story to ``stream`` (stdout), flushed line by line."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout
        self._step = 0

    def _emit(self, text: str) -> None:
        # Everything the demo prints passes here; some of it is read from the cluster.
        print(clean_lines(text), file=self._stream, flush=True)

    def title(self, text: str) -> None:
        self._emit(f"\n== {text}")

    def step(self, text: str) -> None:
        self._step += 1
        self._emit(f"\n[{self._step}] {text}")

    def ok(self, text: str) -> None:
        self._emit(f"    ok   {text}")

    def fail(self, text: str) -> None:
        lines = text.splitlines() or [""]
        self._emit(f"    FAIL {lines[0]}")
        for line in lines[1:]:
            self._emit(f"         {line}")

    def note(self, text: str) -> None:
        self._emit(f"    note {text}")

    def kv(self, key: str, value: str) -> None:
        self._emit(f"    {key + ':':<14} {value}")

    def line(self, text: str) -> None:
        self._emit(f"    {text}")

    def block(self, lines: Sequence[str]) -> None:
        for text in lines:
            self._emit(f"      {text}")
