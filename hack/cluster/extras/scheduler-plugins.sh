#!/usr/bin/env bash
# kube-scheduler-plugins: scheduler-plugins' scheduler binary (sigs.k8s.io/scheduler-plugins,
# cmd/scheduler: kube-scheduler with Coscheduling and the other out-of-tree plugins registered),
# the oracle for gangs (tests/integration/test_differential_gangs.py, bench/gangs.py).
# Built from the wrapper module hack/cluster/scheduler-plugins (go.mod/go.sum from its pin.sh,
# version SCHEDULER_PLUGINS_VERSION in versions.env). Run by build.sh with GO, HERE and OUT set.
set -euo pipefail
cd "$HERE/scheduler-plugins"
# The binary version must be the k8s.io/kubernetes release it is built from: kube-scheduler derives
# its emulation/compatibility versions from it (scheduler-plugins' own "v0.35.4-devel" fails with
# "emulation version 0.35 is not between [1.31, 0.35.0-devel]").
k8s_version="$(sed -n -E 's#^\s*k8s\.io/kubernetes => k8s\.io/kubernetes (v[^ ]+)\s*$#\1#p' go.mod)"
[[ -n "$k8s_version" ]] || { echo "no k8s.io/kubernetes replace in scheduler-plugins/go.mod" >&2; exit 1; }
"$GO" build -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version" \
  -o "$OUT/kube-scheduler-plugins" sigs.k8s.io/scheduler-plugins/cmd/scheduler
