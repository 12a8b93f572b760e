#!/usr/bin/env bash
# get-haproxy.sh [DIR] - makes DIR/haproxy-2.6/haproxy and DIR/haproxy-3.0/haproxy
# available (DIR defaults to $TUGBOAT_HAPROXY_DIR, else ~/.cache/tugboat/haproxy).
#
# With the project's shared tools beside the checkout (../shared/tools, or
# $TUGBOAT_SHARED_TOOLS), both series come from Debian's archive: 2.6 is bookworm's
# package, 3.0 is built from trixie's source package (about 90 s, cached). Without
# them, bookworm's haproxy package (2.6) is unpacked into DIR. Nothing is installed
# system-wide except the shared libraries haproxy needs (with apt-get, as root).
set -Eeuo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-${TUGBOAT_HAPROXY_DIR:-$HOME/.cache/tugboat/haproxy}}
tools=${TUGBOAT_SHARED_TOOLS:-$here/../shared/tools}
mkdir -p "$dir"

if [ -x "$tools/haproxy-versions.sh" ] || [ -f "$tools/haproxy-versions.sh" ]; then
  HAPROXY_SERIES=${HAPROXY_SERIES:-"2.6 3.0"} HAPROXY_SMOKE=${HAPROXY_SMOKE:-0} \
    bash "$tools/haproxy-versions.sh" "$dir" >&2
  exit 0
fi

if [ -x "$dir/haproxy-2.6/haproxy" ] && "$dir/haproxy-2.6/haproxy" -v >/dev/null 2>&1; then
  exit 0
fi
echo "get-haproxy: unpacking Debian's haproxy package into $dir/haproxy-2.6" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -qq >&2
(cd "$work" && apt-get download -qq haproxy >&2)
dpkg-deb -x "$work"/haproxy_*.deb "$work/root"
mkdir -p "$dir/haproxy-2.6"
cp "$work/root/usr/sbin/haproxy" "$dir/haproxy-2.6/haproxy"
missing=$(ldd "$dir/haproxy-2.6/haproxy" | awk '/not found/ {print $1}')
if [ -n "$missing" ]; then
  # The runtime dependencies of the package, without the package (no service is set up).
  deps=$(dpkg-deb -f "$work"/haproxy_*.deb Depends | tr ',' '\n' | sed 's/[ (].*//;s/^ *//' |
         grep -v -e '^adduser' -e '^init-system' -e '^dpkg' -e '^$' | tr '\n' ' ')
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $deps >&2
fi
"$dir/haproxy-2.6/haproxy" -v | head -1 >&2
