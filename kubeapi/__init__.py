"""Kubernetes API access for drakit: the only package that talks to the API server.

Modules: ``client`` (construction), ``resources`` (typed verbs on plain-dict objects),
``errors`` (exception tree), ``objects`` (keys, resourceVersions, references), ``informer``,
``assume_cache``, ``workqueue``, ``retry``, ``leaderelection``, ``events``.
"""
