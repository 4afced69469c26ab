# shellcheck shell=bash
# Sourced by the hack/install-*-deps.sh scripts.
#
# ensure_debian_packages WHO PACKAGE...: installs the packages dpkg does not list as
# installed, with apt-get, quietly and without recommends. Does nothing (and needs nothing)
# when all are there; otherwise needs root and apt-get, and without them names the missing
# packages on stderr and exits 3, so the caller's user knows what to install.
ensure_debian_packages() {
  local who="$1"; shift
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "$who: missing ${missing[*]}; install them as root with apt-get" >&2
    exit 3
  fi
  echo "$who: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
