#!/usr/bin/env bash
# pause: the pod sandbox process of the opt-in real node (kubesched.testing.controlplane.node packs
# it as the image kubesched.local/pause:1 and imports it into the node's containerd, because the
# sandbox image of a release, registry.k8s.io/pause, cannot be pulled here). It does what
# kubernetes/build/pause/linux/pause.c does for a pod: sleep until SIGINT/SIGTERM, with SIGCHLD
# ignored so the kernel reaps orphaned children. Static (CGO_ENABLED=0 from build.sh). Run by
# build.sh (see "Extra binaries" there); no dependency, so no wrapper module to pin.
set -euo pipefail
src="$(mktemp -d)"
trap 'rm -rf "$src"' EXIT
cat >"$src/go.mod" <<'GOMOD'
module kubesched.local/pause

go 1.22
GOMOD
cat >"$src/main.go" <<'GO'
// pause: the pod sandbox's process (what kubernetes/build/pause/linux/pause.c does).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signal.Ignore(syscall.SIGCHLD)
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	<-c
}
GO
cd "$src"
"$GO" build -ldflags "-s -w" -o "$OUT/pause" .
