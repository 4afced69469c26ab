"""A backend that SIGKILLs its own process inside prepare (between "started" and "completed").

Used by the crash test: the plugin process dies after the checkpoint recorded
PrepareStarted and before the CDI spec and PrepareCompleted were written.
"""

from __future__ import annotations

import os
import signal

from drakit.backends.example import ExampleBackend
from drakit.plugin import BackendPrepared, ClaimToPrepare, RequestContext


class KillInPrepareBackend(ExampleBackend):
    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")
