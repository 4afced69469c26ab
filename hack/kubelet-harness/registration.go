package main

import (
	"context"
	"time"

	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
)

// reportingHandler sits between the kubelet's plugin manager and the DRA
// manager's registration handler. It changes nothing about registration:
// every call goes to the real handler, and the outcome is reported as an
// event so that tests can see when a driver became usable.
type reportingHandler struct {
	inner cache.PluginHandler
	out   *emitter
	// onRegistered runs after a successful registration, e.g. to retry pods
	// that could not be prepared while the driver was missing.
	onRegistered func(driver string)
}

var _ cache.PluginHandler = &reportingHandler{}

func (h *reportingHandler) ValidatePlugin(ctx context.Context, name, endpoint string, versions []string) error {
	err := h.inner.ValidatePlugin(ctx, name, endpoint, versions)
	if err != nil {
		h.out.emit(event{Event: "registration-failed", Driver: name, Endpoint: endpoint, Versions: versions, Error: err.Error()})
	}
	return err
}

func (h *reportingHandler) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string, timeout *time.Duration) error {
	err := h.inner.RegisterPlugin(ctx, name, endpoint, versions, timeout)
	if err != nil {
		h.out.emit(event{Event: "registration-failed", Driver: name, Endpoint: endpoint, Versions: versions, Error: err.Error()})
		return err
	}
	h.out.emit(event{Event: "registered", Driver: name, Endpoint: endpoint, Versions: versions})
	if h.onRegistered != nil {
		h.onRegistered(name)
	}
	return nil
}

func (h *reportingHandler) DeRegisterPlugin(ctx context.Context, name, endpoint string) {
	h.inner.DeRegisterPlugin(ctx, name, endpoint)
	h.out.emit(event{Event: "deregistered", Driver: name, Endpoint: endpoint})
}
