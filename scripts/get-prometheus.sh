#!/usr/bin/env bash
# get-prometheus.sh - puts Debian's prometheus binary in a cache folder and prints its
# path, for the end-to-end test that runs every dashboard query against a real Prometheus
# (tests/e2e/dashboards.rs, which starts it as its own process). The package is unpacked
# (`apt-get download` + `dpkg -x`), never installed: no service, no user, no unit. Only
# the binary is kept (about 50 MB). Idempotent: a second run finds it and only prints it.
#
# Usage: scripts/get-prometheus.sh            # prints the prometheus path on stdout
#        PROMETHEUS_CACHE=DIR scripts/get-prometheus.sh
set -Eeuo pipefail

cache=${PROMETHEUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tugboat/prometheus}
bin=$cache/prometheus

if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  echo "$bin"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# apt's download user must be able to write the folder.
chmod 755 "$work"
mkdir "$work/deb" && chmod 777 "$work/deb"
sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
download() { (cd "$work/deb" && apt-get download -qq prometheus) >&2; }
if ! download; then
  # A fresh machine may have no package lists yet.
  $sudo apt-get update -qq >&2
  download
fi
dpkg -x "$work"/deb/prometheus_*.deb "$work/root"
mkdir -p "$cache"
mv "$work/root/usr/bin/prometheus" "$bin.new"
mv "$bin.new" "$bin"
echo "get-prometheus.sh: $("$bin" --version 2>&1 | head -1) in $cache" >&2
echo "$bin"
