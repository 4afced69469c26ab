"""Finding the control-plane binaries: envtest's rules, then drakit's cache.

Lookup order for each binary (the same as controller-runtime's envtest, so a
developer's existing assets work unchanged):

1. ``TEST_ASSET_<NAME>`` (``TEST_ASSET_KUBE_APISERVER``, ``TEST_ASSET_ETCD``, ...);
2. ``$KUBEBUILDER_ASSETS/<name>``;
3. drakit's build cache, ``$DRAKIT_CACHE_DIR/bin/<kube version>/<name>``
   (default ``~/.cache/drakit``), filled by ``hack/build-binaries.sh``;
4. ``/usr/local/kubebuilder/bin/<name>``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from drakit.version import KUBERNETES_VERSION

CONTROL_PLANE_BINARIES = ("etcd", "kube-apiserver")


class MissingBinaryError(RuntimeError):
    """A control-plane binary was not found and could not be built."""


def cache_dir() -> Path:
    """Folder that holds drakit's built binaries for the pinned Kubernetes version."""
    base = Path(os.environ.get("DRAKIT_CACHE_DIR", Path.home() / ".cache" / "drakit"))
    return base / "bin" / KUBERNETES_VERSION


def _env_name(binary: str) -> str:
    return "TEST_ASSET_" + binary.upper().replace("-", "_")


def candidate_paths(binary: str) -> list[Path]:
    """Every place ``binary`` is looked for, in order of preference."""
    paths: list[Path] = []
    if explicit := os.environ.get(_env_name(binary)):
        paths.append(Path(explicit))
    if assets := os.environ.get("KUBEBUILDER_ASSETS"):
        paths.append(Path(assets) / binary)
    paths.append(cache_dir() / binary)
    paths.append(Path("/usr/local/kubebuilder/bin") / binary)
    return paths


def find_binary(binary: str) -> Path | None:
    """Return the first executable ``binary`` found by the lookup rules, or None."""
    for path in candidate_paths(binary):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def repo_root() -> Path | None:
    """The drakit source tree this package runs from, if any (for hack/ scripts)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "hack" / "build-binaries.sh").is_file() else None


def build_binaries(targets: tuple[str, ...] = ("kube", "etcd")) -> None:
    """Build (or reuse) binaries with ``hack/build-binaries.sh``.

    Raises MissingBinaryError with the script's own explanation when it fails
    (for example when Go is not installed).
    """
    root = repo_root()
    if root is None:
        raise MissingBinaryError(_missing_message(targets))
    proc = subprocess.run(
        [str(root / "hack" / "build-binaries.sh"), *targets],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise MissingBinaryError(proc.stderr.strip() or _missing_message(targets))


def require_binary(binary: str, build_target: str | None = None) -> Path:
    """Find ``binary``, building it from the pinned Go modules when absent."""
    found = find_binary(binary)
    if found is None and build_target is not None:
        build_binaries((build_target,))
        found = find_binary(binary)
    if found is None:
        raise MissingBinaryError(_missing_message((binary,)))
    return found


def _missing_message(names: tuple[str, ...]) -> str:
    looked = ", ".join(str(p) for n in names for p in candidate_paths(n))
    return (
        f"cannot find {' and '.join(names)} (looked in: {looked}). Install Go 1.25+ and run "
        "`hack/build-binaries.sh` (or `make binaries`) to build the pinned Kubernetes binaries, "
        "or set KUBEBUILDER_ASSETS to a folder holding kube-apiserver and etcd "
        "(or TEST_ASSET_KUBE_APISERVER / TEST_ASSET_ETCD to the binaries themselves)."
    )
