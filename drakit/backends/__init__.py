"""drakit's built-in device backends, ``--backend example`` and ``--backend hostdev``.

They are written on the public API alone (``drakit.plugin``; an import-linter contract keeps
it so), as a driver's own backend would be: what they need from drakit, a driver may use too.
"""
