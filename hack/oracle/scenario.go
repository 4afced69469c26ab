package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	sjson "sigs.k8s.io/json"

	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Outcomes of one scenario. They mirror how the kube-scheduler's
// DynamicResources Filter treats the allocator's answer for one node.
const (
	outcomeAllocated     = "allocated"
	outcomeUnschedulable = "unschedulable"
	outcomeError         = "error"
)

// scenarioDoc is the JSON shape of one scenario (see README.md). Keys that
// are not listed here (a case name, an expected outcome) are ignored so that
// test tables can pass their case dicts through unchanged.
type scenarioDoc struct {
	Slices    []json.RawMessage `json:"slices"`
	Classes   []json.RawMessage `json:"classes"`
	Claims    []json.RawMessage `json:"claims"`
	Allocated []json.RawMessage `json:"allocated"`
	Node      json.RawMessage   `json:"node"`
	Features  map[string]bool   `json:"features"`
}

// scenario is a decoded, API-defaulted scenario ready for the allocator.
type scenario struct {
	slices    []*resourceapi.ResourceSlice
	classes   classLister
	claims    []*resourceapi.ResourceClaim
	allocated []*resourceapi.ResourceClaim
	node      *v1.Node
	features  structured.Features
}

// result is what the oracle prints for one scenario.
type result struct {
	Outcome     string            `json:"outcome"`
	Allocations []claimAllocation `json:"allocations,omitempty"`
	Error       string            `json:"error,omitempty"`
}

type claimAllocation struct {
	Claim      string                       `json:"claim"`
	Allocation resourceapi.AllocationResult `json:"allocation"`
}

// featureSetters maps the scenario's feature keys to allocator features.
// The first seven default to on (the "experimental" channel drakit ports);
// the alpha-only extras default to off.
var featureSetters = map[string]func(*structured.Features, bool){
	"adminAccess":             func(f *structured.Features, on bool) { f.AdminAccess = on },
	"prioritizedList":         func(f *structured.Features, on bool) { f.PrioritizedList = on },
	"partitionableDevices":    func(f *structured.Features, on bool) { f.PartitionableDevices = on },
	"deviceTaints":            func(f *structured.Features, on bool) { f.DeviceTaints = on },
	"deviceBindingConditions": func(f *structured.Features, on bool) { f.DeviceBindingAndStatus = on },
	"consumableCapacity":      func(f *structured.Features, on bool) { f.ConsumableCapacity = on },
	"listTypeAttributes":      func(f *structured.Features, on bool) { f.ListTypeAttributes = on },
	"compatibilityGroups":     func(f *structured.Features, on bool) { f.CompatibilityGroups = on },
	"derivedAttributes":       func(f *structured.Features, on bool) { f.DerivedAttributes = on },
	"fractionalCapacityRange": func(f *structured.Features, on bool) { f.FractionalCapacityRange = on },
	"optionalNodeOperations":  func(f *structured.Features, on bool) { f.OptionalNodeOperations = on },
}

func defaultFeatures() structured.Features {
	return structured.Features{
		AdminAccess:            true,
		PrioritizedList:        true,
		PartitionableDevices:   true,
		DeviceTaints:           true,
		DeviceBindingAndStatus: true,
		ConsumableCapacity:     true,
		ListTypeAttributes:     true,
	}
}

// decodeFeatures starts from the defaults and applies every listed key.
// An unknown key is an error: a typo must not silently change the channel.
func decodeFeatures(keys map[string]bool) (structured.Features, error) {
	features := defaultFeatures()
	names := make([]string, 0, len(keys))
	for name := range keys {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		set, ok := featureSetters[name]
		if !ok {
			return features, fmt.Errorf("features.%s: unknown feature (known: %s)", name, strings.Join(knownFeatures(), ", "))
		}
		set(&features, keys[name])
	}
	return features, nil
}

func knownFeatures() []string {
	names := make([]string, 0, len(featureSetters))
	for name := range featureSetters {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// decodeStrict decodes one API object, rejecting unknown or duplicate
// fields the way the API server does, so a misspelt field in a generated
// scenario fails loudly instead of being dropped on one side only.
func decodeStrict(raw json.RawMessage, into any, what string) error {
	strictErrs, err := sjson.UnmarshalStrict(raw, into)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if len(strictErrs) > 0 {
		return fmt.Errorf("%s: %w", what, errors.Join(strictErrs...))
	}
	return nil
}

func decodeList[T any](raws []json.RawMessage, field string) ([]*T, error) {
	out := make([]*T, 0, len(raws))
	for i, raw := range raws {
		obj := new(T)
		if err := decodeStrict(raw, obj, fmt.Sprintf("%s[%d]", field, i)); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// parseScenario decodes one scenario document and applies API defaults.
func parseScenario(data []byte) (*scenario, error) {
	var doc scenarioDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	sc := &scenario{}
	var err error
	if sc.features, err = decodeFeatures(doc.Features); err != nil {
		return nil, err
	}
	if sc.slices, err = decodeList[resourceapi.ResourceSlice](doc.Slices, "slices"); err != nil {
		return nil, err
	}
	classes, err := decodeList[resourceapi.DeviceClass](doc.Classes, "classes")
	if err != nil {
		return nil, err
	}
	sc.classes = newClassLister(classes)
	if sc.claims, err = decodeList[resourceapi.ResourceClaim](doc.Claims, "claims"); err != nil {
		return nil, err
	}
	if sc.allocated, err = decodeList[resourceapi.ResourceClaim](doc.Allocated, "allocated"); err != nil {
		return nil, err
	}
	if sc.node, err = decodeNode(doc.Node, "node"); err != nil {
		return nil, err
	}
	for _, claim := range sc.claims {
		defaultClaim(claim)
	}
	for _, claim := range sc.allocated {
		defaultClaim(claim)
		if claim.Status.Allocation == nil {
			return nil, fmt.Errorf("allocated: claim %s has no status.allocation", claimKey(claim))
		}
	}
	return sc, nil
}

func decodeNode(raw json.RawMessage, field string) (*v1.Node, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("%s: required (a Node with metadata.name)", field)
	}
	node := &v1.Node{}
	if err := decodeStrict(raw, node, field); err != nil {
		return nil, err
	}
	if node.Name == "" {
		return nil, fmt.Errorf("%s.metadata.name: required", field)
	}
	return node, nil
}

// defaultClaim applies the API server's defaulting for resource.k8s.io/v1
// claims (allocationMode ExactCount, count 1, toleration operator Equal).
// The allocator itself does not default and would treat an empty mode as
// a fatal error, while objects read from the API are always defaulted.
func defaultClaim(claim *resourceapi.ResourceClaim) {
	for i := range claim.Spec.Devices.Requests {
		request := &claim.Spec.Devices.Requests[i]
		if exact := request.Exactly; exact != nil {
			exact.AllocationMode, exact.Count = defaultMode(exact.AllocationMode, exact.Count)
			defaultTolerations(exact.Tolerations)
		}
		for j := range request.FirstAvailable {
			sub := &request.FirstAvailable[j]
			sub.AllocationMode, sub.Count = defaultMode(sub.AllocationMode, sub.Count)
			defaultTolerations(sub.Tolerations)
		}
	}
}

func defaultMode(mode resourceapi.DeviceAllocationMode, count int64) (resourceapi.DeviceAllocationMode, int64) {
	if mode == "" {
		mode = resourceapi.DeviceAllocationModeExactCount
	}
	if mode == resourceapi.DeviceAllocationModeExactCount && count == 0 {
		count = 1
	}
	return mode, count
}

func defaultTolerations(tolerations []resourceapi.DeviceToleration) {
	for i := range tolerations {
		if tolerations[i].Operator == "" {
			tolerations[i].Operator = resourceapi.DeviceTolerationOpEqual
		}
	}
}

func claimKey(claim *resourceapi.ResourceClaim) string {
	return claim.Namespace + "/" + claim.Name
}

// classLister serves DeviceClasses by name; a missing class gets the same
// NotFound error the scheduler's informer-backed lister would return.
type classLister struct {
	byName map[string]*resourceapi.DeviceClass
	all    []*resourceapi.DeviceClass
}

func newClassLister(classes []*resourceapi.DeviceClass) classLister {
	byName := make(map[string]*resourceapi.DeviceClass, len(classes))
	for _, class := range classes {
		byName[class.Name] = class
	}
	return classLister{byName: byName, all: classes}
}

func (l classLister) List() ([]*resourceapi.DeviceClass, error) { return l.all, nil }

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if class, ok := l.byName[name]; ok {
		return class, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// newCELCache returns the compile cache the scheduler plugin would build for
// these features.
func newCELCache(size int, features structured.Features) *cel.Cache {
	return cel.NewCache(size, cel.Features{
		EnableConsumableCapacity: features.ConsumableCapacity,
		EnableListTypeAttributes: features.ListTypeAttributes,
	})
}

// runScenario allocates the scenario's claims on its node in one Allocate
// call, as the scheduler's Filter does for one pod and one node.
func runScenario(ctx context.Context, sc *scenario, celCache *cel.Cache, timeout time.Duration) (res result) {
	defer func() {
		if r := recover(); r != nil {
			res = result{Outcome: outcomeError, Error: fmt.Sprintf("oracle: allocator panicked: %v", r)}
		}
	}()
	state := newAllocatedState(sc.features.ConsumableCapacity)
	for _, claim := range sc.allocated {
		state.add(claim.Status.Allocation)
	}
	allocator, err := structured.NewAllocator(ctx, sc.features, state.snapshot(), sc.classes, sc.slices, celCache)
	if err != nil {
		return result{Outcome: outcomeError, Error: err.Error()}
	}
	allocCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	allocations, err := allocator.Allocate(allocCtx, sc.node, sc.claims)
	return classify(sc.claims, allocations, err)
}

// classify turns Allocate's answer into an outcome the way the scheduler's
// Filter does: ErrFailedAllocationOnNode and "no result" mean this node does
// not fit; every other error (including a time-out) is fatal for the pod.
func classify(claims []*resourceapi.ResourceClaim, allocations []resourceapi.AllocationResult, err error) result {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return result{Outcome: outcomeError, Error: fmt.Sprintf("timed out trying to allocate devices: %v", err)}
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return result{Outcome: outcomeUnschedulable, Error: err.Error()}
	case err != nil:
		return result{Outcome: outcomeError, Error: err.Error()}
	case len(allocations) != len(claims):
		return result{Outcome: outcomeUnschedulable}
	}
	out := result{Outcome: outcomeAllocated, Allocations: make([]claimAllocation, len(claims))}
	for i, claim := range claims {
		out.Allocations[i] = claimAllocation{Claim: claimKey(claim), Allocation: allocations[i]}
	}
	return out
}
