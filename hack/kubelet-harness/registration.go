package main

import (
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

// The plugin handler's methods and the DRA manager's Stop differ between
// Kubernetes minors; registration_ctx.go (1.37+) and registration_noctx.go
// (1.35, 1.36, build tags kube_v1_35/kube_v1_36) adapt them. The outcome
// reporting itself is shared.

func (h *reportingHandler) validated(name, endpoint string, versions []string, err error) error {
	if err != nil {
		h.out.emit(event{Event: "registration-failed", Driver: name, Endpoint: endpoint, Versions: versions, Error: err.Error()})
	}
	return err
}

func (h *reportingHandler) registered(name, endpoint string, versions []string, err error) error {
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

func (h *reportingHandler) deregistered(name, endpoint string) {
	h.out.emit(event{Event: "deregistered", Driver: name, Endpoint: endpoint})
}
