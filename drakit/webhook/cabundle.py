"""Writing the webhook's CA bundle into its ValidatingWebhookConfiguration.

The apiserver trusts the webhook's certificate through ``webhooks[].clientConfig.caBundle``
of the configuration; :class:`BundlePublisher` sets it on every webhook of the one
configuration named by ``--webhook-configuration``. It needs ``get`` and ``patch`` on that
object only (RBAC ``resourceNames``). The write is a JSON patch guarded by a ``test`` of
the resourceVersion, so a webhook added or reordered between read and write is never
patched blind; a lost race is read again.

Each publication reports the configuration's resourceVersion before and after it
(:class:`Publication`): whoever else wrote the configuration in between two looks shows as
a version that moved, which is how :mod:`.rotation` tells for how long the apiserver has had
a CA in the bundle.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from drakit.kubeapi.errors import Conflict, Invalid
from drakit.kubeapi.resources import PatchType, Resource, ResourceType
from drakit.telemetry.logs import get_logger

__all__ = ["VALIDATING_WEBHOOK_CONFIGURATIONS", "BundleError", "BundlePublisher", "Publication"]

logger = get_logger(__name__)

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


@dataclass(frozen=True)
class Publication:
    """One publication: the configuration's resourceVersion as read (``read_version``) and
    as left (``version``; the same unless this publication wrote)."""

    read_version: str
    version: str

    @property
    def wrote(self) -> bool:
        return self.read_version != self.version


class BundlePublisher:
    """Keeps ``caBundle`` of every webhook of one ValidatingWebhookConfiguration equal to a
    given bundle."""

    def __init__(self, resource: Resource, name: str) -> None:
        self.resource = resource
        self.name = name

    def publish(self, bundle: bytes) -> Publication:
        """Make every webhook's caBundle ``bundle`` (PEM).

        Raises the API's error (NotFound, Forbidden, ...) or :class:`BundleError`.
        """
        encoded = base64.b64encode(bundle).decode()
        for attempt in range(ATTEMPTS):
            current = self.resource.get(self.name)
            read = _version(current)
            ops = self._patch(current, encoded)
            if not ops:
                return Publication(read, read)
            try:
                written = self.resource.patch(self.name, ops, patch_type=PatchType.JSON)
            except (Conflict, Invalid):  # the resourceVersion test failed: read again
                if attempt == ATTEMPTS - 1:
                    raise
                continue
            logger.info("Published CA bundle", configuration=self.name, webhooks=len(ops) - 1)
            return Publication(read, _version(written))
        raise AssertionError("not reached: the last attempt returns or raises")

    def owner_reference(self) -> dict[str, Any]:
        """An owner reference to the configuration (its objects go when it goes)."""
        current = self.resource.get(self.name)
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "name": self.name,
            "uid": (current.get("metadata") or {}).get("uid", ""),
        }

    def _patch(self, current: dict[str, Any], encoded: str) -> list[dict[str, Any]]:
        """The JSON patch setting every webhook's caBundle; [] when all already have it."""
        webhooks = current.get("webhooks") or []
        if not isinstance(webhooks, list) or not webhooks:
            raise BundleError(
                f"ValidatingWebhookConfiguration {self.name} has no webhooks to give a CA bundle"
            )
        version = _version(current)
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


def _version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
