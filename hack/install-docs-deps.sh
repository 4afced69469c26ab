#!/usr/bin/env bash
# Installs what `make docs` needs besides the Python docs extra: Debian's `chromium`, for the
# browser check of the built site (tests/site/test_docs_browser.py). Needs root and apt; does
# nothing when it is there. Without it the browser check skips for non-root users and fails
# for root (CI). About 100 MB of packages; a minute or two on a cold machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian-packages.sh"
ensure_debian_packages install-docs-deps chromium
