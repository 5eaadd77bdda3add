#!/usr/bin/env bash
# kubectl from the pinned k8s.io/kubernetes (hack/cluster/k8s lists it as a tool): what the deploy
# tests and docs/deploy.md run (`kubectl apply -k deploy/scheduler`, `kubectl kubesched explain`).
# Run by build.sh (see "Extra binaries" there).
set -euo pipefail
cd "$HERE/k8s"
"$GO" build -p=2 -ldflags "$K8S_LDFLAGS" -o "$OUT/" k8s.io/kubernetes/cmd/kubectl
