"""Device backends of the node plugin (see :mod:`drakit.node_plugin.backends.base`)."""
