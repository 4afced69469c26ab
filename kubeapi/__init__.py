"""Kubernetes API access for drakit: the only package that talks to the API server."""
