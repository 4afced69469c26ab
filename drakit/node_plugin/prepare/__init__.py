"""Prepare and unprepare as stages, and the per-claim outputs they write.

A prepare goes fetch and verify (:mod:`.fetch`, no lock) -> guard -> record -> backend ->
apply outputs -> commit (:mod:`.stages`, under the serialize lock), then the outputs'
work for after the commit (outside it). An unprepare is its mirror (:mod:`.unprepare`);
the roll back of a failed prepare and the unprepare share :mod:`.undo`. Every per-claim
output (CDI spec, device metadata, device status) is a :class:`.output.ClaimOutput` in the
list of :mod:`.outputs`; the stages call them all alike. Recovery after a crash walks the
same stages (a claim left ``PrepareStarted``), plus :mod:`.recovery` at start-up.
"""
