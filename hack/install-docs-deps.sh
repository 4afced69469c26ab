#!/usr/bin/env bash
# Installs what `make docs` needs besides the Python docs extra: Debian's `chromium`, for the
# browser check of the built site (tests/site/test_docs_browser.py). Needs root and apt; does
# nothing when it is there. Without it the browser check skips for non-root users and fails
# for root (CI). About 100 MB of packages; a minute or two on a cold machine.
set -euo pipefail
PACKAGES=(chromium)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null; then
  echo "install-docs-deps: missing ${missing[*]}; install them as root with apt-get" >&2
  exit 3
fi
echo "install-docs-deps: installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
