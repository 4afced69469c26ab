// Command cert-manager runs cert-manager's certificate controllers or its CA injector,
// built from the github.com/cert-manager/cert-manager module at the version upstream's
// dra-example-driver e2e setup installs (test/e2e/setup-e2e.sh: chart v1.20.2).
//
//	cert-manager controller --kubeconfig FILE   Issuers, Certificates, CertificateRequests
//	cert-manager cainjector --kubeconfig FILE   caBundle of annotated webhook configurations
//
// Why a main of our own: cert-manager's command packages (cmd/controller/app,
// cmd/cainjector/app) are nested modules that are not published to the Go module proxy,
// so they cannot be pinned. This main does what they do with the exported packages of
// the main module: the same controller constructors (controller.Known()), the same
// ContextFactory with the options' documented defaults, the same CA injector
// reconcilers (cainjector.RegisterAllInjectors). Left out, because nothing in the
// reference run uses them: ACME, Vault and Venafi issuers, the ingress and gateway
// shims, leader election (one instance), the metrics, healthz and profiling listeners,
// and cert-manager's own admission webhook (internal packages only).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	certmetrics "github.com/cert-manager/cert-manager/pkg/controller/certificates/metrics"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"         // registers the CA issuer
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned" // registers the SelfSigned issuer
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
)

// controllers: cert-manager v1.20.2's default set (DefaultEnabledControllers) less the
// ACME, Vault and Venafi issuers and the ingress shim.
var controllers = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	certmetrics.ControllerName,
	approver.ControllerName,
	crca.CRControllerName,
	crselfsigned.CRControllerName,
	trigger.ControllerName,
	issuing.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

// workers: the controller's --concurrent-workers default.
const workers = 5

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "controller" && os.Args[1] != "cainjector") {
		fmt.Fprintln(os.Stderr, "usage: cert-manager controller|cainjector --kubeconfig FILE")
		os.Exit(2)
	}
	role := os.Args[1]
	flags := flag.NewFlagSet(role, flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	_ = flags.Parse(os.Args[2:])
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "cert-manager: --kubeconfig is required")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log)
	ctx = logf.NewContext(ctx, logf.Log)

	run := runController
	if role == "cainjector" {
		run = runCAInjector
	}
	if err := run(ctx, *kubeconfig); err != nil && !errors.Is(err, context.Canceled) {
		logf.Log.Error(err, "cert-manager "+role+" failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

// runController runs the certificate controllers until ctx ends or one of them fails.
func runController(ctx context.Context, kubeconfig string) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig: kubeconfig,
		// The defaults of cert-manager's ControllerConfiguration v1alpha1.
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        "kube-system",
			ClusterIssuerAmbientCredentials: true,
		},
		ACMEOptions: controller.ACMEOptions{
			DNS01CheckAuthoritative: true,
			DNS01CheckRetryPeriod:   10 * time.Second,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: 60},
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes: []string{
				"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/",
			},
			CertificateRequestMinimumBackoffDuration: time.Hour,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(controllers))
	for _, name := range controllers {
		construct, ok := controller.Known()[name]
		if !ok {
			return fmt.Errorf("controller %q is not registered by this cert-manager version", name)
		}
		loop, err := construct(factory)
		if err != nil {
			return fmt.Errorf("controller %q: %w", name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loop.Run(workers, ctx); err != nil {
				errs <- fmt.Errorf("controller %q: %w", name, err)
				cancel()
			}
		}()
	}
	// As cert-manager's controller does: the informers start after every controller
	// has registered its own.
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	logf.Log.Info("cert-manager controller started", "controllers", controllers)
	wg.Wait()
	close(errs)
	return <-errs
}

// runCAInjector runs the CA injector's reconcilers for webhook configurations, API
// services and CRDs, with Certificates as a data source (cainjector's defaults).
func runCAInjector(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		kscheme.AddToScheme, cmscheme.AddToScheme, apiext.AddToScheme, apireg.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true},
		// Secrets are read directly, not cached (as cainjector does).
		Client:  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	})
	if err != nil {
		return err
	}
	logf.Log.Info("cert-manager cainjector started")
	return mgr.Start(ctx)
}
