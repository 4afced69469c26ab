"""``drakit devices``: the device table and pool summary, read from any cluster.

``source`` reads slices, claims and classes (once, or kept current by informers) within the
user's rights; ``view`` applies the filters and counts with ``drakit.allocator.usage``; ``render``
prints tables or JSON/YAML documents. The command line is ``drakit.cli.devices``.
"""
