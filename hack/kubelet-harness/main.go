// Command kubelet-harness runs the kubelet's real DRA code without the rest
// of the kubelet: the plugin manager watches a registrar folder and
// registers DRA drivers through the real handshake, and the DRA manager
// prepares and unprepares the claims of the pods bound to one node. What
// happens is printed as JSON lines (see README.md); klog goes to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	_ "k8s.io/kubernetes/pkg/features" // registers the Kubernetes feature gates
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
)

const (
	// Retry delays for a pod whose prepare or unprepare failed. The first
	// retries are quick so tests see a driver that shows up late; the cap
	// keeps a broken driver from being hammered.
	retryBaseDelay = 250 * time.Millisecond
	retryMaxDelay  = 10 * time.Second
	podWorkers     = 4
)

type options struct {
	kubeconfig   string
	nodeName     string
	registrarDir string
	stateDir     string
	featureGates string
	output       string
	markRunning  bool
}

func parseFlags() options {
	var o options
	klog.InitFlags(nil)
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the API server (required)")
	flag.StringVar(&o.nodeName, "node-name", "", "name of the Node object this harness acts for (required)")
	flag.StringVar(&o.registrarDir, "registrar-dir", "", "folder watched for plugin registration sockets, the kubelet's plugins_registry (required)")
	flag.StringVar(&o.stateDir, "state-dir", "", "folder for the DRA manager's checkpoint files (required)")
	flag.StringVar(&o.featureGates, "feature-gates", "", "feature gates as key=value pairs separated by commas, as given to the control plane")
	flag.StringVar(&o.output, "output", "-", `where to write JSON-line events: "-" for standard output, or a file path`)
	flag.BoolVar(&o.markRunning, "mark-running", true, "patch the status of prepared pods to Running and Ready")
	flag.Parse()
	return o
}

func (o options) validate() error {
	var errs []error
	for name, value := range map[string]string{
		"--kubeconfig": o.kubeconfig, "--node-name": o.nodeName,
		"--registrar-dir": o.registrarDir, "--state-dir": o.stateDir,
	} {
		if value == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	for name, dir := range map[string]string{"--registrar-dir": o.registrarDir, "--state-dir": o.stateDir} {
		if dir == "" {
			continue
		}
		if info, err := os.Stat(dir); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", name, dir, err))
		} else if !info.IsDir() {
			errs = append(errs, fmt.Errorf("%s %s: not a directory", name, dir))
		}
	}
	return errors.Join(errs...)
}

func main() {
	o := parseFlags()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-harness: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.featureGates != "" {
		if err := utilfeature.DefaultMutableFeatureGate.Set(o.featureGates); err != nil {
			return fmt.Errorf("--feature-gates: %w", err)
		}
	}
	out, err := openEmitter(o.output)
	if err != nil {
		return err
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("client for %s: %w", o.kubeconfig, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := klog.Background().WithValues("node", o.nodeName)
	ctx = klog.NewContext(ctx, logger)
	return serve(ctx, o, client, out)
}

// serve wires the kubelet pieces together the way the kubelet's container
// manager and plugin manager setup does, then blocks until ctx ends.
func serve(ctx context.Context, o options, client kubernetes.Interface, out *emitter) error {
	manager, err := dra.NewManager(klog.FromContext(ctx), client, o.stateDir)
	if err != nil {
		return fmt.Errorf("DRA manager with state in %s: %w", o.stateDir, err)
	}
	defer stopManager(manager)

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(opts *metav1.ListOptions) {
			opts.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.nodeName).String()
		}))
	podInformer := factory.Core().V1().Pods().Informer()
	syncer := newPodSyncer(client, manager, out, o.markRunning)
	if _, err := podInformer.AddEventHandler(syncer.eventHandler()); err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}

	// The kubelet's only pod source here is the API server, so all sources
	// are ready once the pod informer has synced.
	sourcesReady := config.NewSourcesReady(func(sets.Set[string]) bool { return podInformer.HasSynced() })
	getNode := nodeGetter(ctx, func(ctx context.Context) (*v1.Node, error) {
		return client.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
	})
	if err := manager.Start(ctx, syncer.activePods, getNode, sourcesReady); err != nil {
		return fmt.Errorf("start DRA manager: %w", err)
	}

	// The handler only exists after Start.
	handler := &reportingHandler{
		inner:        manager.GetWatcherHandler(),
		out:          out,
		onRegistered: func(string) { syncer.retryPending() },
	}
	plugins := pluginmanager.NewPluginManager(o.registrarDir, &record.FakeRecorder{})
	plugins.AddHandler(registerapi.DRAPlugin, handler)
	go plugins.Run(ctx, sourcesReady, ctx.Done())

	factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced) {
		return fmt.Errorf("pods of node %s: informer did not sync before shutdown", o.nodeName)
	}
	out.emit(event{Event: "ready"})
	syncer.run(ctx, podWorkers)
	factory.Shutdown()
	return nil
}
