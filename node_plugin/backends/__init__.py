"""Device backends of the node plugin (see :mod:`node_plugin.backends.base`)."""
