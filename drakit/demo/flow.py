"""``make demo``: drakit on a local control plane, told for a person.

Today it brings up the control plane (etcd + kube-apiserver v1.37.2 with the
DRA APIs), says what runs and where, and waits for Ctrl-C, then tears
everything down. Set ``DEMO_HOLD_SECONDS`` to stop by itself after that long.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from drakit.localcluster import LocalCluster, MissingBinaryError, StartError


def main() -> int:
    print("drakit demo: starting a local Kubernetes control plane (etcd + kube-apiserver)...")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        cluster = LocalCluster()
        cluster.start()
    except (StartError, MissingBinaryError) as err:
        print(f"drakit demo: {err}", file=sys.stderr)
        return 1
    try:
        print(f"  kube-apiserver  {cluster.server}")
        print(f"  kubeconfig      {cluster.kubeconfig}")
        print(f"  logs            {cluster.work_dir / 'logs'}")
        print(f"  feature gates   {cluster.feature_gates}")
        print("Try, in another shell:")
        print(f"  KUBECONFIG={cluster.kubeconfig} kubectl get resourceslices")
        hold = os.environ.get("DEMO_HOLD_SECONDS")
        print("Press Ctrl-C to stop and clean up." if hold is None else f"Stopping in {hold}s.")
        stop.wait(float(hold) if hold is not None else None)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
        print("drakit demo: control plane stopped, temporary files removed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
