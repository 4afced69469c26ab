"""The drakit kubelet plugin: registration, DRA gRPC services, ResourceSlice
publishing and prepare/unprepare."""
