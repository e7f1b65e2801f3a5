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
  local staging minor ld m p
  staging="0.${KUBE_VERSION#1.}"; minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  mkdir -p "$WORK/k8s" && cd "$WORK/k8s"
  go mod init local/k8sbins >/dev/null 2>&1
  go mod edit -go=1.26.0
  # Derive the staging module list from the real go.mod instead of hard-coding it.
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" \
          | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$gomod"); do
    go mod edit "-replace=$m=$m@v$staging"
  done
  go get "k8s.io/kubernetes@v$KUBE_VERSION" >/dev/null 2>&1 || go get "k8s.io/kubernetes@v$KUBE_VERSION"
  cat > tools.go <<'GO'
package tools
GO
  go get -tool k8s.io/kubernetes/cmd/kube-apiserver@"v$KUBE_VERSION" \
              k8s.io/kubernetes/cmd/kube-controller-manager@"v$KUBE_VERSION" \
              k8s.io/kubernetes/cmd/kubectl@"v$KUBE_VERSION"
  # Stamp the version: kubectl's skew warning and helm's kubeVersion checks read it.
  ld=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=v$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld="$ld -X $p.gitTreeState=clean -X $p.buildDate=2026-01-01T00:00:00Z"
  done
  log "building kube-apiserver, kube-controller-manager, kubectl v$KUBE_VERSION"
  go build -trimpath -ldflags "-s -w $ld" -o "$BIN/" \
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
