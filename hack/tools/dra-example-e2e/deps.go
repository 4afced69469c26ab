//go:build tools

// Package deps is never built: its imports are the packages that
// sigs.k8s.io/dra-example-driver/test/e2e imports from other modules, so that
// `go mod tidy` keeps them (test imports of a dependency are otherwise pruned)
// and `go test -c sigs.k8s.io/dra-example-driver/test/e2e` finds their sums.
package deps

import (
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "helm.sh/helm/v4/pkg/action"
	_ "helm.sh/helm/v4/pkg/chart/loader"
	_ "helm.sh/helm/v4/pkg/cli"
	_ "helm.sh/helm/v4/pkg/kube"
	_ "helm.sh/helm/v4/pkg/registry"
	_ "helm.sh/helm/v4/pkg/strvals"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/api/resource/v1"
	_ "k8s.io/apimachinery/pkg/api/meta"
	_ "k8s.io/client-go/dynamic"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/restmapper"
	_ "k8s.io/client-go/tools/clientcmd"
)
