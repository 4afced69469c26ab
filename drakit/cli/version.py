"""``drakit version``: what this build is and which APIs it speaks."""

from __future__ import annotations

import argparse
import json

from drakit.cli.flags import Subcommands, add_command
from drakit.version import KUBELET_SERVICES, KUBERNETES_VERSION, RESOURCE_API_VERSIONS, __version__


def add_parser(sub: Subcommands) -> None:
    p = add_command(
        sub,
        "version",
        summary="print drakit's version and the Kubernetes APIs it speaks",
        description="Print drakit's version, the Kubernetes release it targets, the\n"
        "resource.k8s.io API versions it reads and the kubelet gRPC services it serves.",
    )
    p.add_argument("-o", "--output", choices=["text", "json"], default="text", help="output format")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    resource_apis = [f"resource.k8s.io/{v}" for v in RESOURCE_API_VERSIONS]
    facts = {
        "drakit": __version__,
        "kubernetes": KUBERNETES_VERSION,
        "resourceAPIs": resource_apis,
        "kubeletServices": list(KUBELET_SERVICES),
    }
    if args.output == "json":
        print(json.dumps(facts, indent=2))
    else:
        print(f"drakit {__version__} for Kubernetes {KUBERNETES_VERSION}")
        print("resource APIs:    " + ", ".join(resource_apis))
        print("kubelet services: " + ", ".join(KUBELET_SERVICES))
    return 0
