#!/usr/bin/env bash
# What the per-route request counters (docs/metrics.md, "Requests by Kubernetes names")
# cost haproxy: its CPU time per request (the worker's utime + stime from /proc) and the
# requests per second, with and without the counting rules, on each installed series.
# Both configurations are the same frontend (the route and owner rules Tugboat renders);
# "on" adds the counting rules as the rendered snapshot holds them. N keep-alive
# requests, 16 at a time (curl --parallel), the configurations alternating, RUNS runs
# each; the backend is a second frontend of the same haproxy. Prints every run, then the
# medians. Needs curl 7.66+ and bc.
#
#   scripts/bench-request-metrics.sh            # N=30000 RUNS=7 SERIES="2.6 3.4"
set -euo pipefail

N=${N:-30000}
RUNS=${RUNS:-7}
SERIES=${SERIES:-"2.6 3.4"}
PORT=${PORT:-18990}
HAPROXY_DIR=${HAPROXY_DIR:-$HOME/.cache/tugboat/haproxy}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SNAPSHOT=$ROOT/crates/tugboat-haproxy/src/snapshots/tugboat_haproxy__render__tests____etc__haproxy__haproxy.cfg.snap
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The counting rules of the rendered frontend: the start, the tracking and the responses.
grep -F 'txn.stats_t0) date' "$SNAPSHOT" > "$WORK/start"
grep -E 'txn.stats_key|track-sc2' "$SNAPSHOT" > "$WORK/track"
sed -n '/^    \.if version_atleast(3.0)/,/^    \.endif/p' "$SNAPSHOT" > "$WORK/responses"
grep -F 'backend tugboat_request_stats' -A1 "$SNAPSHOT" > "$WORK/table"

config() { # $1: on | off
    cat <<CFG
global
    nbthread 1
defaults
    mode http
    timeout client 5s
    timeout server 5s
    timeout connect 1s
frontend http
    bind 127.0.0.1:$PORT
CFG
    [ "$1" = on ] && cat "$WORK/start"
    cat <<'CFG'
    http-request set-var(txn.host) req.hdr(host),field(1,:),lower
    http-request set-var(txn.route) str(app|Ingress/default/alpha|397af9c959cc)
    http-request set-var(txn.owner) var(txn.route),field(2,|) if { var(txn.route) -m found }
    http-request set-var(txn.rid) var(txn.route),field(3,|) if { var(txn.route) -m found }
    http-request set-var(txn.route) var(txn.route),field(1,|) if { var(txn.route) -m found }
    http-request set-var(txn.backend) var(txn.route),field(1,.) if { var(txn.route) -m found }
CFG
    [ "$1" = on ] && cat "$WORK/track" "$WORK/responses"
    cat <<CFG
    use_backend %[var(txn.backend)]
backend app
    server s 127.0.0.1:$((PORT + 1))
frontend answer
    bind 127.0.0.1:$((PORT + 1))
    http-request return status 200 content-type text/plain string "hello"
CFG
    [ "$1" = on ] && cat "$WORK/table"
    return 0
}
config off > "$WORK/off.cfg"
config on > "$WORK/on.cfg"

ticks=$(getconf CLK_TCK)
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

for series in $SERIES; do
    haproxy=$HAPROXY_DIR/haproxy-$series/haproxy
    [ -x "$haproxy" ] || { echo "haproxy $series: not installed in $HAPROXY_DIR"; continue; }
    for mode in off on; do "$haproxy" -c -q -f "$WORK/$mode.cfg"; done
    : > "$WORK/results"
    for run in $(seq "$RUNS"); do
        for mode in off on; do
            "$haproxy" -db -f "$WORK/$mode.cfg" > /dev/null 2>&1 &
            pid=$!
            sleep 0.3
            before=$(cpu_ticks "$pid")
            started=$(date +%s.%N)
            curl -s -Z --parallel-max 16 -o /dev/null -H 'Host: alpha.example.com' \
                "http://127.0.0.1:$PORT/x[1-$N]" > /dev/null 2>&1
            ended=$(date +%s.%N)
            after=$(cpu_ticks "$pid")
            kill "$pid"
            wait "$pid" 2> /dev/null || true
            rps=$(echo "$N / ($ended - $started)" | bc -l | cut -d. -f1)
            us=$(echo "($after - $before) * 1000000 / $ticks / $N" | bc -l | cut -c1-5)
            echo "$series run $run $mode: $rps requests/s, $us us of haproxy CPU per request"
            echo "$mode $rps $us" >> "$WORK/results"
        done
    done
    for mode in off on; do
        rps=$(awk -v m="$mode" '$1 == m { print $2 }' "$WORK/results" | median)
        us=$(awk -v m="$mode" '$1 == m { print $3 }' "$WORK/results" | median)
        echo "$series median, counting $mode: $rps requests/s, $us us of haproxy CPU per request"
    done
done
