"""Choosing a backend: ``--backend example|hostdev|module:Class`` and ``--backend-config``;
and checking a backend object before the plugin runs it (also one an embedding program made)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from drakit.allocator.model import Device
from drakit.kubeapi.documents import DocumentError, parse_document, parse_json
from drakit.node_plugin.publisher.layout import InvalidPoolError, check_pool
from drakit.plugin.backend import Backend, PoolDescription
from drakit.plugin.context import BackendContext
from drakit.plugin.errors import BackendConfigError

BUILTIN_BACKENDS = {
    "example": "drakit.backends.example:ExampleBackend",
    "hostdev": "drakit.backends.hostdev:HostDevBackend",
}


def read_backend_config(path: Path | None) -> dict[str, Any]:
    """Parse a YAML or JSON backend config file (JSON is YAML); {} without a file."""
    if path is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BackendConfigError(f"--backend-config {path}: cannot read: {exc.strerror}") from exc
    try:
        data = parse_document(text) if path.suffix != ".json" else parse_json(text)
    except DocumentError as exc:
        raise BackendConfigError(f"--backend-config {path}: not valid YAML/JSON: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BackendConfigError(
            f"--backend-config {path}: top level must be a mapping, got {type(data).__name__}"
        )
    return data


def resolve_backend_class(spec: str) -> type[Any]:
    """The class named by ``spec`` (a built-in name or ``module:Class``)."""
    target = BUILTIN_BACKENDS.get(spec, spec)
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise BackendConfigError(
            f"--backend {spec!r}: not a built-in backend ({', '.join(sorted(BUILTIN_BACKENDS))}) "
            "and not of the form module:Class"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendConfigError(
            f"--backend {spec!r}: cannot import {module_name!r}: {exc}"
        ) from exc
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        raise BackendConfigError(f"--backend {spec!r}: {module_name!r} has no class {attr!r}")
    return cls


def load_backend(
    spec: str,
    *,
    driver_name: str,
    node_name: str,
    config_path: Path | None = None,
    config: Mapping[str, Any] | None = None,
) -> Backend:
    """Construct the backend ``spec`` with its config; BackendConfigError on any problem."""
    cls = resolve_backend_class(spec)
    settings = dict(config) if config is not None else read_backend_config(config_path)
    context = BackendContext(driver_name, node_name, settings, config_path)
    try:
        backend = cls(context)
    except BackendConfigError:
        raise
    except Exception as exc:
        raise BackendConfigError(
            f"--backend {spec!r}: {cls.__name__}(context) failed: {exc}"
        ) from exc
    check_backend(f"--backend {spec!r}", backend)
    return cast(Backend, backend)


def check_backend(where: str, backend: object) -> None:
    """Refuse a backend object the plugin cannot run: a missing part of :class:`Backend`,
    ``prepare``/``unprepare`` that cannot take the core's arguments, a ``discover`` that
    fails or describes its devices wrongly. BackendConfigError starting with ``where``
    (``--backend 'example'``, or how an embedding program's backend is named) names the
    part and the reason."""
    cls = type(backend)
    missing = [
        name
        for name in ("discover", "subscribe", "prepare", "unprepare", "close")
        if not callable(getattr(backend, name, None))
    ] + [name for name in ("name", "config_model") if not _has_attribute(backend, name)]
    if missing:
        raise BackendConfigError(
            f"{where}: {cls.__name__} does not implement Backend (missing: {', '.join(missing)})"
        )
    check_call_signatures(where, backend)
    check_discovery(where, cast(Backend, backend))


_ABSENT = object()


def _has_attribute(backend: object, name: str) -> bool:
    """``hasattr`` that does not run descriptors: reading ``config_model`` would import
    a lazily loaded model (:class:`~drakit.plugin.LazyConfigModel`)."""
    return inspect.getattr_static(backend, name, _ABSENT) is not _ABSENT


# How the core calls a backend, as (method, positional arguments).
_CALLS = (
    ("prepare", ("claim", "context")),
    ("unprepare", ("claim", "state", "context")),
)


def check_call_signatures(where: str, backend: object) -> None:
    """Refuse at start-up a backend whose ``prepare``/``unprepare`` cannot take the
    arguments the core passes (e.g. one written for ``prepare(claim)`` or
    ``unprepare(claim_uid, state)``), instead of failing every claim later."""
    for method, arguments in _CALLS:
        if not _accepts(getattr(backend, method), arguments):
            raise BackendConfigError(
                f"{where}: {type(backend).__name__}.{method} must accept "
                f"({', '.join(arguments)}); see drakit.plugin.Backend"
            )


def _accepts(function: Any, arguments: tuple[str, ...]) -> bool:
    """True when ``function`` can be called with ``len(arguments)`` positional arguments."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return True  # nothing to inspect (a builtin, an extension): the call will tell
    try:
        signature.bind(*arguments)
    except TypeError:
        return False
    return True


def check_discovery(where: str, backend: Backend) -> None:
    """Call ``discover()`` once at start-up and check what it returns, so a mistake is one
    clear error naming backend, pool and device instead of a publisher failing later."""
    where = f"{where}: {type(backend).__name__}.discover()"
    try:
        pools = backend.discover()
    except Exception as exc:
        raise BackendConfigError(f"{where} failed: {exc}") from exc
    if not isinstance(pools, tuple | list):
        raise BackendConfigError(f"{where} returned {type(pools).__name__}, not a tuple of pools")
    seen: set[str] = set()
    for index, pool in enumerate(pools):
        if not isinstance(pool, PoolDescription):
            raise BackendConfigError(
                f"{where}[{index}] is {type(pool).__name__}, not a PoolDescription"
            )
        if not pool.name or pool.name in seen:
            raise BackendConfigError(
                f"{where}[{index}]: pool name {pool.name!r} is empty or repeated"
            )
        seen.add(pool.name)
        for d_index, device in enumerate(pool.devices):
            if not isinstance(device, Device):
                raise BackendConfigError(
                    f"{where}: pool {pool.name!r}: devices[{d_index}] is "
                    f"{type(device).__name__}, not drakit.plugin.Device"
                )
        try:
            check_pool(pool.name, pool.devices, pool.shared_counters)
        except InvalidPoolError as exc:
            raise BackendConfigError(f"{where}: {exc}") from exc
