"""Logs, metric values and the metrics HTTP endpoint, shared by the node plugin, the controller
and the CLI.

A layer of its own below ``kubeapi``, ``node_plugin`` and ``controller``: it imports nothing
of drakit, so every program may use it without the two apps importing each other.
``kubeapi`` logs through the standard :mod:`logging` with ``extra=`` fields, which the
formatters here print, and counts its work queues with :mod:`drakit.telemetry.metrics`.
``drakit.telemetry.endpoint`` is the one module that imports prometheus_client: import it only to
serve ``/metrics``. ``drakit.telemetry.boundedhttp`` is the HTTP server of ``/metrics`` and of
``drakit webhook``: the one place where drakit reads from untrusted network clients.
"""
