// A minimal static pause program: the sandbox (infra) container of every pod
// on drakit's real test node. The node has no registry to pull
// registry.k8s.io/pause from, so drakit builds its own and writes it into an
// OCI image (drakit/localcluster/images.py).
module drakit.local/hack/tools/pause

go 1.26.0
