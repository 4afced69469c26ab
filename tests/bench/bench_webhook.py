"""``drakit webhook`` under a slow-client and large-body attack: its memory, and the latency
of legitimate reviews meanwhile (issue 41, finding 1).

Against a real etcd + kube-apiserver (``drakit.localcluster``): the real ``drakit webhook``
process (the test backend of tests/integration/webhook), registered in a
ValidatingWebhookConfiguration with failurePolicy Fail. For ``BENCH_WEBHOOK_SECONDS``
(default 30) it is attacked from other loopback addresses than the legitimate clients:

- ``LARGE`` clients (127.0.0.2 and up) post, one after another, 8 MiB of ``[{},{},...]``
  (about 180 MiB once decoded), 8 MiB of one string with an emoji (64 MiB once decoded),
  the costliest review still decoded (just under the 48 MiB budget), and 8 MiB bodies
  stopped 1 MiB short of their end (they hold the large-body budget until cut);
- ``SLOW`` clients (127.0.1.x, 80 per address) each open a connection and send a byte
  every ``TRICKLE`` seconds: a TLS client hello, a request head, or a body; when cut, they
  connect again.

Meanwhile a legitimate client (127.0.0.1) posts a review on a new TLS connection every
0.1 s, and the apiserver is asked for dry-run claim creations through the webhook. Printed:
the webhook's RSS before, during (highest sample) and after the attack, its peak (VmHWM),
and the latency percentiles and failures of both kinds of legitimate request before and
during the attack.

``BENCH_WEBHOOK_CODE=DIR`` runs the webhook from another checkout's sources (e.g. the code
before this change) for a comparison; the attack is the same.

    .venv/bin/python tests/bench/bench_webhook.py        # or: hack/bench.sh webhook
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import random
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.resources import NAMESPACES, Resource, ResourceType
from drakit.localcluster import ClusterConfig, LocalCluster
from drakit.webhook.cabundle import VALIDATING_WEBHOOK_CONFIGURATIONS
from drakit.webhook.jsonbudget import DECODE_BUDGET, decode_cost

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstats import cpu_seconds

ROOT = Path(__file__).resolve().parents[2]
BACKEND_DIR = ROOT / "tests" / "integration" / "webhook"
DRIVER = "gpu.webhook-test.example.com"
PATH = "/validate-resource-claim-parameters"
SECONDS = float(os.environ.get("BENCH_WEBHOOK_SECONDS", "30"))
LARGE = int(os.environ.get("BENCH_WEBHOOK_LARGE", "4"))
SLOW_ADDRESSES = ("127.0.1.1", "127.0.1.2", "127.0.1.3")
SLOW_PER_ADDRESS = int(os.environ.get("BENCH_WEBHOOK_SLOW", "80"))
TRICKLE = 0.5
CLAIMS = ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)
MiB = 2**20
LOAD_BEFORE: list[str] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mib(pid: int, field_name: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def review(params: Any, uid: str = "u") -> bytes:
    config = {"opaque": {"driver": DRIVER, "parameters": params}}
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "operation": "CREATE",
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
            "object": {"metadata": {"name": "c", "namespace": "n"},
                       "spec": {"devices": {"config": [config]}}},
        },
    }).encode()  # fmt: skip


def costliest_decodable() -> bytes:
    """A valid review whose annotations bring its decoding cost just under the budget."""
    count, last = 100_000, b""
    while True:
        body = json.loads(review({"interval": "Short"}))
        body["request"]["object"]["metadata"]["annotations"] = {
            f"k{i}": f"v{i}" for i in range(count)
        }
        raw = json.dumps(body, separators=(",", ":")).encode()
        if decode_cost(raw) > DECODE_BUDGET:
            return last
        last, count = raw, int(count * 1.05)


def attack_bodies() -> list[tuple[str, bytes, bool]]:
    """(name, body, sent in full) of the large-body attack."""
    small_values = b"[" + b",".join([b"{}"] * (8 * MiB // 3 - 1)) + b"]"
    emoji = b'["' + "\U0001f600".encode() + b"a" * (8 * MiB - 16) + b'"]'
    return [
        ("8 MiB of [{},{},...]", small_values, True),
        ("8 MiB string with an emoji", emoji, True),
        ("costliest decodable review", costliest_decodable(), True),
        ("8 MiB body stopped 1 MiB short", small_values, False),
    ]


@dataclass
class Target:
    """Where the webhook listens, and the TLS context that trusts it."""

    port: int
    context: ssl.SSLContext

    def connection(self, source: str = "127.0.0.1") -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), 15, (source, 0))

    def tls(self, source: str) -> ssl.SSLSocket:
        return self.context.wrap_socket(self.connection(source), server_hostname="127.0.0.1")

    def post(self, body: bytes, source: str = "127.0.0.1") -> tuple[int, bytes]:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.context, timeout=15, source_address=(source, 0)
        )
        try:
            conn.request("POST", PATH, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


@dataclass
class Webhook:
    api: Any
    namespace: str
    port: int = field(default_factory=free_port)
    name: str = field(default_factory=lambda: f"bench-webhook-{uuid.uuid4().hex[:6]}")
    process: subprocess.Popen[bytes] | None = None
    context: ssl.SSLContext | None = None

    def start(self, kubeconfig: str, log: Path) -> None:
        hook = {
            "rules": [{
                "apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["resourceclaims"],
                "scope": "Namespaced",
            }],
            "clientConfig": {"url": f"https://127.0.0.1:{self.port}{PATH}"},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }  # fmt: skip
        Resource(self.api, VALIDATING_WEBHOOK_CONFIGURATIONS).create(
            {"metadata": {"name": self.name}, "webhooks": [{**hook, "name": "bench.example.com"}]}
        )
        code = os.environ.get("BENCH_WEBHOOK_CODE")
        path = [*([code] if code else []), str(BACKEND_DIR), *sys.path]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "drakit", "webhook", "--kubeconfig", kubeconfig,
                 "--backend", "webhook_test_backend:SharingBackend", "--driver-name", DRIVER,
                 "--port", str(self.port), "--webhook-configuration", self.name,
                 "--log-format", "text", "--log-level", "warning"],
                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=code or None,
            )  # fmt: skip

    def wait_ready(self) -> None:
        configs = Resource(self.api, VALIDATING_WEBHOOK_CONFIGURATIONS)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            bundle = configs.get(self.name)["webhooks"][0]["clientConfig"].get("caBundle")
            if bundle:
                self.context = ssl.create_default_context(cadata=base64.b64decode(bundle).decode())
                with contextlib.suppress(OSError):
                    if self.post(review({"interval": "Short"}))[0] == 200 and self.dry_run():
                        return
            time.sleep(0.2)
        raise RuntimeError("the webhook did not become ready")

    @property
    def target(self) -> Target:
        assert self.context is not None
        return Target(self.port, self.context)

    def post(self, body: bytes) -> tuple[int, bytes]:
        return self.target.post(body)

    def dry_run(self) -> bool:
        claim = {"metadata": {"name": "probe"}, "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}],
            "config": [{"requests": ["gpu"],
                        "opaque": {"driver": DRIVER, "parameters": {"interval": "Short"}}}],
        }}}  # fmt: skip
        try:
            Resource(self.api, CLAIMS).create(claim, self.namespace, dry_run=True)
        except ApiError:
            return False
        return True

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=15)
        with contextlib.suppress(ApiError):
            Resource(self.api, VALIDATING_WEBHOOK_CONFIGURATIONS).delete(self.name)


@dataclass
class Timings:
    seconds: list[float] = field(default_factory=list)
    failed: int = 0

    def run(self, call: Callable[[], bool]) -> None:
        start = time.perf_counter()
        try:
            ok = call()
        except OSError:
            ok = False
        if ok:
            self.seconds.append(time.perf_counter() - start)
        else:
            self.failed += 1

    def cells(self) -> str:
        if not self.seconds:
            return f"{'-':>7} {'-':>7} {'-':>7} {0:>5} {self.failed:>6}"
        s = sorted(self.seconds)
        p99 = s[min(len(s) - 1, round(0.99 * (len(s) - 1)))]
        return (
            f"{statistics.median(s) * 1000:>5.0f}ms {p99 * 1000:>5.0f}ms "
            f"{s[-1] * 1000:>5.0f}ms {len(s):>5} {self.failed:>6}"
        )


def legitimate(hook: Webhook, seconds: float) -> tuple[Timings, Timings]:
    """Reviews and dry-run creations for ``seconds``, each kind on a thread of its own."""
    reviews, creates = Timings(), Timings()
    body = review({"interval": "Short"})
    stop = threading.Event()

    def post() -> bool:
        return hook.post(body)[0] == 200

    def loop(timings: Timings, call: Callable[[], bool], every: float) -> None:
        while not stop.wait(every):
            timings.run(call)

    threads = [
        threading.Thread(target=loop, args=(reviews, post, 0.1), daemon=True),
        threading.Thread(target=loop, args=(creates, hook.dry_run, 0.25), daemon=True),
    ]
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join(30)
    return reviews, creates


@dataclass
class Attack:
    target: Target
    stop: threading.Event = field(default_factory=threading.Event)
    answers: dict[str, dict[int, int]] = field(default_factory=dict)
    cut: int = 0
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, what: str, status: int) -> None:
        with self.lock:
            by_status = self.answers.setdefault(what, {})
            by_status[status] = by_status.get(status, 0) + 1

    def large(self, source: str, bodies: list[tuple[str, bytes, bool]]) -> None:
        while not self.stop.is_set():
            for name, body, whole in bodies:
                if self.stop.is_set():
                    return
                try:
                    if whole:
                        self.count(name, self.target.post(body, source)[0])
                    else:
                        self.held_body(source, body)
                        self.count(name, 0)
                except OSError:
                    self.count(name, -1)

    def held_body(self, source: str, body: bytes) -> None:
        with self.target.tls(source) as sock:
            sock.sendall(
                f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
            )
            sock.sendall(body[: len(body) - MiB])
            sock.settimeout(30)
            while sock.recv(65536):
                pass

    def slow(self, source: str, count: int) -> None:
        """Keep ``count`` connections from ``source``, each sent a byte every TRICKLE
        seconds; one that the server cuts or refuses is opened again (one thread for all:
        the attacker must not take the CPU the server would need)."""
        rng = random.Random(source)
        open_: list[tuple[socket.socket, bytes]] = []
        while not self.stop.wait(TRICKLE):
            while len(open_) < count and not self.stop.is_set():
                try:
                    open_.append(self.slow_connection(source, rng.choice(MODES)))
                except OSError:
                    with self.lock:
                        self.refused += 1
                    break  # refused: try again next round
            kept = []
            for sock, data in open_:
                try:
                    sock.sendall(data[:1])
                    kept.append((sock, data[1:]))
                except OSError:
                    sock.close()
                    with self.lock:
                        self.cut += 1
            open_ = kept
        for sock, _ in open_:
            sock.close()

    def slow_connection(self, source: str, mode: str) -> tuple[socket.socket, bytes]:
        """A connection and the bytes it will trickle: a TLS client hello on a raw
        connection, or a request head, or a body after its head."""
        if mode == "handshake":
            return self.target.connection(source), client_hello()
        sock = self.target.tls(source)
        head = (f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: 100000\r\n").encode()  # fmt: skip
        if mode == "body":
            sock.sendall(head + b"\r\n")
            return sock, b"[" + b"0," * 50_000
        return sock, head


MODES = ("handshake", "head", "body")


def client_hello() -> bytes:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    with contextlib.suppress(ssl.SSLWantReadError):
        context.wrap_bio(incoming, outgoing, server_hostname="x").do_handshake()
    return outgoing.read()


@contextlib.contextmanager
def sampling_rss(pid: int) -> Iterator[list[float]]:
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.1):
            with contextlib.suppress(OSError):
                samples.append(rss_mib(pid))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join(5)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--attack"]:
        return attack_process(*argv[1:])
    with LocalCluster(ClusterConfig(build_missing=False)) as cluster:
        api = load_client(cluster.kubeconfig)
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        Resource(api, NAMESPACES).create({"metadata": {"name": namespace}})
        hook = Webhook(api, namespace)
        log = ROOT / "build" / "bench" / "webhook.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        hook.start(cluster.kubeconfig, log)
        try:
            return run(hook, cluster.work_dir)
        finally:
            hook.stop()


def attack_process(role: str, port: str, ca_file: str, seconds: str) -> int:
    """One kind of attack for ``seconds``, from a process of its own (its threads must not
    slow the legitimate client down); prints its counts as JSON."""
    target = Target(int(port), ssl.create_default_context(cafile=ca_file))
    attack = Attack(target)
    if role == "large":
        bodies = attack_bodies()
        threads = [
            threading.Thread(target=attack.large, args=(f"127.0.0.{2 + i}", bodies), daemon=True)
            for i in range(LARGE)
        ]
    else:
        threads = [
            threading.Thread(target=attack.slow, args=(source, SLOW_PER_ADDRESS), daemon=True)
            for source in SLOW_ADDRESSES
        ]
    print("ready", flush=True)
    sys.stdin.readline()  # "go": every attacker starts at once
    for thread in threads:
        thread.start()
    attack.stop.wait(float(seconds))
    attack.stop.set()
    for thread in threads:
        thread.join(40)
    print(json.dumps({"answers": attack.answers, "cut": attack.cut, "refused": attack.refused,
                      "cpu": cpu_seconds(os.getpid())}))  # fmt: skip
    return 0


def run(hook: Webhook, work_dir: Path) -> int:
    hook.wait_ready()
    assert hook.process is not None and hook.context is not None
    pid = hook.process.pid
    ca_file = work_dir / "webhook-ca.pem"
    bundle = Resource(hook.api, VALIDATING_WEBHOOK_CONFIGURATIONS).get(hook.name)
    ca_file.write_bytes(base64.b64decode(bundle["webhooks"][0]["clientConfig"]["caBundle"]))
    LOAD_BEFORE.append(Path("/proc/loadavg").read_text().split()[0])
    quiet = legitimate(hook, 5)
    before = rss_mib(pid)
    attackers = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--attack",
                role,
                str(hook.port),
                str(ca_file),
                str(SECONDS),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for role in ("large", "slow")
    ]
    for attacker in attackers:
        assert attacker.stdout is not None
        attacker.stdout.readline()  # "ready" (the large bodies are made first)
    with sampling_rss(pid) as samples:
        cpu = cpu_seconds(pid)
        for attacker in attackers:
            assert attacker.stdin is not None
            attacker.stdin.write("go\n")
            attacker.stdin.close()
        under_attack = legitimate(hook, SECONDS)
        cpu = (cpu_seconds(pid) - cpu) / SECONDS
        counts = [json.loads(a.stdout.read()) for a in attackers if a.stdout is not None]
        for attacker in attackers:
            attacker.wait(60)
    time.sleep(5)
    rss = (before, max(samples, default=0.0), rss_mib(pid), rss_mib(pid, "VmHWM"))
    report(rss, cpu, quiet, under_attack, counts)
    return 0 if hook.process.poll() is None else 1


def report(
    rss: tuple[float, float, float, float],
    cpu: float,
    quiet: tuple[Timings, Timings],
    attacked: tuple[Timings, Timings],
    counts: list[dict[str, Any]],
) -> None:
    before, during, after, peak = rss
    code = os.environ.get("BENCH_WEBHOOK_CODE", "this checkout")
    print(f"webhook under attack ({code}): {LARGE} large-body clients, "
          f"{len(SLOW_ADDRESSES) * SLOW_PER_ADDRESS} slow clients "
          f"(a byte every {TRICKLE} s), {SECONDS:.0f} s")  # fmt: skip
    print(f"RSS MiB: before {before:.0f}, during (highest) {during:.0f}, after {after:.0f}, "
          f"peak (VmHWM) {peak:.0f}; CPU during the attack {cpu:.2f} cores")  # fmt: skip
    print(f"{'legitimate requests':<40} {'p50':>7} {'p99':>7} {'max':>7} {'ok':>5} {'failed':>6}")
    for label, (reviews, creates) in (("quiet", quiet), ("under attack", attacked)):
        print(f"{'review, new TLS connection, ' + label:<40} {reviews.cells()}")
        print(f"{'apiserver dry-run create, ' + label:<40} {creates.cells()}")
    slow = sum(c["refused"] + c["cut"] for c in counts)
    attackers_cpu = sum(c["cpu"] for c in counts) / SECONDS
    print(f"the attackers' CPU: {attackers_cpu:.2f} cores; machine load average before the "
          f"attack {LOAD_BEFORE[0]}")  # fmt: skip
    print(f"attack: slow connections ended by the server (cut or refused): {slow}; large bodies "
          "(HTTP status: count; 0 held until cut, -1 connection failed):")  # fmt: skip
    for count in counts:
        for name, statuses in count["answers"].items():
            print(f"  {name}: {dict(sorted(statuses.items()))}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
