"""Logs and the metrics HTTP endpoint, shared by the node plugin, the controller and the CLI.

A layer of its own below ``kubeapi``, ``node_plugin`` and ``controller``: it imports nothing
of drakit, so every program may use it without the two apps importing each other.
``kubeapi`` itself only calls the standard :mod:`logging` with ``extra=`` fields, which the
formatters here print; it does not need to import this package.
"""
