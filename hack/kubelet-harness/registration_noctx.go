//go:build kube_v1_35 || kube_v1_36

package main

import (
	"time"

	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
)

// Kubernetes 1.35 and 1.36: the plugin handler's methods take no context, and
// the DRA manager has no Stop (its goroutines end with the context given to
// Start, which is the process's).

func (h *reportingHandler) ValidatePlugin(name, endpoint string, versions []string) error {
	return h.validated(name, endpoint, versions, h.inner.ValidatePlugin(name, endpoint, versions))
}

func (h *reportingHandler) RegisterPlugin(name, endpoint string, versions []string, timeout *time.Duration) error {
	return h.registered(name, endpoint, versions, h.inner.RegisterPlugin(name, endpoint, versions, timeout))
}

func (h *reportingHandler) DeRegisterPlugin(name, endpoint string) {
	h.inner.DeRegisterPlugin(name, endpoint)
	h.deregistered(name, endpoint)
}

func stopManager(*dra.Manager) {}
