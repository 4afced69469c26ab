"""Fixtures of the admission differential: upstream's webhook binary and both webhooks of
each profile, running."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from admission_harness import (
    PROFILES,
    REPO,
    Webhook,
    bundle_of,
    driver_of,
    free_port,
    stopped_at_exit,
    wait_until_served,
)
from helpers.gobuilds import built_binary

from drakit.kubeapi.resources import Resource
from drakit.webhook.cabundle import VALIDATING_WEBHOOK_CONFIGURATIONS

EXAMPLE_SRC = REPO / "examples" / "example-driver" / "src"


@pytest.fixture(scope="session")
def upstream_webhook_binary() -> Path:
    """``dra-example-webhook`` of sigs.k8s.io/dra-example-driver v0.4.0, built once (or
    reused) by ``hack/build-binaries.sh dra-example-webhook``.

    Skips, saying why, only when it cannot be built (no Go toolchain, no module proxy)."""
    return built_binary(
        "dra-example-webhook",
        "reference/dra-example-webhook",
        "upstream's webhook (hack/tools/dra-example-e2e)",
    )


@pytest.fixture(scope="session")
def webhook_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("admission-differential")


def _start_upstream(binary: Path, profile: str, folder: Path, stack: ExitStack) -> Webhook:
    """Upstream's webhook with a certificate for 127.0.0.1 issued here (it takes files);
    stopped when ``stack`` closes."""
    from drakit.webhook.certs import issue  # noqa: PLC0415

    issued = issue(("127.0.0.1",), 3600.0, name=f"upstream-{profile}")
    cert, key = folder / f"upstream-{profile}.crt", folder / f"upstream-{profile}.key"
    cert.write_bytes(issued.cert_pem)
    key.touch(mode=0o600)
    key.write_bytes(issued.key_pem)
    port = free_port()
    log = folder / f"upstream-{profile}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(binary), f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
             f"--port={port}", f"--device-profile={profile}",
             f"--driver-name={driver_of(profile)}"],
            stdout=out, stderr=subprocess.STDOUT, env={"PATH": os.environ.get("PATH", "")},
        )  # fmt: skip
    stack.enter_context(stopped_at_exit(process))
    context = ssl.create_default_context(cadata=issued.ca_pem.decode())
    return Webhook(f"upstream {profile} webhook", port, context, process, log)


def _start_drakit(
    profile: str,
    folder: Path,
    kubeconfig: str,
    *,
    configs: Resource,
    eventually: Callable[..., Any],
    stack: ExitStack,
) -> Webhook:
    """``drakit webhook`` with the example driver's admission backend for ``profile``,
    publishing its CA into a configuration that selects nothing (the control plane is shared
    with other tests); stopped, and the configuration deleted, when ``stack`` closes."""
    name = f"admission-differential-{profile}-{uuid.uuid4().hex[:6]}"
    port = free_port()
    configs.create({
        "metadata": {"name": name},
        "webhooks": [{
            "name": "differential.drakit.dev",
            "rules": [{"apiGroups": ["differential.drakit.dev"], "apiVersions": ["v1"],
                       "operations": ["CREATE"], "resources": ["nothing"]}],
            "clientConfig": {"url": f"https://127.0.0.1:{port}{'/validate-resource-claim-parameters'}"},
            "failurePolicy": "Ignore", "sideEffects": "None", "admissionReviewVersions": ["v1"],
        }],
    })  # fmt: skip
    stack.callback(configs.delete, name)
    log = folder / f"drakit-{profile}.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE_SRC), *sys.path])}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "drakit", "webhook", "--kubeconfig", kubeconfig,
             "--backend", f"example_driver.admission:{profile.capitalize()}Admission",
             "--driver-name", driver_of(profile), "--port", str(port),
             "--webhook-configuration", name, "--log-format", "text"],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    stack.enter_context(stopped_at_exit(process))
    bundle = eventually(lambda: process.poll() is None and bundle_of(configs, name),
                        what=f"drakit {profile} webhook publishing its CA", timeout=60)  # fmt: skip
    context = ssl.create_default_context(cadata=bundle.decode())
    return Webhook(f"drakit {profile} webhook", port, context, process, log)


@pytest.fixture(scope="session")
def webhooks(
    upstream_webhook_binary: Path, cluster: Any, api: Any, webhook_dir: Path
) -> Iterator[dict[str, tuple[Webhook, Webhook]]]:
    """profile -> (upstream's webhook, drakit's), all four serving."""
    from helpers.waiting import eventually  # noqa: PLC0415

    configs = Resource(api, VALIDATING_WEBHOOK_CONFIGURATIONS)
    with ExitStack() as stack:
        pairs = {}
        for profile in PROFILES:
            upstream = _start_upstream(upstream_webhook_binary, profile, webhook_dir, stack)
            drakit = _start_drakit(
                profile,
                webhook_dir,
                cluster.kubeconfig,
                configs=configs,
                eventually=eventually,
                stack=stack,
            )
            pairs[profile] = (upstream, drakit)
        for hook in (h for pair in pairs.values() for h in pair):
            wait_until_served(hook)
        yield pairs
