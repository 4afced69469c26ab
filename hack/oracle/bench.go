package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"k8s.io/dynamic-resource-allocation/structured"
)

// benchDoc is the JSON shape of a benchmark workload (see README.md).
type benchDoc struct {
	Slices         []json.RawMessage `json:"slices"`
	Classes        []json.RawMessage `json:"classes"`
	Allocated      []json.RawMessage `json:"allocated"`
	Nodes          []json.RawMessage `json:"nodes"`
	ClaimTemplates []json.RawMessage `json:"claimTemplates"`
	Pods           int               `json:"pods"`
	FeasibleNodes  int               `json:"feasibleNodes"`
	Features       map[string]bool   `json:"features"`
}

type workload struct {
	slices        []*resourceapi.ResourceSlice
	classes       classLister
	allocated     []*resourceapi.ResourceClaim
	nodes         []*v1.Node
	podClaims     [][]*resourceapi.ResourceClaim
	feasibleNodes int
	features      structured.Features
}

// benchRun is the outcome of one pass over all pods.
type benchRun struct {
	AllocateSeconds float64 `json:"allocateSeconds"`
	AllocateCalls   int     `json:"allocateCalls"`
	Scheduled       int     `json:"scheduled"`
	placementHash   string
}

type benchReport struct {
	Implementation         string     `json:"implementation"`
	Nodes                  int        `json:"nodes"`
	Pods                   int        `json:"pods"`
	FeasibleNodes          int        `json:"feasibleNodes"`
	Iterations             int        `json:"iterations"`
	Scheduled              int        `json:"scheduled"`
	AllocateCalls          int        `json:"allocateCalls"`
	MedianAllocateSeconds  float64    `json:"medianAllocateSeconds"`
	AllocateCallsPerSecond float64    `json:"allocateCallsPerSecond"`
	PodsPerSecond          float64    `json:"podsPerSecond"`
	PlacementSHA256        string     `json:"placementSha256"`
	Runs                   []benchRun `json:"runs"`
}

func parseWorkload(data []byte) (*workload, error) {
	var doc benchDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	if doc.Pods <= 0 {
		return nil, errors.New("pods: must be a positive number of pods to schedule")
	}
	if len(doc.Nodes) == 0 {
		return nil, errors.New("nodes: at least one Node is required")
	}
	w := &workload{feasibleNodes: doc.FeasibleNodes}
	if w.feasibleNodes <= 0 {
		w.feasibleNodes = 1
	}
	var err error
	if w.features, err = decodeFeatures(doc.Features); err != nil {
		return nil, err
	}
	if w.slices, err = decodeList[resourceapi.ResourceSlice](doc.Slices, "slices"); err != nil {
		return nil, err
	}
	classes, err := decodeList[resourceapi.DeviceClass](doc.Classes, "classes")
	if err != nil {
		return nil, err
	}
	w.classes = newClassLister(classes)
	if w.allocated, err = decodeList[resourceapi.ResourceClaim](doc.Allocated, "allocated"); err != nil {
		return nil, err
	}
	for i, raw := range doc.Nodes {
		node, err := decodeNode(raw, fmt.Sprintf("nodes[%d]", i))
		if err != nil {
			return nil, err
		}
		w.nodes = append(w.nodes, node)
	}
	templates, err := decodeList[resourceapi.ResourceClaim](doc.ClaimTemplates, "claimTemplates")
	if err != nil {
		return nil, err
	}
	w.podClaims = instantiateClaims(templates, doc.Pods)
	return w, nil
}

// instantiateClaims gives every pod its own copy of the template claims,
// named "<template name>-<pod index>", as a ResourceClaimTemplate would.
func instantiateClaims(templates []*resourceapi.ResourceClaim, pods int) [][]*resourceapi.ResourceClaim {
	out := make([][]*resourceapi.ResourceClaim, pods)
	for pod := range pods {
		for _, template := range templates {
			claim := template.DeepCopy()
			claim.Name = fmt.Sprintf("%s-%d", template.Name, pod)
			defaultClaim(claim)
			out[pod] = append(out[pod], claim)
		}
	}
	return out
}

// runBench schedules every pod once per iteration and reports the median.
func runBench(ctx context.Context, w *workload, iterations int) (*benchReport, error) {
	report := &benchReport{
		Implementation: "go",
		Nodes:          len(w.nodes),
		Pods:           len(w.podClaims),
		FeasibleNodes:  w.feasibleNodes,
		Iterations:     iterations,
	}
	for range iterations {
		run, err := benchOnce(ctx, w)
		if err != nil {
			return nil, err
		}
		if report.PlacementSHA256 != "" && report.PlacementSHA256 != run.placementHash {
			return nil, errors.New("placements differ between iterations: the allocator is not deterministic")
		}
		report.PlacementSHA256 = run.placementHash
		report.Runs = append(report.Runs, run)
	}
	seconds := make([]float64, len(report.Runs))
	for i, run := range report.Runs {
		seconds[i] = run.AllocateSeconds
	}
	sort.Float64s(seconds)
	report.MedianAllocateSeconds = seconds[len(seconds)/2]
	report.Scheduled = report.Runs[0].Scheduled
	report.AllocateCalls = report.Runs[0].AllocateCalls
	if report.MedianAllocateSeconds > 0 {
		report.AllocateCallsPerSecond = float64(report.AllocateCalls) / report.MedianAllocateSeconds
		report.PodsPerSecond = float64(report.Scheduled) / report.MedianAllocateSeconds
	}
	return report, nil
}

// benchOnce mimics the scheduler for one pod after the other: a fresh
// Allocator per pod over the current allocated state (PreFilter), Allocate
// on nodes from a rotating start index until feasibleNodes nodes fit
// (Filter), the first fitting node's result is kept and its devices are
// marked allocated (Reserve). Only the Allocate calls are timed.
func benchOnce(ctx context.Context, w *workload) (benchRun, error) {
	var run benchRun
	state := newAllocatedState(w.features.ConsumableCapacity)
	for _, claim := range w.allocated {
		if claim.Status.Allocation != nil {
			state.add(claim.Status.Allocation)
		}
	}
	celCache := newCELCache(10, w.features)
	placements := sha256.New()
	var elapsed time.Duration
	start := 0
	for pod, claims := range w.podClaims {
		allocator, err := structured.NewAllocator(ctx, w.features, state.snapshot(), w.classes, w.slices, celCache)
		if err != nil {
			return run, fmt.Errorf("pod %d: %w", pod, err)
		}
		var chosen []resourceapi.AllocationResult
		var chosenNode string
		feasible, visited := 0, 0
		for ; visited < len(w.nodes) && feasible < w.feasibleNodes; visited++ {
			node := w.nodes[(start+visited)%len(w.nodes)]
			began := time.Now()
			allocations, err := allocator.Allocate(ctx, node, claims)
			elapsed += time.Since(began)
			run.AllocateCalls++
			if err != nil && !errors.Is(err, structured.ErrFailedAllocationOnNode) {
				return run, fmt.Errorf("pod %d, node %s: %w", pod, node.Name, err)
			}
			if err == nil && len(allocations) == len(claims) {
				feasible++
				if chosen == nil {
					chosen, chosenNode = allocations, node.Name
				}
			}
		}
		start = (start + visited) % len(w.nodes)
		if chosen != nil {
			run.Scheduled++
			for i := range chosen {
				state.add(&chosen[i])
			}
		}
		writePlacement(placements, pod, chosenNode, chosen)
	}
	run.AllocateSeconds = elapsed.Seconds()
	run.placementHash = hex.EncodeToString(placements.Sum(nil))
	return run, nil
}

// writePlacement adds one pod's line to the placement digest:
// "<pod> <node> <request>=<driver>/<pool>/<device>,...;..." or "<pod> -".
func writePlacement(h hash.Hash, pod int, node string, allocations []resourceapi.AllocationResult) {
	if allocations == nil {
		fmt.Fprintf(h, "%d -\n", pod)
		return
	}
	claims := make([]string, len(allocations))
	for i, allocation := range allocations {
		devices := make([]string, len(allocation.Devices.Results))
		for j, r := range allocation.Devices.Results {
			devices[j] = fmt.Sprintf("%s=%s/%s/%s", r.Request, r.Driver, r.Pool, r.Device)
		}
		claims[i] = strings.Join(devices, ",")
	}
	fmt.Fprintf(h, "%d %s %s\n", pod, node, strings.Join(claims, ";"))
}
