#!/usr/bin/env bash
# helm (helm.sh/helm/v3/cmd/helm, version pinned by hack/cluster/helm/pin.sh): `helm lint`,
# `helm template` and `helm install` of deploy/chart in tests/integration/test_deploy_chart.py and
# docs/deploy.md. Run by build.sh (see "Extra binaries" there).
set -euo pipefail
cd "$HERE/helm"
helm_version="$(sed -n -E 's#^\s*helm\.sh/helm/v3 (v[^ ]+)( // indirect)?\s*$#\1#p' go.mod)"
[[ -n "$helm_version" ]] || { echo "no helm.sh/helm/v3 requirement in helm/go.mod" >&2; exit 1; }
# The ldflags of helm's Makefile: its version, and the Kubernetes version `helm template` and
# `helm lint` assume without a cluster (client-go v0.X.Y -> 1.X; unset, it is 1.20 and a chart's
# kubeVersion constraint fails).
client_go="$(sed -n -E 's#^\s*k8s\.io/client-go v0\.([0-9]+)\..*$#\1#p' go.mod)"
[[ -n "$client_go" ]] || { echo "no k8s.io/client-go requirement in helm/go.mod" >&2; exit 1; }
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$client_go"
done
"$GO" build -p=2 -ldflags "$ldflags" -o "$OUT/helm" helm.sh/helm/v3/cmd/helm
