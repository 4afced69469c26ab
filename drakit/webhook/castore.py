"""Where the webhook's CA state lives: a Secret shared by every replica, or this process.

:class:`SecretStore` keeps the :class:`~drakit.webhook.castate.CAState` in one Secret of the
webhook's namespace (``--ca-secret NAMESPACE/NAME``), so a restarted replica serves the same
certificate as before and several replicas serve the same one. Every write is optimistic: a
create that finds the Secret made by another replica (AlreadyExists), or a replace whose
resourceVersion is stale (Conflict), is raised for the caller to read again; nobody
overwrites a state they have not read. RBAC: ``get`` and ``update`` on that Secret
(``resourceNames``) and ``create`` on Secrets of the namespace, which the chart's admission
policy narrows to this one name.

The Secret is created owned by the ValidatingWebhookConfiguration (an owner reference), so
deleting the configuration (``helm uninstall``) lets the garbage collector delete the keys.

:class:`MemoryStore` is the same contract in memory: for one replica without a Secret
(a restart makes a new CA).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from drakit.kubeapi.errors import AlreadyExists, Conflict, NotFound
from drakit.kubeapi.resources import Resource, ResourceType
from drakit.webhook.castate import CAState, StateError, decode, encode, rotate_request

__all__ = ["SECRETS", "MemoryStore", "SecretStore", "Store", "Stored"]

SECRETS = ResourceType("", "v1", "secrets", "Secret", namespaced=True)
#: Label on the Secret naming the configuration it serves (for people listing Secrets).
CONFIGURATION_LABEL = "webhook.drakit.dev/configuration"


@dataclass(frozen=True)
class Stored:
    """What the store holds: the state (None when its content is unusable, with ``problem``
    saying why), the version to replace it at, and the user's rotation request."""

    state: CAState | None
    version: str
    rotate_request: str = ""
    problem: str = ""


class Store(Protocol):
    """The CA state, read and written optimistically."""

    def load(self) -> Stored | None:
        """The stored state; None when there is none."""

    def create(self, state: CAState) -> Stored:
        """Store ``state`` where there was none; AlreadyExists if someone was first."""

    def replace(self, state: CAState, version: str) -> Stored:
        """Store ``state`` over ``version``; Conflict if it changed since."""


class MemoryStore:
    """A :class:`Store` in this process (one replica, no Secret)."""

    def __init__(self) -> None:
        self._stored: Stored | None = None
        self._version = 0

    def load(self) -> Stored | None:
        return self._stored

    def create(self, state: CAState) -> Stored:
        if self._stored is not None:
            raise AlreadyExists("the CA state exists")
        return self._put(state)

    def replace(self, state: CAState, version: str) -> Stored:
        if self._stored is None or self._stored.version != version:
            raise Conflict("the CA state changed")
        return self._put(state)

    def _put(self, state: CAState) -> Stored:
        self._version += 1
        self._stored = Stored(state, str(self._version))
        return self._stored


class SecretStore:
    """A :class:`Store` in the Secret ``namespace/name``."""

    def __init__(
        self,
        secrets: Resource,
        namespace: str,
        name: str,
        *,
        configuration: str,
        owner: Callable[[], dict[str, Any] | None] = lambda: None,
    ) -> None:
        self.secrets = secrets
        self.namespace = namespace
        self.name = name
        self.configuration = configuration
        self._owner = owner
        #: The Secret as last read or written: a replace keeps its metadata.
        self._object: dict[str, Any] = {}

    def load(self) -> Stored | None:
        try:
            self._object = dict(self.secrets.get(self.name, self.namespace))
        except NotFound:
            return None
        return self._stored(self._object)

    def create(self, state: CAState) -> Stored:
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "labels": {CONFIGURATION_LABEL: self.configuration},
        }
        owner = self._owner()
        if owner is not None:
            metadata["ownerReferences"] = [owner]
        created = self.secrets.create(encode(state, {"metadata": metadata}), self.namespace)
        self._object = dict(created)
        return self._stored(self._object)

    def replace(self, state: CAState, version: str) -> Stored:
        body = encode(state, self._object)
        body["metadata"] = {**body["metadata"], "resourceVersion": version}
        written = self.secrets.update(body)
        self._object = dict(written)
        return self._stored(self._object)

    def _stored(self, secret: dict[str, Any]) -> Stored:
        version = str((secret.get("metadata") or {}).get("resourceVersion", ""))
        request = rotate_request(secret)
        try:
            return Stored(decode(secret), version, request)
        except StateError as exc:
            return Stored(None, version, request, problem=str(exc))
