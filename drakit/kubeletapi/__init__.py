"""Generated gRPC and protobuf code for the kubelet plugin APIs.

See proto/ and hack/update-codegen.sh.
"""
