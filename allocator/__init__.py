"""Structured-parameters allocator for resource.k8s.io/v1: pure, no I/O, no Kubernetes client."""
