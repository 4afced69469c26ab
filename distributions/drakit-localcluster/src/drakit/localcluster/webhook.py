"""``drakit webhook`` beside a local control plane, as ``drakit dev`` runs it.

:func:`webhook_configuration` is the ValidatingWebhookConfiguration docs/writing-a-driver.md
recommends ("Validating opaque config at admission"): only CREATE and UPDATE of claims and
templates (every served resource.k8s.io version, ``matchPolicy: Equivalent``) that carry
the driver's config, and of updates only those that change it, are sent, so every other
claim write goes through while no webhook answers; ``failurePolicy: Fail`` for the
driver's own config. The guide's manifest (docs/examples/fpga-webhook.yaml) is this object
for its driver (a test compares them). :class:`LocalWebhook` creates it with a
``clientConfig.url`` on 127.0.0.1 and runs ``drakit webhook`` for it, which writes its
CA into the configuration; it is ready once ``/readyz`` says the apiserver trusts it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.resources import Resource
from drakit.localcluster import stack
from drakit.localcluster.process import http_ok
from drakit.localcluster.stack import Component
from drakit.webhook.cabundle import VALIDATING_WEBHOOK_CONFIGURATIONS
from drakit.webhook.server import REVIEW_PATH

__all__ = ["REVIEW_PATH", "LocalWebhook", "configs_cel", "webhook_configuration"]


def configs_cel(variable: str) -> str:
    """CEL for the config list of the claim or template in ``variable`` (``object`` or
    ``oldObject``): ``spec.devices.config`` of a claim, ``spec.spec.devices.config`` of a
    template, ``[]`` when absent."""
    return (
        f"(request.resource.resource == 'resourceclaims' ? {variable}.?spec : "
        f"{variable}.?spec.?spec).?devices.?config.orValue([])"
    )


def webhook_configuration(
    name: str, driver: str, client_config: dict[str, Any], *, timeout_seconds: int = 10
) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration ``name`` sending ``driver``'s opaque config to the
    webhook at ``client_config`` (``{"url": ...}`` or ``{"service": ...}``)."""
    carries = f"{configs_cel('object')}.exists(c, c.?opaque.?driver.orValue('') == '{driver}')"
    writes = (
        f"request.operation == 'CREATE' || {configs_cel('object')} != {configs_cel('oldObject')}"
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"opaque-config.{driver}",
                "rules": [
                    {
                        "apiGroups": ["resource.k8s.io"],
                        "apiVersions": ["v1", "v1beta2", "v1beta1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["resourceclaims", "resourceclaimtemplates"],
                        "scope": "Namespaced",
                    }
                ],
                "matchPolicy": "Equivalent",
                "matchConditions": [
                    {"name": "carries-this-drivers-config", "expression": carries},
                    {"name": "writes-the-config", "expression": writes},
                ],
                "clientConfig": client_config,
                "failurePolicy": "Fail",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "timeoutSeconds": timeout_seconds,
            }
        ],
    }


@dataclass
class LocalWebhook:
    """``drakit webhook`` for ``driver`` with ``backend``'s ``config_model``, on a free port
    of 127.0.0.1, and its configuration ``name``; :meth:`start`, then :meth:`stop`."""

    api: Any
    kubeconfig: str
    backend: str
    driver: str
    name: str
    log: Path
    env: dict[str, str] | None = None
    port: int = 0
    process: Component | None = field(default=None, init=False)

    def start(self, timeout: float) -> Component:
        """Create the configuration, start the webhook, and return once it is ready (the
        apiserver has its CA). Raises StartError with the end of its log otherwise."""
        self.port = self.port or stack.allocate_port()
        url = f"https://127.0.0.1:{self.port}{REVIEW_PATH}"
        configurations = Resource(self.api, VALIDATING_WEBHOOK_CONFIGURATIONS)
        configurations.create(webhook_configuration(self.name, self.driver, {"url": url}))
        self.process = Component(
            "webhook",
            stack.drakit_command(
                "webhook",
                f"--backend={self.backend}",
                f"--driver-name={self.driver}",
                f"--webhook-configuration={self.name}",
                "--bind-address=127.0.0.1",
                f"--port={self.port}",
                f"--kubeconfig={self.kubeconfig}",
                "--log-format=text",
            ),
            self.log,
        )
        try:
            self.process.start(env=self.env)
            stack.wait_until(
                self._ready,
                timeout=timeout,
                what=f"drakit webhook ready on 127.0.0.1:{self.port}",
                watch=[self.process],
            )
        except BaseException:
            self.stop()
            raise
        return self.process

    def stop(self) -> None:
        """Stop the webhook and delete its configuration (no claim waits on it then).
        Idempotent."""
        if self.process is not None:
            self.process.terminate()
            self.process = None
        with contextlib.suppress(NotFound):
            Resource(self.api, VALIDATING_WEBHOOK_CONFIGURATIONS).delete(self.name)

    def _ready(self) -> bool:
        try:
            return http_ok(f"https://127.0.0.1:{self.port}/readyz", insecure=True)
        except OSError:  # not listening yet
            return False
