//go:build !kube_v1_35

package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
)

// nodeGetter adapts the harness's node lookup to dra.GetNodeFunc, which
// takes a context from Kubernetes 1.36 on.
func nodeGetter(_ context.Context, get func(context.Context) (*v1.Node, error)) dra.GetNodeFunc {
	return get
}
