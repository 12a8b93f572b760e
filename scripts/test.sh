#!/usr/bin/env bash
# test.sh - the whole test suite, as CI runs it: formatting, lints, unit and
# end-to-end tests against real haproxy 2.6 and 3.0, the quickstart and the Helm chart.
# On a fresh machine it first gets what the tests need (haproxy).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n==> %s\n' "$*"; }

step "haproxy 2.6 and 3.0"
scripts/get-haproxy.sh
export TUGBOAT_REQUIRE_HAPROXY=${TUGBOAT_REQUIRE_HAPROXY:-"2.6 3.0"}

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "helm and kubectl (for the chart tests and the kubectl end-to-end test)"
tools=$(dirname "$(scripts/get-helm.sh)")
export PATH="$tools:$PATH"
export TUGBOAT_REQUIRE_KUBECTL=${TUGBOAT_REQUIRE_KUBECTL:-1}

step "tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
else
  cargo test --workspace --no-fail-fast
fi

step "quickstart"
QUICKSTART_PORT=${QUICKSTART_PORT:-18080} scripts/quickstart.sh --check >/dev/null
echo "quickstart check passed"

step "Helm chart (lint, template, schema, security properties, manifests in sync)"
scripts/test-chart.sh
