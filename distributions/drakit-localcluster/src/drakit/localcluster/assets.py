"""Finding the control-plane binaries: envtest's rules, then drakit's cache.

Lookup order for each binary (the same as controller-runtime's envtest, so a
developer's existing assets work unchanged):

1. ``TEST_ASSET_<NAME>`` (``TEST_ASSET_KUBE_APISERVER``, ``TEST_ASSET_ETCD``, ...);
2. ``$KUBEBUILDER_ASSETS/<name>``;
3. drakit's build cache, ``$DRAKIT_CACHE_DIR/bin/<kube version>/<name>``
   (default ``~/.cache/drakit``), filled by ``hack/build-binaries.sh``;
4. ``/usr/local/kubebuilder/bin/<name>``.

The Kubernetes version is the caller's, else ``$DRAKIT_KUBE_VERSION`` (the same
variable hack/build-binaries.sh reads), else the pinned default. Rules 1, 2 and
4 describe the default version only; another version's binaries come from its
cache folder.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from drakit.localcluster.kubeversions import resolve_version
from drakit.version import KUBERNETES_VERSION

CONTROL_PLANE_BINARIES = ("etcd", "kube-apiserver")


class MissingBinaryError(RuntimeError):
    """A control-plane binary was not found and could not be built."""


def selected_version(kube_version: str | None = None) -> str:
    """``kube_version``, else $DRAKIT_KUBE_VERSION, else the pinned default (resolved)."""
    return resolve_version(kube_version or os.environ.get("DRAKIT_KUBE_VERSION"))


def cache_dir(kube_version: str | None = None) -> Path:
    """Folder that holds drakit's built binaries for a Kubernetes version (selected_version)."""
    base = Path(os.environ.get("DRAKIT_CACHE_DIR", Path.home() / ".cache" / "drakit"))
    return base / "bin" / selected_version(kube_version)


def _is_default(kube_version: str | None) -> bool:
    return selected_version(kube_version) == KUBERNETES_VERSION


def _env_name(binary: str) -> str:
    return "TEST_ASSET_" + binary.upper().replace("-", "_")


def candidate_paths(binary: str, kube_version: str | None = None) -> list[Path]:
    """Every place ``binary`` is looked for, in order of preference.

    The envtest variables and /usr/local/kubebuilder describe one (the default)
    version; another version's binaries come from its cache folder only.
    """
    if not _is_default(kube_version):
        return [cache_dir(kube_version) / binary]
    paths: list[Path] = []
    if explicit := os.environ.get(_env_name(binary)):
        paths.append(Path(explicit))
    if assets := os.environ.get("KUBEBUILDER_ASSETS"):
        paths.append(Path(assets) / binary)
    paths.append(cache_dir() / binary)
    paths.append(Path("/usr/local/kubebuilder/bin") / binary)
    return paths


def find_binary(binary: str, kube_version: str | None = None) -> Path | None:
    """Return the first executable ``binary`` found by the lookup rules, or None."""
    for path in candidate_paths(binary, kube_version):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def repo_root() -> Path | None:
    """The drakit source tree this package runs from, if any (for hack/ scripts): the
    nearest folder above this file that holds ``hack/build-binaries.sh``. None for an
    installed wheel."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "hack" / "build-binaries.sh").is_file():
            return folder
    return None


def build_binaries(
    targets: tuple[str, ...] = ("kube", "etcd"), kube_version: str | None = None
) -> None:
    """Build (or reuse) binaries with ``hack/build-binaries.sh`` (for ``kube_version``).

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
        env={**os.environ, "DRAKIT_KUBE_VERSION": selected_version(kube_version)},
    )
    if proc.returncode != 0:
        raise MissingBinaryError(proc.stderr.strip() or _missing_message(targets))


def require_binary(
    binary: str, build_target: str | None = None, *, kube_version: str | None = None
) -> Path:
    """Find ``binary``, building it from the pinned Go modules when absent."""
    found = find_binary(binary, kube_version)
    if found is None and build_target is not None:
        build_binaries((build_target,), kube_version)
        found = find_binary(binary, kube_version)
    if found is None:
        raise MissingBinaryError(_missing_message((binary,), kube_version))
    return found


def _missing_message(names: tuple[str, ...], kube_version: str | None = None) -> str:
    looked = ", ".join(str(p) for n in names for p in candidate_paths(n, kube_version))
    return (
        f"cannot find {' and '.join(names)} (looked in: {looked}). Install Go 1.25+ and run "
        "`hack/build-binaries.sh` (or `make binaries`) to build the pinned Kubernetes binaries, "
        "or set KUBEBUILDER_ASSETS to a folder holding kube-apiserver and etcd "
        "(or TEST_ASSET_KUBE_APISERVER / TEST_ASSET_ETCD to the binaries themselves)."
    )
