//go:build kube_v1_35

package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
)

// nodeGetter adapts the harness's node lookup to dra.GetNodeFunc, which in
// Kubernetes 1.35 takes no context: the lookup uses the harness's own.
func nodeGetter(ctx context.Context, get func(context.Context) (*v1.Node, error)) dra.GetNodeFunc {
	return func() (*v1.Node, error) { return get(ctx) }
}
