//go:build !kube_v1_35 && !kube_v1_36

package main

import (
	"context"
	"time"

	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
)

// Kubernetes 1.37+: the plugin handler's methods take a context, and the DRA
// manager has a Stop.

func (h *reportingHandler) ValidatePlugin(ctx context.Context, name, endpoint string, versions []string) error {
	return h.validated(name, endpoint, versions, h.inner.ValidatePlugin(ctx, name, endpoint, versions))
}

func (h *reportingHandler) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string, timeout *time.Duration) error {
	return h.registered(name, endpoint, versions, h.inner.RegisterPlugin(ctx, name, endpoint, versions, timeout))
}

func (h *reportingHandler) DeRegisterPlugin(ctx context.Context, name, endpoint string) {
	h.inner.DeRegisterPlugin(ctx, name, endpoint)
	h.deregistered(name, endpoint)
}

func stopManager(m *dra.Manager) { m.Stop() }
