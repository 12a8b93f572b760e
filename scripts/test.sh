#!/usr/bin/env bash
# test.sh - the whole test suite, as CI runs it: formatting, lints, unit and
# end-to-end tests against real haproxy (2.6, 3.0, 3.2, 3.4), the quickstart and the Helm
# chart. On a fresh machine it first gets what the tests need (haproxy, helm, kubectl).
# The series got are required; those that cannot be got here (3.2 and 3.4 need release
# tarballs, see scripts/get-haproxy.sh) are named as skipped on the last line.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n==> %s\n' "$*"; }

# Debian packages the tests use: curl and ldd (scripts), unshare and ip (the chart pod
# test runs the pod in Linux namespaces with its own loopback), make (the controller's
# allocator, jemalloc, is built from C), openssl (the client-certificate test compares
# the headers with what openssl prints).
need=()
command -v make >/dev/null || need+=(make)
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl)
command -v ldd >/dev/null || need+=(libc-bin)
command -v unshare >/dev/null || need+=(util-linux)
command -v ip >/dev/null || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
  step "installing ${need[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

all_series="2.6 3.0 3.2 3.4"
step "haproxy"
got=$(scripts/get-haproxy.sh)
export TUGBOAT_HAPROXY_DIR=${TUGBOAT_HAPROXY_DIR:-$HOME/.cache/tugboat/haproxy}
skipped=$(for s in $all_series; do case " $got " in *" $s "*) ;; *) printf '%s ' "$s";; esac; done)
# A test of a series that is not installed fails; the series that cannot be got here
# are skipped, knowingly, and named on the last line.
export TUGBOAT_SKIP_MISSING_HAPROXY=${TUGBOAT_SKIP_MISSING_HAPROXY:-${skipped% }}

# Debian's prometheus, unpacked (not a service): the dashboards' queries are checked
# against it (tests/e2e/dashboards.rs). About 4 s and 20 MB of download the first time.
step "prometheus"
if [ -z "${TUGBOAT_PROMETHEUS:-}" ]; then TUGBOAT_PROMETHEUS=$(scripts/get-prometheus.sh); fi
export TUGBOAT_PROMETHEUS

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "helm and kubectl (for the chart tests and the kubectl end-to-end test)"
tools=$(dirname "$(scripts/get-helm.sh)")
export PATH="$tools:$PATH"
export TUGBOAT_REQUIRE_KUBECTL=${TUGBOAT_REQUIRE_KUBECTL:-1}
# The chart's pod run as processes (tests/e2e/chart_pod.rs) needs root, util-linux and
# iproute2: required here, skipped with a line elsewhere.
export TUGBOAT_REQUIRE_CHART_POD=${TUGBOAT_REQUIRE_CHART_POD:-1}

step "tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
else
  cargo test --workspace --no-fail-fast
fi

step "fuzzing (each target of fuzz/ for 20 s: about 3 minutes with the build cached in ~/.cache/tugboat/fuzz-target)"
TUGBOAT_FUZZ_SECONDS=${TUGBOAT_FUZZ_SECONDS:-20} scripts/fuzz.sh

# The soak with faults (tests/src/bin/tugboat-bench-soak.rs, docs/benchmarks.md): 3
# minutes of load and churn on haproxy 3.4 through the API source, with each kind of
# fault once; about 4 minutes in all (the binaries are built by the tests above). It
# fails on a failed request outside the fault windows, files that do not load or are
# partial, or a reload when a restarted controller adopts haproxy.
step "soak with faults (3 minutes, haproxy 3.4)"
cargo build --quiet -p tugboat --bin tugboat -p tugboat-testkit --bin tugboat-bench-soak
"${CARGO_TARGET_DIR:-$PWD/target}"/debug/tugboat-bench-soak --duration 3m --fault-gap 12s --haproxy 3.4

step "quickstart"
QUICKSTART_PORT=${QUICKSTART_PORT:-18080} scripts/quickstart.sh --check >/dev/null
echo "quickstart check passed"

step "Helm chart (lint, template, schema, security properties, manifests in sync)"
scripts/test-chart.sh

if [ -n "$skipped" ]; then
  echo "haproxy series tested: $got; skipped: ${skipped% } (no release tarball: see scripts/get-haproxy.sh)"
else
  echo "haproxy series tested: $got"
fi
