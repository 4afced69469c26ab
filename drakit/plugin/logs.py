"""Logging for a backend: lines in the plugin's own format, with fields as keywords.

A backend logs as drakit does, in one style: a message naming the event and the event's
facts as keyword fields, printed as JSON or ``key=value`` by the plugin's ``--log-format``::

    from drakit.plugin import get_logger

    _log = get_logger(__name__)
    _log.info("Flashed firmware", device="npu-0", seconds=2.5)

Work done for a kubelet call should log through the call's ``RequestContext.log``, which is
bound to the request id and the claim already; ``bind`` fixes fields of one's own
(``_log.bind(pool=name)``). No ``extra=``, no ``%`` arguments: the fields are the keywords.
"""

from __future__ import annotations

from drakit.telemetry.logs import StructuredLogger, get_logger

__all__ = ["StructuredLogger", "get_logger"]
