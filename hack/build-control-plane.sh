#!/usr/bin/env bash
# Builds the local control plane from the official sources through the Go
# module proxy: kube-apiserver, kube-controller-manager and kubectl (one wrapper
# module, because k8s.io/kubernetes replaces its staging modules with local
# paths that `go install` refuses), etcd (a wrapper for the same reason) and
# helm (no replace lines, plain `go install`).
#
# Binaries are cached by version under ${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway,
# so only the first run on a machine pays for the build. Prints the bin dir.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-1.36.3}
ETCD_VERSION=${ETCD_VERSION:-3.6.8}
HELM_VERSION=${HELM_VERSION:-3.21.4}

CACHE=${SLUICEWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway}
BIN="$CACHE/bin/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# shellcheck source=hack/lib/kubernetes.sh
source "$(dirname "$0")/lib/kubernetes.sh"
log() { printf '[build-control-plane] %s\n' "$*" >&2; }

built() {
  [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-controller-manager" ] && [ -x "$BIN/kubectl" ] \
    && [ -x "$BIN/etcd" ] && [ -x "$BIN/helm" ]
}
if built; then echo "$BIN"; exit 0; fi
mkdir -p "$BIN"
# Two builds at once (two checkouts testing side by side) would each take ten
# minutes of both cores; the second waits for the first and reuses its output.
exec 9>"$CACHE/.build.lock"
flock 9
if built; then echo "$BIN"; exit 0; fi
WORK=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

build_kubernetes() {
  kube_module "$WORK/k8s" kube-apiserver kube-controller-manager kubectl
  log "building kube-apiserver, kube-controller-manager, kubectl v$KUBE_VERSION"
  go build -trimpath -ldflags "$(kube_ldflags)" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kubectl
}

build_etcd() {
  mkdir -p "$WORK/etcd" && cd "$WORK/etcd"
  go mod init local/etcdbin >/dev/null 2>&1
  go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  log "building etcd v$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v$ETCD_VERSION" \
    -o "$BIN/etcd" go.etcd.io/etcd/server/v3
}

build_helm() {
  local minor; minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  log "building helm v$HELM_VERSION"
  GOBIN="$WORK/helm" go install -trimpath -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION \
    -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor" \
    "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  mv "$WORK/helm/helm" "$BIN/helm"
}

start=$(date +%s)
[ -x "$BIN/etcd" ] || (build_etcd)
[ -x "$BIN/helm" ] || (build_helm)
{ [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kubectl" ]; } || (build_kubernetes)
log "built in $(( $(date +%s) - start )) s into $BIN"
echo "$BIN"
