"""KubeletPlugin's life cycle on real Unix sockets and files, with an API server that does
not answer: start serves and registers, stop takes everything down again (sockets, threads,
the backend), each once; what cannot work on the node is refused at start, naming why.

Against a real apiserver and the kubelet's own plugin code: tests/integration/plugin/.
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import grpc
import pytest
from helpers.waiting import eventually

from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2 as reg
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from drakit.node_plugin.sockets import SocketPaths, socket_paths
from drakit.plugin import (
    BackendBase,
    BackendConfigError,
    BackendPrepared,
    BackgroundError,
    ClaimRef,
    ClaimToPrepare,
    Device,
    KubeletPlugin,
    PluginOptions,
    PluginStartError,
    PoolDescription,
    RegistrationStatus,
    RequestContext,
)

DRIVER = "npu.example.com"


class SmallBackend(BackendBase):
    """Two devices; remembers being closed."""

    name = "small"

    def __init__(self, *args: Any, fail_discover: bool = False) -> None:
        super().__init__(*args)
        self.fail_discover = fail_discover
        self.closed = 0

    def discover(self) -> tuple[PoolDescription, ...]:
        if self.fail_discover:
            raise OSError("no /dev/npu*")
        devices = (Device(name="npu-0"), Device(name="npu-1"))
        return (PoolDescription(self.context.node_name, devices),)

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        return BackendPrepared(tuple(() for _ in claim.devices))  # type: ignore[misc]

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        pass

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def root() -> Iterator[Path]:
    """A short folder: Unix socket paths are limited to 107 bytes."""
    with tempfile.TemporaryDirectory(prefix="kp-", dir="/tmp") as folder:
        yield Path(folder)


@pytest.fixture
def options(root: Path) -> PluginOptions:
    """Options for a plugin in ``root`` whose API server refuses every connection."""
    kubeconfig = root / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://127.0.0.1:1",
                                              "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )  # fmt: skip
    return PluginOptions(
        DRIVER,
        "node-a",
        kubeconfig=kubeconfig,
        registrar_dir=root / "registry",
        plugins_dir=root / "plugins",
        cdi_root=root / "cdi",
    )


def sockets_of(options: PluginOptions) -> SocketPaths:
    return socket_paths(options.registrar_dir, options.plugin_data_dir, DRIVER, None)


def notify(registration_socket: Path, registered: bool, error: str = "") -> None:
    """What the kubelet's plugin manager says after GetInfo."""
    with grpc.insecure_channel(f"unix:{registration_socket}") as channel:
        reg_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=registered, error=error), timeout=5
        )


def test_start_serves_both_sockets_and_stop_removes_them_ends_every_thread_and_closes_the_backend(
    options: PluginOptions,
) -> None:
    before = set(threading.enumerate())
    backend = SmallBackend(options.backend_context())
    plugin = KubeletPlugin(backend, options)
    assert plugin.start(timeout=0) is False  # serving, but not ready: no API server
    sockets = sockets_of(options)
    assert sockets.registration.is_socket() and sockets.dra.is_socket()
    assert plugin.running and plugin.publish_now()

    assert plugin.stop(timeout=60) is True
    assert not sockets.registration.exists() and not sockets.dra.exists()
    assert backend.closed >= 1
    assert (plugin.running, plugin.wait(timeout=0), plugin.publish_now()) == (False, True, False)
    eventually(lambda: set(threading.enumerate()) <= before, "the plugin's threads to end", 30)


def test_start_and_stop_are_idempotent_and_a_stopped_plugin_does_not_start_again(
    options: PluginOptions,
) -> None:
    plugin = KubeletPlugin(SmallBackend(options.backend_context()), options)
    plugin.start(timeout=0)
    plugin.start(timeout=0)  # only waits
    assert plugin.stop(timeout=60) and plugin.stop(timeout=60)
    with pytest.raises(RuntimeError, match="stopped"):
        plugin.start(timeout=0)


def test_stop_before_start_stops_at_once_and_publish_now_does_nothing(
    options: PluginOptions,
) -> None:
    backend = SmallBackend(options.backend_context())
    plugin = KubeletPlugin(backend, options)
    assert plugin.publish_now() is False
    assert plugin.stop(timeout=10) is True
    assert plugin.wait(timeout=0) is True
    assert not options.plugin_data_dir.exists()  # nothing was started
    with pytest.raises(RuntimeError):
        plugin.start(timeout=0)


def test_stop_without_waiting_returns_at_once_and_wait_sees_the_end(
    options: PluginOptions,
) -> None:
    plugin = KubeletPlugin(SmallBackend(options.backend_context()), options)
    plugin.start(timeout=0)
    plugin.stop(timeout=0)  # what an error handler may call
    assert plugin.wait(timeout=60) is True
    assert not sockets_of(options).registration.exists()


def test_the_context_manager_starts_and_stops(options: PluginOptions) -> None:
    with KubeletPlugin(SmallBackend(options.backend_context()), options) as plugin:
        assert plugin.running
        assert sockets_of(options).dra.is_socket()
    assert plugin.wait(timeout=0)
    assert not sockets_of(options).dra.exists()


def test_the_kubelets_verdict_on_the_registration_is_kept_and_a_refusal_goes_to_the_hook(
    options: PluginOptions,
) -> None:
    heard: list[BackgroundError] = []
    plugin = KubeletPlugin(SmallBackend(options.backend_context()), options, on_error=heard.append)
    plugin.start(timeout=0)
    try:
        assert plugin.registration is None  # the kubelet has not spoken
        notify(sockets_of(options).registration, False, "driver name taken")
        assert plugin.registration == RegistrationStatus(False, "driver name taken")
        (error,) = heard
        assert (error.what, str(error.cause), error.recoverable) == (
            "register with the kubelet",
            "driver name taken",
            True,
        )
        notify(sockets_of(options).registration, True)
        assert plugin.registration == RegistrationStatus(True, "")
        assert len(heard) == 1
    finally:
        plugin.stop(timeout=60)


def test_a_backend_whose_discover_fails_is_refused_at_start_nothing_serves_and_it_is_closed(
    options: PluginOptions,
) -> None:
    backend = SmallBackend(options.backend_context(), fail_discover=True)
    plugin = KubeletPlugin(backend, options)
    with pytest.raises(BackendConfigError, match=r"SmallBackend\.discover\(\) failed: no /dev/npu"):
        plugin.start(timeout=0)
    assert backend.closed == 1
    assert not sockets_of(options).registration.exists()
    assert plugin.wait(timeout=0) and not plugin.running


def test_a_folder_that_cannot_be_made_is_refused_naming_the_option_and_its_variable(
    options: PluginOptions, root: Path
) -> None:
    (root / "file").write_text("")
    bad = PluginOptions(
        DRIVER, "node-a", kubeconfig=options.kubeconfig, registrar_dir=options.registrar_dir,
        plugins_dir=options.plugins_dir, cdi_root=root / "file" / "cdi",
    )  # fmt: skip
    backend = SmallBackend(bad.backend_context())
    with pytest.raises(PluginStartError, match=r"cdi_root \(\$CDI_ROOT\) '.*/file/cdi' is not a"):
        KubeletPlugin(backend, bad).start(timeout=0)
    assert backend.closed == 1


def test_an_unreadable_kubeconfig_is_refused_naming_the_option(root: Path) -> None:
    options = PluginOptions(
        DRIVER, "node-a", kubeconfig=root / "missing", registrar_dir=root / "registry",
        plugins_dir=root / "plugins", cdi_root=root / "cdi",
    )  # fmt: skip
    with pytest.raises(PluginStartError, match=r"kubeconfig \(\$KUBECONFIG\) '.*/missing' is not"):
        KubeletPlugin(SmallBackend(options.backend_context()), options).start(timeout=0)


def test_a_registry_folder_too_deep_for_a_socket_path_is_refused(options: PluginOptions) -> None:
    deep = options.registrar_dir / ("d" * 100)
    bad = PluginOptions(
        DRIVER, "node-a", kubeconfig=options.kubeconfig, registrar_dir=deep,
        plugins_dir=options.plugins_dir, cdi_root=options.cdi_root,
    )  # fmt: skip
    with pytest.raises(PluginStartError, match="socket"):
        KubeletPlugin(SmallBackend(bad.backend_context()), bad).start(timeout=0)
