#!/usr/bin/env bash
# quickstart.sh - Tugboat on this machine, as it runs in the pod: haproxy started the
# way the official image starts it (on the init container's config), the controller
# steering it through the master socket, and echo backends standing in for pods.
#
#   scripts/quickstart.sh           run until Ctrl-C; edit examples/quickstart/*.yaml live
#   scripts/quickstart.sh --check   show the routing, then stop (used by CI)
#
# Environment: QUICKSTART_PORT (8080), HAPROXY_SERIES ("2.6" or "3.0", default 2.6).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
check=0
[ "${1:-}" = "--check" ] && check=1
port=${QUICKSTART_PORT:-8080}
series=${HAPROXY_SERIES:-2.6}
haproxy_dir=${TUGBOAT_HAPROXY_DIR:-$HOME/.cache/tugboat/haproxy}
work=$PWD/.quickstart

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

if [ ! -x "$haproxy_dir/haproxy-$series/haproxy" ]; then
  say "getting haproxy $series"
  HAPROXY_SERIES="$series" scripts/get-haproxy.sh "$haproxy_dir"
fi
haproxy=$haproxy_dir/haproxy-$series/haproxy

say "building tugboat"
# The controller's allocator (jemalloc) is built from C with make.
if ! command -v make >/dev/null; then
  say "installing make"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends make
fi
cargo build --quiet -p tugboat -p tugboat-testkit --bins
bin=${CARGO_TARGET_DIR:-$PWD/target}/debug

rm -rf "$work"
mkdir -p "$work"/{etc,lib,run}
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "starting haproxy $("$haproxy" -v | head -1 | awk '{print $3}') on the init container's config (log: .quickstart/haproxy.log)"
cp init-config/haproxy.cfg "$work/etc/haproxy.cfg"
"$haproxy" -W -db -S "$work/run/master.sock,mode,600" -f "$work/etc" >"$work/haproxy.log" 2>&1 &
pids+=($!)

say "starting echo backends: web on 127.0.0.11-12:9001, api on 127.0.0.13:9002"
"$bin/tugboat-echo" web 127.0.0.11:9001 127.0.0.12:9001 >"$work/echo-web.log" 2>&1 &
pids+=($!)
"$bin/tugboat-echo" api 127.0.0.13:9002 >"$work/echo-api.log" 2>&1 &
pids+=($!)

say "starting the controller on examples/quickstart/ (log: .quickstart/controller.log)"
"$bin/tugboat" run \
  --master-socket "$work/run/master.sock" \
  --config-dir "$work/etc" --lib-dir "$work/lib" \
  --bind-address 127.0.0.1 --http-port "$port" \
  --manifests examples/quickstart >"$work/controller.log" 2>&1 &
pids+=($!)

for _ in $(seq 1 100); do
  if curl -fsS -o /dev/null -H 'Host: shop.example.com' "http://127.0.0.1:$port/" 2>/dev/null; then
    break
  fi
  sleep 0.1
done

show() { # show 'PATH' [HOST]: print the curl line, then run it
  local path=$1 host=$2
  printf '\n$ curl -H "Host: %s" http://127.0.0.1:%s%s\n' "$host" "$port" "$path"
  curl -sS -w '(HTTP %{http_code})\n' -H "Host: $host" "http://127.0.0.1:$port$path" || true
}
say "routing through haproxy:"
show / shop.example.com
show / shop.example.com
show /api/orders shop.example.com
show /anything api.example.com
show / nowhere.example.com
printf '\n'
say "the controller's log:"
cat "$work/controller.log"

if [ "$check" = 1 ]; then
  body=$(curl -fsS -H 'Host: shop.example.com' "http://127.0.0.1:$port/api/orders")
  case "$body" in service=api*) ;; *) echo "quickstart check failed: $body" >&2; exit 1 ;; esac
  code=$(curl -sS -o /dev/null -w '%{http_code}' -H 'Host: nowhere.example.com' "http://127.0.0.1:$port/")
  [ "$code" = 404 ] || { echo "quickstart check failed: expected 404, got $code" >&2; exit 1; }
  say "quickstart check passed"
  exit 0
fi
say "running. Edit examples/quickstart/ingress.yaml and curl again; Ctrl-C stops everything."
tail -n 0 -f "$work/controller.log"
