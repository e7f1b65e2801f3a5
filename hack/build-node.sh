#!/usr/bin/env bash
# Builds the node of the local cluster from the official sources through the Go
# module proxy, beside the control plane (hack/build-control-plane.sh) and with
# its own cache key, so neither rebuilds the other:
#   kubelet, kube-proxy, kube-scheduler  the same Kubernetes wrapper module
#   pause                                build/pause/linux/pause.c of the same
#                                        k8s.io/kubernetes module, a static C binary
#   coredns                              a CoreDNS with only the plugins cluster
#                                        DNS needs (kubernetes, cache, errors,
#                                        health, ready, log): no cloud SDKs to build
# containerd, runc and the CNI plugins come from the distribution
# (hack/install-node-packages.sh). Prints the bin dir.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-1.36.3}
COREDNS_VERSION=${COREDNS_VERSION:-1.15.0}
PAUSE_VERSION=3.10.2  # the TAG of build/pause/Makefile at this Kubernetes version

CACHE=${SLUICEWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway}
BIN="$CACHE/bin/node-k8s-$KUBE_VERSION-coredns-$COREDNS_VERSION"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# shellcheck source=hack/lib/kubernetes.sh
source "$(dirname "$0")/lib/kubernetes.sh"
log() { printf '[build-node] %s\n' "$*" >&2; }

built() {
  [ -x "$BIN/kubelet" ] && [ -x "$BIN/kube-proxy" ] && [ -x "$BIN/kube-scheduler" ] \
    && [ -x "$BIN/pause" ] && [ -x "$BIN/coredns" ]
}
if built; then echo "$BIN"; exit 0; fi
mkdir -p "$BIN"
exec 9>"$CACHE/.build.lock"  # one build at a time per machine (see build-control-plane.sh)
flock 9
if built; then echo "$BIN"; exit 0; fi
WORK=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

build_kubernetes() {
  kube_module "$WORK/k8s" kubelet kube-proxy kube-scheduler
  log "building kubelet, kube-proxy, kube-scheduler v$KUBE_VERSION"
  go build -trimpath -ldflags "$(kube_ldflags)" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler
}

build_pause() {
  local src; src=$(kube_source)/build/pause/linux/pause.c
  log "building pause $PAUSE_VERSION from $src"
  # The flags of build/pause/Makefile.
  gcc -Os -Wall -Werror -static "-DVERSION=v$PAUSE_VERSION-sluiceway" -o "$BIN/pause" "$src"
  strip "$BIN/pause"
}

build_coredns() {
  mkdir -p "$WORK/coredns" && cd "$WORK/coredns"
  go mod init local/corednsbin >/dev/null 2>&1
  go mod edit -go=1.26.0
  cat > main.go <<'GO'
// CoreDNS with only the plugins the local cluster's DNS uses.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
GO
  go get "github.com/coredns/coredns@v$COREDNS_VERSION"
  go mod tidy
  log "building coredns v$COREDNS_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$BIN/coredns" .
}

start=$(date +%s)
[ -x "$BIN/pause" ] || (build_pause)
[ -x "$BIN/coredns" ] || (build_coredns)
{ [ -x "$BIN/kubelet" ] && [ -x "$BIN/kube-proxy" ] && [ -x "$BIN/kube-scheduler" ]; } || (build_kubernetes)
log "built in $(( $(date +%s) - start )) s into $BIN"
echo "$BIN"
