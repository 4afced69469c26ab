"""The node plugin's gRPC side: servicers that translate the kubelet's
protobufs to the version-neutral values of ``drakit.node_plugin.driver`` and back,
and the two servers (DRA socket, registration socket) that host them."""
