"""Generated gRPC and protobuf code for the kubelet plugin APIs (see proto/ and hack/update-codegen.sh)."""
