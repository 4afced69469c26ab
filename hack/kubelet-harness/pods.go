package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/utils/ptr"
)

// podState is what the harness remembers about one pod (one UID).
type podState struct {
	pod      *v1.Pod // last object seen; kept after deletion for unprepare
	gone     bool    // the object no longer exists in the API server
	prepared bool    // PrepareResources succeeded and "prepared" was printed
	finished bool    // UnprepareResources succeeded and "unprepared" was printed
}

// podSyncer plays the part of the kubelet's pod workers for DRA only: it
// prepares the claims of every live pod bound to the node and unprepares
// them once the pod is terminal, being deleted, or gone. Failures are
// retried with per-pod exponential backoff, as a pod sync would be.
type podSyncer struct {
	client      kubernetes.Interface
	manager     *dra.Manager
	out         *emitter
	markRunning bool
	queue       workqueue.TypedRateLimitingInterface[types.UID]

	mu   sync.Mutex
	pods map[types.UID]*podState
}

func newPodSyncer(client kubernetes.Interface, manager *dra.Manager, out *emitter, markRunning bool) *podSyncer {
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](retryBaseDelay, retryMaxDelay)
	return &podSyncer{
		client:      client,
		manager:     manager,
		out:         out,
		markRunning: markRunning,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "pods"}),
		pods: map[types.UID]*podState{},
	}
}

// eventHandler feeds informer notifications into the syncer.
func (s *podSyncer) eventHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.observe(obj, false) },
		UpdateFunc: func(_, obj any) { s.observe(obj, false) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			s.observe(obj, true)
		},
	}
}

func (s *podSyncer) observe(obj any, gone bool) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	s.mu.Lock()
	st := s.pods[pod.UID]
	if st == nil {
		st = &podState{}
		s.pods[pod.UID] = st
	}
	st.pod = pod
	st.gone = st.gone || gone
	s.mu.Unlock()
	s.queue.Add(pod.UID)
}

// activePods is the DRA manager's view of which pods may still use their
// claims: everything not yet unprepared. Its reconcile loop unprepares
// claims (for example from the checkpoint) whose pods are not in this list.
func (s *podSyncer) activePods() []*v1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	active := make([]*v1.Pod, 0, len(s.pods))
	for _, st := range s.pods {
		if !st.finished {
			active = append(active, st.pod)
		}
	}
	return active
}

// retryPending queues every pod still waiting to be prepared, so that a
// newly registered driver is used without waiting for the backoff to expire.
func (s *podSyncer) retryPending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, st := range s.pods {
		if !st.prepared && !st.finished {
			s.queue.Add(uid)
		}
	}
}

// run processes pods with the given number of workers until ctx ends.
func (s *podSyncer) run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for s.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
}

func (s *podSyncer) processNext(ctx context.Context) bool {
	uid, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(uid)
	if err := s.sync(ctx, uid); err != nil {
		klog.FromContext(ctx).V(2).Info("Pod sync failed, will retry", "podUID", uid, "err", err)
		s.queue.AddRateLimited(uid)
		return true
	}
	s.queue.Forget(uid)
	return true
}

// snapshot returns a copy of the pod's state, or false if it is unknown.
func (s *podSyncer) snapshot(uid types.UID) (podState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.pods[uid]
	if st == nil {
		return podState{}, false
	}
	return *st, true
}

func (s *podSyncer) update(uid types.UID, change func(*podState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.pods[uid]; st != nil {
		change(st)
		if st.gone && st.finished {
			delete(s.pods, uid)
		}
	}
}

func (s *podSyncer) sync(ctx context.Context, uid types.UID) error {
	st, ok := s.snapshot(uid)
	if !ok {
		return nil
	}
	pod := st.pod
	switch {
	case st.finished:
		return s.finalizeDeletion(ctx, st)
	case st.gone || isTerminal(pod) || pod.DeletionTimestamp != nil:
		return s.unprepare(ctx, st)
	case st.prepared:
		return nil
	default:
		return s.prepare(ctx, pod)
	}
}

func (s *podSyncer) prepare(ctx context.Context, pod *v1.Pod) error {
	key := podKey(pod)
	if err := s.manager.PrepareResources(ctx, pod); err != nil {
		s.out.emit(event{Event: "prepare-failed", Pod: key, UID: string(pod.UID), Error: err.Error()})
		return err
	}
	containers, err := s.cdiDevicesPerContainer(pod)
	if err != nil {
		s.out.emit(event{Event: "prepare-failed", Pod: key, UID: string(pod.UID), Error: err.Error()})
		return err
	}
	s.update(pod.UID, func(st *podState) { st.prepared = true })
	s.out.emit(event{Event: "prepared", Pod: key, UID: string(pod.UID), Containers: containers})
	if s.markRunning {
		s.setRunning(ctx, pod)
	}
	return nil
}

// cdiDevicesPerContainer asks the DRA manager which CDI devices each init
// and regular container would be given, as the kubelet does when it builds
// the CRI container config. Every container is listed, possibly with none.
func (s *podSyncer) cdiDevicesPerContainer(pod *v1.Pod) (map[string][]string, error) {
	result := map[string][]string{}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			info, err := s.manager.GetResources(pod, &list[i])
			if err != nil {
				return nil, fmt.Errorf("container %s: %w", list[i].Name, err)
			}
			ids := make([]string, 0, len(info.CDIDevices))
			for _, dev := range info.CDIDevices {
				ids = append(ids, dev.Name)
			}
			result[list[i].Name] = ids
		}
	}
	return result, nil
}

func (s *podSyncer) unprepare(ctx context.Context, st podState) error {
	pod := st.pod
	key := podKey(pod)
	if err := s.manager.UnprepareResources(ctx, pod); err != nil {
		s.out.emit(event{Event: "unprepare-failed", Pod: key, UID: string(pod.UID), Error: err.Error()})
		return err
	}
	s.update(pod.UID, func(st *podState) { st.finished = true })
	s.out.emit(event{Event: "unprepared", Pod: key, UID: string(pod.UID)})
	st.finished = true
	return s.finalizeDeletion(ctx, st)
}

// finalizeDeletion does what the kubelet does once a terminating pod's
// resources are released: it removes the pod object for good (grace period
// zero, only this UID). Without it a gracefully deleted pod would stay
// Terminating forever, since no container runtime confirms the shutdown.
func (s *podSyncer) finalizeDeletion(ctx context.Context, st podState) error {
	pod := st.pod
	if st.gone || pod.DeletionTimestamp == nil {
		return nil
	}
	err := s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s after unprepare: %w", podKey(pod), err)
	}
	return nil
}

// setRunning reports the pod as running and ready, for people and tools
// that look at pod status. Failure is logged, never retried: no test may
// depend on it.
func (s *podSyncer) setRunning(ctx context.Context, pod *v1.Pod) {
	patch, _ := json.Marshal(map[string]any{
		"status": map[string]any{
			"phase": v1.PodRunning,
			"conditions": []map[string]any{
				{"type": v1.PodInitialized, "status": v1.ConditionTrue},
				{"type": v1.ContainersReady, "status": v1.ConditionTrue},
				{"type": v1.PodReady, "status": v1.ConditionTrue},
			},
		},
	})
	_, err := s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Could not mark pod running", "pod", klog.KObj(pod), "err", err)
	}
}

func isTerminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

func podKey(pod *v1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}
