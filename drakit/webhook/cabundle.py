"""Writing the webhook's CA bundle into its ValidatingWebhookConfiguration.

The apiserver trusts the webhook's certificate through ``webhooks[].clientConfig.caBundle``
of the configuration; :class:`BundlePublisher` sets it on every webhook of the one
configuration named by ``--webhook-configuration``. It needs ``get`` and ``patch`` on that
object only (RBAC ``resourceNames``). The write is a JSON patch guarded by a ``test`` of
the resourceVersion, so a webhook added or reordered between read and write is never
patched blind; a lost race is read again.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from drakit.kubeapi.errors import Conflict, Invalid
from drakit.kubeapi.resources import PatchType, Resource, ResourceType

__all__ = ["VALIDATING_WEBHOOK_CONFIGURATIONS", "BundleError", "BundlePublisher"]

logger = logging.getLogger(__name__)

VALIDATING_WEBHOOK_CONFIGURATIONS = ResourceType(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
#: Read-and-patch attempts when another writer changes the object in between.
ATTEMPTS = 5


class BundleError(RuntimeError):
    """The configuration cannot take the bundle (no webhooks); the message says which."""


class BundlePublisher:
    """Keeps ``caBundle`` of every webhook of one ValidatingWebhookConfiguration equal to a
    given bundle."""

    def __init__(self, resource: Resource, name: str) -> None:
        self.resource = resource
        self.name = name

    def publish(self, bundle: bytes) -> bool:
        """Make every webhook's caBundle ``bundle`` (PEM); True when a write was needed.

        Raises the API's error (NotFound, Forbidden, ...) or :class:`BundleError`.
        """
        encoded = base64.b64encode(bundle).decode()
        for attempt in range(ATTEMPTS):
            current = self.resource.get(self.name)
            ops = self._patch(current, encoded)
            if not ops:
                return False
            try:
                self.resource.patch(self.name, ops, patch_type=PatchType.JSON)
            except (Conflict, Invalid):  # the resourceVersion test failed: read again
                if attempt == ATTEMPTS - 1:
                    raise
                continue
            logger.info(
                "Published CA bundle",
                extra={"configuration": self.name, "webhooks": len(ops) - 1},
            )
            return True
        return False  # not reached: the last attempt returns or raises

    def _patch(self, current: dict[str, Any], encoded: str) -> list[dict[str, Any]]:
        """The JSON patch setting every webhook's caBundle; [] when all already have it."""
        webhooks = current.get("webhooks") or []
        if not isinstance(webhooks, list) or not webhooks:
            raise BundleError(
                f"ValidatingWebhookConfiguration {self.name} has no webhooks to give a CA bundle"
            )
        version = (current.get("metadata") or {}).get("resourceVersion", "")
        ops: list[dict[str, Any]] = [
            {
                "op": "add",
                "path": f"/webhooks/{index}/clientConfig/caBundle",
                "value": encoded,
            }
            for index, hook in enumerate(webhooks)
            if ((hook or {}).get("clientConfig") or {}).get("caBundle") != encoded
        ]
        if not ops:
            return []
        return [{"op": "test", "path": "/metadata/resourceVersion", "value": version}, *ops]
