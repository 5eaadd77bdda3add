#!/usr/bin/env bash
# kubelet and kube-proxy from the pinned k8s.io/kubernetes: the binaries of the opt-in real node
# (kubesched.testing.controlplane.node; `python -m kubesched.testing.controlplane run --real-node`).
# Same wrapper module as kube-apiserver (hack/cluster/k8s, where pin.sh lists both as tools so its
# go.sum holds every module they need). Measured after the core build on 2 busy cores, nice'd:
# kubelet+kubectl 62 s, kube-proxy 35 s (shared packages come from the core's build cache);
# kubelet 88 MB, kube-proxy 76 MB. Run by build.sh (see "Extra binaries" there).
set -euo pipefail
cd "$HERE/k8s"
"$GO" build -p=2 -ldflags "$K8S_LDFLAGS" -o "$OUT/" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
