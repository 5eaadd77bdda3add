#!/usr/bin/env bash
# kube-controller-manager from the pinned k8s.io/kubernetes, in the same wrapper module as
# kube-apiserver and kube-scheduler (hack/cluster/k8s, where pin.sh lists it as a tool so its
# go.sum holds every module it needs). It shares most packages with kube-apiserver, so after the
# core build it costs its own packages and a link: 73 s on 2 busy cores with the core's build
# cache, 105 MB. Run by build.sh (see "Extra binaries" there) with GO, HERE, K8S_LDFLAGS and OUT.
set -euo pipefail
cd "$HERE/k8s"
"$GO" build -p=2 -ldflags "$K8S_LDFLAGS" -o "$OUT/" k8s.io/kubernetes/cmd/kube-controller-manager
