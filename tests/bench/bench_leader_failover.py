"""Leader failover time with kubeapi's Lease election at the default timings (15/10/2 s).

Two candidates on a local control plane. "crash": the leader stops renewing without releasing
the Lease (as if killed); "clean": the leader stops and releases it. Reports the time from the
leader going away until the standby's on_started_leading runs.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

from drakit.kubeapi.client import load_client
from drakit.kubeapi.leaderelection import LeaderElectionConfig, LeaderElector
from drakit.localcluster import ClusterConfig, LocalCluster

TRIALS = 4


def failover(api: object, lease: str, *, release: bool, settle: float) -> float:
    started: dict[str, float] = {}

    def candidate(identity: str, *, release_on_stop: bool) -> LeaderElector:
        def lead(stop: threading.Event) -> None:
            started[identity] = time.monotonic()
            stop.wait()

        config = LeaderElectionConfig(lease, "default", identity, release_on_stop=release_on_stop)
        return LeaderElector(api, config, on_started_leading=lead)

    leader = candidate("leader", release_on_stop=release)
    standby = candidate("standby", release_on_stop=True)
    leader.start()
    while "leader" not in started:
        time.sleep(0.01)
    standby.start()
    time.sleep(settle)  # vary where in the renew cycle the leader goes away
    gone = time.monotonic()
    leader.stop()
    while "standby" not in started:
        time.sleep(0.01)
    standby.stop()
    return started["standby"] - gone


def main() -> int:
    with LocalCluster(ClusterConfig(build_missing=False)) as cluster:
        api = load_client(cluster.kubeconfig)
        results: dict[str, list[float]] = {"crash": [], "clean": []}
        for trial in range(TRIALS):
            settle = 3.0 + trial * 0.7
            results["crash"].append(failover(api, f"crash-{trial}", release=False, settle=settle))
            results["clean"].append(failover(api, f"clean-{trial}", release=True, settle=settle))
    for kind, samples in results.items():
        print(
            f"leader failover ({kind}, lease 15 s / renew 10 s / retry 2 s): "
            f"median {statistics.median(samples):.2f}s, min {min(samples):.2f}s, "
            f"max {max(samples):.2f}s over {TRIALS} runs"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
