"""Reading and writing the API objects a driver's tests need: :class:`KubeAPI`.

``drakit_api`` yields one for the session's control plane. Each kind a driver's test touches
is an attribute (``claims``, ``claim_templates``, ``pods``, ``slices``, ``device_classes``,
``nodes``, ``events``, ``namespaces``, ``service_accounts``, ``secrets``,
``webhook_configurations``), and :meth:`KubeAPI.objects` reaches any other. Each is an
:class:`Objects`: get, list, create, replace, patch, delete and wait, with objects as plain
dicts, the JSON the apiserver stores, so a test reads and writes any field, new ones
included. Every refusal is an :class:`APIError` carrying the apiserver's status code,
reason and message.

Bodies are written as Go clients write them (compact JSON): the apiserver keeps a claim's
opaque parameters byte for byte, and a later patch of a claim written otherwise would be
refused as a change of its immutable spec.

A ``KubeAPI`` is also an API client of the interface drakit takes elsewhere
(``param_serialize`` and ``call_api``): pass it to :func:`drakit.testing.allocate` or as
``PluginOptions(api_client=...)``. :attr:`KubeAPI.client` is the ``kubernetes`` package's
``ApiClient`` for the same cluster and identity, for code written against that package.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import yaml

from drakit.kubeapi.errors import ApiError, NotFound
from drakit.kubeapi.lightclient import load_light_client
from drakit.kubeapi.resources import PatchType, Resource, ResourceType
from drakit.testing.waiting import eventually

__all__ = ["APIError", "KubeAPI", "Objects"]

Body = dict[str, Any]
#: ``merge`` (RFC 7386), ``json`` (RFC 6902: a list of operations) or ``strategic``.
PatchKind = Literal["merge", "json", "strategic"]
_PATCH_TYPES = {"merge": PatchType.MERGE, "json": PatchType.JSON, "strategic": PatchType.STRATEGIC}
#: Seconds a wait gives the cluster by default.
WAIT_TIMEOUT = 60.0


class APIError(Exception):
    """The apiserver refused a request, or gave no answer (``code`` 0).

    ``code`` is the HTTP status (403, 404, 409, 422, ...), ``reason`` the Status reason
    (``Forbidden``, ``NotFound``, ``AlreadyExists``, ``Invalid``, ...) and ``message`` the
    apiserver's message, as ``kubectl`` prints it (an admission webhook's denial included).
    """

    def __init__(self, message: str, *, code: int, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.code} {self.reason or 'error'}: {self.message}"


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """drakit's internal API errors as the test kit's one public :class:`APIError`."""
    try:
        yield
    except ApiError as err:
        raise APIError(str(err), code=err.code, reason=err.reason) from err


class Objects:
    """One kind of API object: the verbs a test needs, on plain-dict objects.

    ``namespace`` is required on single-object verbs of a namespaced kind (``create`` takes
    it from the body's ``metadata.namespace`` when not given); on ``list`` and the list
    waits, ``None`` means every namespace. ``dry_run=True`` makes the apiserver authorize,
    validate and admit a write (webhooks and admission policies included) without storing it.
    """

    def __init__(
        self, api: Any, api_version: str, plural: str, kind: str, *, namespaced: bool = True
    ) -> None:
        group, _, version = api_version.rpartition("/")
        rtype = ResourceType(group, version, plural, kind, namespaced)
        self._resource = Resource(api, rtype)

    @property
    def kind(self) -> str:
        return self._resource.rtype.kind

    @property
    def api_version(self) -> str:
        return self._resource.rtype.api_version

    def get(self, name: str, namespace: str | None = None) -> Body:
        """The object; APIError (404, NotFound) when there is none."""
        with _translated():
            return dict(self._resource.get(name, namespace))

    def find(self, name: str, namespace: str | None = None) -> Body | None:
        """The object, or None when there is none."""
        try:
            return self.get(name, namespace)
        except APIError as err:
            if err.code == 404:
                return None
            raise

    def list(
        self, namespace: str | None = None, *, labels: str | None = None, fields: str | None = None
    ) -> builtins.list[Body]:
        """The objects matching the label and field selectors (``"app=x"``,
        ``"spec.nodeName=n1"``), in the apiserver's order."""
        with _translated():
            listed = self._resource.list(namespace, label_selector=labels, field_selector=fields)
        return [dict(item) for item in listed.items]

    def create(self, body: Body, namespace: str | None = None, *, dry_run: bool = False) -> Body:
        """Create ``body`` (``apiVersion`` and ``kind`` are filled in); the stored object."""
        with _translated():
            return dict(self._resource.create(body, namespace, dry_run=dry_run))

    def replace(self, body: Body, *, status: bool = False, dry_run: bool = False) -> Body:
        """Replace the object ``body`` names (PUT; a stale ``metadata.resourceVersion`` is a
        409 Conflict); ``status=True`` replaces its status (the ``status`` subresource)."""
        with _translated():
            return dict(
                self._resource.update(
                    body, subresource="status" if status else None, dry_run=dry_run
                )
            )

    def patch(
        self,
        name: str,
        patch: Body | builtins.list[Body],
        namespace: str | None = None,
        *,
        kind: PatchKind = "merge",
        status: bool = False,
        dry_run: bool = False,
    ) -> Body:
        """Patch the object: ``kind="merge"`` takes an object, ``"json"`` a list of
        operations (``test`` operations are preconditions), ``"strategic"`` an object
        merged by the kind's merge keys; ``status=True`` patches its status."""
        with _translated():
            return dict(
                self._resource.patch(
                    name,
                    patch,
                    namespace,
                    patch_type=_PATCH_TYPES[kind],
                    subresource="status" if status else None,
                    dry_run=dry_run,
                )
            )

    def delete(
        self,
        name: str,
        namespace: str | None = None,
        *,
        missing_ok: bool = False,
        dry_run: bool = False,
    ) -> None:
        """Delete the object (it may stay a while with its finalizers: see
        :meth:`wait_deleted`). A missing object is a 404 APIError unless ``missing_ok``."""
        try:
            self._resource.delete(name, namespace, dry_run=dry_run)
        except NotFound:
            if not missing_ok:
                raise APIError(
                    f"{self.kind} {_where(name, namespace)} not found", code=404, reason="NotFound"
                ) from None
        except ApiError as err:
            raise APIError(str(err), code=err.code, reason=err.reason) from err

    def wait(
        self,
        name: str,
        namespace: str | None = None,
        *,
        until: Callable[[Body], Any] | None = None,
        timeout: float = WAIT_TIMEOUT,
        what: str = "",
    ) -> Any:
        """Read the object until ``until(object)`` is truthy and return that value (without
        ``until``: until the object exists, and return it). Fails the test, naming ``what``
        and the object's last state, after ``timeout`` seconds."""
        check = until or (lambda obj: obj)
        last: list[Body | None] = [None]

        def ready() -> Any:
            last[0] = self.find(name, namespace)
            return None if last[0] is None else check(last[0])

        description = what or f"{self.kind} {_where(name, namespace)}"
        return eventually(
            ready, what=lambda: f"{description}; last seen: {_brief(last[0])}", timeout=timeout
        )

    def wait_deleted(
        self, name: str, namespace: str | None = None, *, timeout: float = WAIT_TIMEOUT
    ) -> None:
        """Until the object is gone (its finalizers done)."""
        eventually(
            lambda: self.find(name, namespace) is None,
            what=f"{self.kind} {_where(name, namespace)} deleted",
            timeout=timeout,
        )

    def wait_list(
        self,
        namespace: str | None = None,
        *,
        labels: str | None = None,
        fields: str | None = None,
        until: Callable[[builtins.list[Body]], Any] | None = None,
        timeout: float = WAIT_TIMEOUT,
        what: str = "",
    ) -> Any:
        """List until ``until(objects)`` is truthy and return that value (without ``until``:
        until the list is not empty, and return it)."""
        check = until or (lambda items: items)
        return eventually(
            lambda: check(self.list(namespace, labels=labels, fields=fields)),
            what=what or f"{self.kind} objects ({labels or ''} {fields or ''})".strip(),
            timeout=timeout,
        )


class KubeAPI:
    """A cluster's API, as the user of ``kubeconfig`` (a file path); :meth:`close` when done.

    The kinds a driver's tests touch are attributes (:class:`Objects`); :meth:`objects`
    reaches any other. :meth:`token` and :meth:`as_token` act as a ServiceAccount, the way a
    chart's RBAC is tested; :meth:`write_kubeconfig` gives a program (``drakit webhook``, a
    node plugin) a kubeconfig of its own.
    """

    #: The kubeconfig file it was made from.
    kubeconfig: Path
    claims: Objects
    claim_templates: Objects
    slices: Objects
    device_classes: Objects
    pods: Objects
    nodes: Objects
    namespaces: Objects
    service_accounts: Objects
    secrets: Objects
    #: events.k8s.io/v1 Events (what ``kubectl events`` shows).
    events: Objects
    #: ValidatingWebhookConfigurations.
    webhook_configurations: Objects

    def __init__(self, kubeconfig: str | Path) -> None:
        self.kubeconfig = Path(kubeconfig)
        self._light = load_light_client(str(self.kubeconfig), qps=0, user_agent="drakit-testing")
        self._owned: builtins.list[KubeAPI] = []
        self._folder: Path | None = None
        self._client: Any = None
        #: How ``Resource`` decodes this client's answers (the light client's decoder).
        self.json_loads: Callable[[bytes], Any] = getattr(self._light, "json_loads", json.loads)
        self.claims = self.objects("resource.k8s.io/v1", "resourceclaims", "ResourceClaim")
        self.claim_templates = self.objects(
            "resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate"
        )
        self.slices = self.objects(
            "resource.k8s.io/v1", "resourceslices", "ResourceSlice", namespaced=False
        )
        self.device_classes = self.objects(
            "resource.k8s.io/v1", "deviceclasses", "DeviceClass", namespaced=False
        )
        self.pods = self.objects("v1", "pods", "Pod")
        self.nodes = self.objects("v1", "nodes", "Node", namespaced=False)
        self.namespaces = self.objects("v1", "namespaces", "Namespace", namespaced=False)
        self.service_accounts = self.objects("v1", "serviceaccounts", "ServiceAccount")
        self.secrets = self.objects("v1", "secrets", "Secret")
        self.events = self.objects("events.k8s.io/v1", "events", "Event")
        self.webhook_configurations = self.objects(
            "admissionregistration.k8s.io/v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            namespaced=False,
        )

    def objects(
        self, api_version: str, plural: str, kind: str, *, namespaced: bool = True
    ) -> Objects:
        """Any kind: ``objects("rbac.authorization.k8s.io/v1", "clusterroles",
        "ClusterRole", namespaced=False)``; other versions of a kind too
        (``objects("resource.k8s.io/v1beta1", "resourceclaims", "ResourceClaim")``)."""
        return Objects(self, api_version, plural, kind, namespaced=namespaced)

    # -- the devices a driver published -------------------------------------------------------

    def published_devices(self, driver: str, node: str | None = None) -> dict[str, Body]:
        """The devices ``driver`` publishes in its ResourceSlices (of ``node``'s pools, or
        of every node), by name: each as the slice lists it (``attributes``, ``capacity``,
        ``consumesCounters``, ...)."""
        fields = f"spec.driver={driver}" + (f",spec.nodeName={node}" if node else "")
        return {
            device["name"]: device
            for piece in self.slices.list(fields=fields)
            for device in piece["spec"].get("devices") or ()
        }

    # -- identities -------------------------------------------------------------------------------

    def token(
        self,
        service_account: str,
        namespace: str,
        *,
        bound_to_pod: Body | None = None,
        seconds: int = 3600,
    ) -> str:
        """A token of the ServiceAccount (a TokenRequest, as the kubelet mounts them); bound
        to ``bound_to_pod`` (a stored Pod) when given, as a pod's projected token is."""
        spec: Body = {"audiences": [], "expirationSeconds": seconds}
        if bound_to_pod is not None:
            meta = bound_to_pod["metadata"]
            spec["boundObjectRef"] = {
                "apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]
            }  # fmt: skip
        resource = Resource(self, ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True))
        with _translated():
            answer = resource.create_subresource(
                service_account, "token", {"spec": spec}, namespace
            )
        return str(answer["status"]["token"])

    def write_kubeconfig(self, path: str | Path, *, token: str | None = None) -> Path:
        """A kubeconfig for this cluster at ``path`` (mode 0600): this one's user, or the
        bearer ``token`` as the only credential. Returns ``path``."""
        config = yaml.safe_load(self.kubeconfig.read_text())
        if token is not None:
            config["users"] = [{"name": "token", "user": {"token": token}}]
            for context in config["contexts"]:
                context["context"]["user"] = "token"
        dest = Path(path)
        dest.touch(mode=0o600)
        dest.chmod(0o600)
        dest.write_text(json.dumps(config))
        return dest

    def as_token(self, token: str) -> KubeAPI:
        """This cluster as the bearer of ``token`` (see :meth:`token`); closed with this one."""
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="drakit-testing-"))
        path = self.write_kubeconfig(self._folder / f"kubeconfig-{len(self._owned)}", token=token)
        other = KubeAPI(path)
        self._owned.append(other)
        return other

    @property
    def client(self) -> Any:
        """The ``kubernetes`` package's ``ApiClient`` for this cluster and user (no rate
        limit), for code written against that package; made on first use."""
        if self._client is None:
            from drakit.kubeapi.client import load_client  # noqa: PLC0415 (imports kubernetes)

            self._client = load_client(str(self.kubeconfig), qps=0)
        return self._client

    # -- the API client interface ``Resource`` and ``PluginOptions.api_client`` take ------------

    def param_serialize(self, *args: Any, **kwargs: Any) -> Any:
        """A request's method, URL, headers and encoded body (as the kubernetes client's)."""
        return self._light.param_serialize(*args, **kwargs)

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        """Send a request ``param_serialize`` made; the open answer (as the kubernetes client's)."""
        return self._light.call_api(*args, **kwargs)

    def close(self) -> None:
        """Close the connections, this one's and those of :meth:`as_token`'s clients."""
        for other in self._owned:
            other.close()
        self._owned.clear()
        if self._client is not None:
            self._client.close()
            self._client = None
        close = getattr(self._light, "close", None)
        if close is not None:
            close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def __enter__(self) -> KubeAPI:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _where(name: str, namespace: str | None) -> str:
    return f"{namespace}/{name}" if namespace else name


def _brief(obj: Body | None) -> str:
    """An object's state in a failure message: its status (or the whole object), clipped."""
    if obj is None:
        return "none"
    text = json.dumps(obj.get("status", obj), sort_keys=True)
    return text if len(text) <= 1500 else text[:1500] + "..."
