#!/usr/bin/env bash
# get-haproxy.sh [DIR] - haproxy binaries for the tests and the quickstart, as
# DIR/haproxy-X.Y/haproxy (DIR defaults to $TUGBOAT_HAPROXY_DIR, else
# ~/.cache/tugboat/haproxy). Prints the series it made available on stdout, one line.
#
# Series: $HAPROXY_SERIES when set; else 2.6 and 3.0, which Debian's archive gives
# (bookworm's package unpacked; trixie's source package built, about 2 minutes, or, when
# the mirror serves no source packages, trixie's binary package with trixie's shared
# libraries in DIR/haproxy-3.0/lib, patchelf pointing the binary at them), and
# 3.2 and 3.4 as well when a folder of upstream release tarballs (haproxy-3.2.*.tar.gz,
# haproxy-3.4.*.tar.gz) is found: $TUGBOAT_HAPROXY_TARBALLS, else ../shared/haproxy-src
# beside the checkout. Every series asked for is required: a missing one fails.
# Everything is cached; nothing is installed system-wide except the build tools (and
# patchelf) and the bookworm shared libraries haproxy needs (apt-get, as root).
set -Eeuo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-${TUGBOAT_HAPROXY_DIR:-$HOME/.cache/tugboat/haproxy}}
tarballs=${TUGBOAT_HAPROXY_TARBALLS:-$here/../shared/haproxy-src}
series=${HAPROXY_SERIES:-}
if [ -z "$series" ]; then
  series="2.6 3.0"
  for s in 3.2 3.4; do
    if compgen -G "$tarballs/haproxy-$s.*.tar.gz" >/dev/null; then series+=" $s"; fi
  done
fi
mkdir -p "$dir"
HAPROXY_SERIES=$series HAPROXY_REQUIRED=$series HAPROXY_SMOKE=${HAPROXY_SMOKE:-0} \
  HAPROXY_TARBALL_DIR=$tarballs bash "$here/scripts/haproxy-versions.sh" "$dir" >&2
echo "$series"
