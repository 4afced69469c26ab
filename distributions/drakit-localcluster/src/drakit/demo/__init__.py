"""``make demo``: drakit on a local control plane, told for a person.

``python -m drakit.demo [--hold]`` runs :func:`drakit.demo.flow.main`.
``stack`` holds the pieces (fake Node, folders, command lines of the node
plugin, controller and kubelet harness) that the e2e tests reuse.
"""
