"""NodePrepareResources latency of the node plugin, through its real gRPC socket.

A local control plane (etcd + kube-apiserver v1.37.2) holds allocated
ResourceClaims; the plugin runs as its own process (``drakit node-plugin
--backend example``) and the benchmark calls it as the kubelet does, over the
Unix socket with the DRA v1 API. Every timed call does the full work: GET of
the claims from the apiserver, checkpoint writes, CDI spec writes. (After each
timed prepare the claims are unprepared, untimed, so the next prepare is not a
checkpoint hit.) Two cases: 1 claim with 1 device, and a batch of 32 claims.
Also reported: the plugin's idle RSS (VmRSS after start-up, before any call), and
the latency of a call with no claims (the gRPC transport and the servicer's
dispatch, nothing else), which splits the 1-claim difference into the part the
gRPC server costs and the part the prepare costs.

When the kubelet plugin of sigs.k8s.io/dra-example-driver (the Go reference on
the kubeletplugin helper, pinned in hack/tools/dra-example-driver) is built or
can be built, it is measured in the same run with the same client and the
ratio is printed. The two plugins serve side by side (the Go one as driver
``gpu-go.example.com``, each with its own claims) and their calls alternate, the
order swapped every round: measured one after the other, the load drifting on a
shared machine decided the ratio (the 1-claim ratio moved between 0.7x and 1.9x
in four back-to-back runs).

    .venv/bin/python tests/bench/bench_node_prepare.py [--rounds N] [--iterations N]
        [--batch-iterations N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

REPO = Path(__file__).resolve().parents[2]
GO_PACKAGE = "sigs.k8s.io/dra-example-driver/cmd/dra-example-kubeletplugin"

DRIVER = "gpu.example.com"
GO_DRIVER = "gpu-go.example.com"
NODE = "bench-node"
BATCH = 32

from drakit.localcluster import ClusterConfig, LocalCluster  # noqa: E402
from drakit.localcluster.assets import cache_dir  # noqa: E402

GO_PLUGIN = cache_dir() / "dra-example-kubeletplugin"
from drakit.kubeapi.client import load_client  # noqa: E402
from drakit.kubeapi.errors import AlreadyExists  # noqa: E402
from drakit.kubeapi.resources import NAMESPACES, NODES, RESOURCE_CLAIMS, Resource  # noqa: E402
from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1  # noqa: E402
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc  # noqa: E402


@dataclass
class Result:
    """One plugin's samples, one list per round."""

    name: str
    single_ms: list[list[float]]
    batch_ms: list[list[float]]
    idle_rss_mib: float
    empty_ms: list[list[float]]

    def row(self) -> str:
        return (
            f"| {self.name} | {median_of_rounds(self.single_ms, 50):.2f} "
            f"| {median_of_rounds(self.single_ms, 99):.2f} "
            f"| {median_of_rounds(self.batch_ms, 50):.2f} "
            f"| {median_of_rounds(self.batch_ms, 99):.2f} | {self.idle_rss_mib:.1f} |"
        )


def median_of_rounds(rounds: Sequence[Sequence[float]], percentile: int) -> float:
    """The median over the rounds of each round's ``percentile``."""
    return statistics.median(p(samples, percentile) for samples in rounds)


def p(values: Sequence[float], percentile: int) -> float:
    ordered = sorted(values)
    if percentile == 50:
        return statistics.median(ordered)
    index = min(len(ordered) - 1, max(0, round(percentile / 100 * len(ordered)) - 1))
    return ordered[index]


def create_claims(api: Any, namespace: str, count: int, driver: str = DRIVER) -> list[v1.Claim]:
    claims = Resource(api, RESOURCE_CLAIMS)
    out = []
    for i in range(count):
        obj = claims.create(
            {
                "metadata": {"name": f"claim-{i}", "namespace": namespace},
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]
                    }
                },
            }
        )
        obj["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": driver, "pool": NODE, "device": f"gpu-{i}"}
                    ]
                }
            }
        }
        obj = claims.update_status(obj)
        meta = obj["metadata"]
        out.append(v1.Claim(namespace=namespace, uid=meta["uid"], name=meta["name"]))
    return out


def new_namespace(api: Any) -> str:
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    Resource(api, NAMESPACES).create({"metadata": {"name": namespace}})
    return namespace


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_for(path: Path, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            raise RuntimeError(f"plugin exited with {process.returncode} before serving")
        if time.monotonic() > deadline:
            raise RuntimeError(f"plugin did not create {path} in {timeout} s")
        time.sleep(0.05)


class Plugin:
    """One plugin process serving the DRA v1 socket, with the claims allocated for it."""

    def __init__(
        self, name: str, command: list[str], env: dict[str, str], socket: Path, log: Path
    ) -> None:
        self.name = name
        with log.open("wb") as log_file:
            self.process = subprocess.Popen(
                command, env=env, stdout=log_file, stderr=subprocess.STDOUT
            )
        self.socket = socket
        self.claims: list[v1.Claim] = []
        self.single_ms: list[list[float]] = []  # one list per round
        self.batch_ms: list[list[float]] = []
        self.empty_ms: list[list[float]] = []
        self.idle_rss_mib = float("nan")
        self._channel: grpc.Channel | None = None
        self._stub: Any = None

    def serve(self) -> None:
        """Wait for the socket, let start-up work settle, sample the idle RSS, connect."""
        wait_for(self.socket, self.process)
        time.sleep(3)  # start-up work (publishing, informers) settles before sampling RSS
        self.idle_rss_mib = rss_mib(self.process.pid)
        self._channel = grpc.insecure_channel(f"unix:{self.socket}")
        self._stub = v1_grpc.DRAPluginStub(self._channel)

    def cycle(self, count: int) -> float:
        """Prepare ``count`` claims (timed, in ms), then unprepare them (untimed)."""
        batch = self.claims[:count]
        started = time.perf_counter()
        response = self._stub.NodePrepareResources(
            v1.NodePrepareResourcesRequest(claims=batch), timeout=60
        )
        elapsed = (time.perf_counter() - started) * 1000
        errors = {uid: r.error for uid, r in response.claims.items() if r.error}
        if errors or len(response.claims) != len(batch):
            raise RuntimeError(f"{self.name}: prepare failed: {errors}")
        self._stub.NodeUnprepareResources(
            v1.NodeUnprepareResourcesRequest(claims=batch), timeout=60
        )
        return elapsed

    def empty_call(self) -> float:
        """A NodePrepareResources call without claims (timed, in ms): transport only."""
        started = time.perf_counter()
        response = self._stub.NodePrepareResources(
            v1.NodePrepareResourcesRequest(claims=[]), timeout=60
        )
        elapsed = (time.perf_counter() - started) * 1000
        if response.claims:
            raise RuntimeError(f"{self.name}: results for a call without claims")
        return elapsed

    def result(self) -> Result:
        return Result(self.name, self.single_ms, self.batch_ms, self.idle_rss_mib, self.empty_ms)

    def stop(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def measure_interleaved(
    plugins: Sequence[Plugin], rounds: int, iterations: int, batch_iterations: int
) -> None:
    """Time the plugins' cycles alternately, swapping their order every cycle, in ``rounds``.

    On a shared machine the load drifts within seconds; measuring one plugin after the
    other lets that drift decide the ratio. Alternating gives every plugin the same load.
    Every figure is the median over the rounds of that round's percentile: a p99 of a
    single round of 200 calls was its second-slowest call, which one stray stall decided.
    """
    for _ in range(5):  # warm-up: connections, caches
        for plugin in plugins:
            plugin.cycle(1)
            plugin.cycle(BATCH)
    for _ in range(rounds):
        for plugin in plugins:
            plugin.single_ms.append([])
            plugin.empty_ms.append([])
            plugin.batch_ms.append([])
        for i in range(iterations):
            for plugin in in_turn(plugins, i):
                plugin.single_ms[-1].append(plugin.cycle(1))
                plugin.empty_ms[-1].append(plugin.empty_call())
        for i in range(batch_iterations):
            for plugin in in_turn(plugins, i):
                plugin.batch_ms[-1].append(plugin.cycle(BATCH))


def in_turn(plugins: Sequence[Plugin], round_number: int) -> Sequence[Plugin]:
    """The plugins in the order they go in this round: reversed every other round."""
    return plugins if round_number % 2 == 0 else list(reversed(plugins))


def build_go_plugin() -> str | None:
    """Build the Go reference if missing; returns why it is unavailable, or None."""
    if shutil.which("go") is None and not GO_PLUGIN.exists():
        return "the go command is not installed"
    build = subprocess.run(
        [str(REPO / "hack" / "build-binaries.sh"), "dra-example-driver"],
        capture_output=True,
        text=True,
        check=False,
    )
    if build.returncode != 0:
        return f"building {GO_PACKAGE} failed:\n{build.stderr[-2000:]}"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of calls (default 5)")
    parser.add_argument(
        "--iterations", type=int, default=300, help="1-claim calls per plugin and round"
    )
    parser.add_argument(
        "--batch-iterations", type=int, default=20, help="32-claim calls per plugin and round"
    )
    parser.add_argument("--skip-go", action="store_true", help="do not measure the Go reference")
    args = parser.parse_args()

    go_problem = "skipped (--skip-go)" if args.skip_go else build_go_plugin()
    # CDI specs go to a tmpfs, as /var/run/cdi is on a node; plugin state stays on disk.
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with (
        tempfile.TemporaryDirectory(prefix="drk-bench-", dir="/tmp") as tmp,
        tempfile.TemporaryDirectory(prefix="drk-bench-cdi-", dir=shm) as cdi_tmp,
        LocalCluster(ClusterConfig()) as cluster,
    ):
        root, cdi_root = Path(tmp), Path(cdi_tmp)
        api = load_client(cluster.kubeconfig)
        with contextlib.suppress(AlreadyExists):
            Resource(api, NODES).create({"metadata": {"name": NODE}})
        env = {k: v for k, v in os.environ.items() if k not in ("POD_UID",)}
        env["KUBECONFIG"] = cluster.kubeconfig
        # Both plugins get client-side API limits far above what the benchmark sends, so
        # the figures measure the plugins, not their token buckets (drakit defaults to the
        # kubelet's 50/100, the Go example driver to client-go's 5/10).
        env["KUBE_API_QPS"] = "1000"
        env["KUBE_API_BURST"] = "2000"

        py_root = root / "py"
        py_root.mkdir()
        # JSON, as the Helm chart writes it (no PyYAML in the plugin; kubeapi.documents).
        backend_config = root / "example.json"
        backend_config.write_text(json.dumps({"gpus": BATCH}) + "\n")
        plugins: list[Plugin] = []
        try:
            plugins.append(
                Plugin(
                    "drakit (Python)",
                    [
                        str(REPO / ".venv/bin/python"), "-m", "drakit.cli", "node-plugin",
                        "--driver-name", DRIVER, "--node-name", NODE,
                        "--kubeconfig", cluster.kubeconfig,
                        "--kubelet-registrar-dir", str(py_root / "registry"),
                        "--kubelet-plugins-dir", str(py_root / "plugins"),
                        "--cdi-root", str(cdi_root / "py"),
                        "--backend", "example", "--backend-config", str(backend_config),
                    ],
                    env,
                    py_root / "plugins" / DRIVER / "dra.sock",
                    root / "drakit.log",
                )
            )  # fmt: skip
            plugins[0].claims = create_claims(api, new_namespace(api), BATCH, DRIVER)
            if go_problem is None:
                # Its own driver name: both plugins serve and publish side by side.
                go_root = root / "go"
                (go_root / "registry").mkdir(parents=True)
                plugins.append(
                    Plugin(
                        "dra-example-driver v0.4.0 (Go)",
                        [
                            str(GO_PLUGIN), "--node-name", NODE, "--driver-name", GO_DRIVER,
                            "--num-devices", str(BATCH),
                            "--cdi-root", str(cdi_root / "go"),
                            "--kubelet-registrar-directory-path", str(go_root / "registry"),
                            "--kubelet-plugins-directory-path", str(go_root / "plugins"),
                        ],
                        env,
                        go_root / "plugins" / GO_DRIVER / "dra.sock",
                        root / "go.log",
                    )
                )  # fmt: skip
                plugins[1].claims = create_claims(api, new_namespace(api), BATCH, GO_DRIVER)
            for plugin in plugins:
                plugin.serve()
            measure_interleaved(plugins, args.rounds, args.iterations, args.batch_iterations)
        finally:
            for plugin in plugins:
                plugin.stop()
        results = [plugin.result() for plugin in plugins]

    print(
        f"NodePrepareResources through the v1 socket, claim GET against the local apiserver; "
        f"{args.rounds} rounds of {args.iterations} single-claim and {args.batch_iterations} "
        f"{BATCH}-claim calls per plugin, each figure the median of the rounds' percentiles"
    )
    print(
        "| plugin | 1 claim p50 ms | 1 claim p99 ms | 32 claims p50 ms | 32 claims p99 ms "
        "| idle RSS MiB |"
    )
    print("|---|---|---|---|---|---|")
    for result in results:
        print(result.row())
    if len(results) == 2:
        py, go = results
        for percentile in (50, 99):
            per_round = ", ".join(
                f"{p(mine, percentile) / p(theirs, percentile):.2f}x"
                for mine, theirs in zip(py.single_ms, go.single_ms, strict=True)
            )
            print(f"1-claim p{percentile} ratio drakit/Go per round: {per_round}")
        empty_py, empty_go = median_of_rounds(py.empty_ms, 50), median_of_rounds(go.empty_ms, 50)
        print(
            "call without claims (gRPC transport and dispatch only), p50: "
            f"drakit {empty_py:.2f} ms, Go {empty_go:.2f} ms ({empty_py / empty_go:.2f}x)"
        )
        single = median_of_rounds(py.single_ms, 50) / median_of_rounds(go.single_ms, 50)
        batch = median_of_rounds(py.batch_ms, 50) / median_of_rounds(go.batch_ms, 50)
        print(
            "ratio drakit/Go (p50): "
            f"1 claim {single:.2f}x, "
            f"32 claims {batch:.2f}x, "
            f"idle RSS {py.idle_rss_mib / go.idle_rss_mib:.2f}x"
        )
    else:
        print(f"Go reference not measured: {go_problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
