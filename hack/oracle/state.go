package main

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"k8s.io/dynamic-resource-allocation/structured"
)

// allocatedState accumulates the devices already in use, the way the
// scheduler's allocatedDevices tracker does: admin-access results are not
// counted; with consumable capacity on, results that carry a shareID are
// recorded as shared IDs plus consumed capacity instead of dedicated IDs.
type allocatedState struct {
	consumableCapacity bool
	devices            sets.Set[structured.DeviceID]
	shared             sets.Set[structured.SharedDeviceID]
	capacity           structured.ConsumedCapacityCollection
}

func newAllocatedState(consumableCapacity bool) *allocatedState {
	return &allocatedState{
		consumableCapacity: consumableCapacity,
		devices:            sets.New[structured.DeviceID](),
		shared:             sets.New[structured.SharedDeviceID](),
		capacity:           structured.NewConsumedCapacityCollection(),
	}
}

// add records every device of one allocation result.
func (s *allocatedState) add(allocation *resourceapi.AllocationResult) {
	for _, r := range allocation.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if s.consumableCapacity && r.ShareID != nil {
			s.shared.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				s.capacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
			continue
		}
		s.devices.Insert(id)
	}
}

// snapshot returns a copy the allocator may keep while s keeps changing.
func (s *allocatedState) snapshot() structured.AllocatedState {
	return structured.AllocatedState{
		AllocatedDevices:         s.devices.Clone(),
		AllocatedSharedDeviceIDs: s.shared.Clone(),
		AggregatedCapacity:       s.capacity.Clone(),
	}
}
