"""The kube-scheduler filters a pod must pass on a node besides devices, taints and node
affinity: NodeResourcesFit (``resources``), NodePorts (``ports``), InterPodAffinity
(``affinity``) and PodTopologySpread (``spread``), plus the pod spec features drakit does not
implement and therefore refuses (``unsupported``).

Every module here is pure: plain data in, a verdict out. ``podinfo`` turns a pod into the
summary the filters read; ``usage`` keeps the per-node aggregates the controller updates from
pod events.
"""
