#!/usr/bin/env bash
# Rewrites tests/unit/packaging/public_api.txt, the snapshot of drakit's public Python API
# (drakit.plugin's __all__: names, signatures, dataclass and model fields) that
# tests/unit/packaging/test_public_api.py compares with the code.
#
#   hack/update-api-snapshot.sh
#
# Run it when a change of the public API is deliberate, review the diff (git diff), and
# record the change in CHANGELOG.md (docs/versioning.md says what a change may be in which
# release).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
cd "$ROOT"
exec "$PYTHON" tests/unit/packaging/api_snapshot.py --write
