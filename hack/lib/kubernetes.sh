# Shared by the build scripts: a wrapper Go module for Kubernetes commands.
# k8s.io/kubernetes replaces its staging modules with local paths, which
# `go install pkg@version` refuses; a wrapper module that replaces each of them
# with its published v0.x.y twin builds the same code. The staging list is
# derived from the real go.mod instead of being hard-coded.
# Needs KUBE_VERSION; the build cache is shared, so the packages common to two
# builds (client-go, apimachinery, ...) compile once per machine.

kube_module() {  # kube_module DIR CMD...: a wrapper module in DIR with the commands as tools
  local dir=$1 staging gomod m c; shift
  staging="0.${KUBE_VERSION#1.}"
  mkdir -p "$dir" && cd "$dir"
  go mod init local/k8sbins >/dev/null 2>&1
  go mod edit -go=1.26.0
  gomod=$(go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" \
          | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$gomod"); do
    go mod edit "-replace=$m=$m@v$staging"
  done
  go get "k8s.io/kubernetes@v$KUBE_VERSION" >/dev/null 2>&1 || go get "k8s.io/kubernetes@v$KUBE_VERSION"
  printf 'package tools\n' > tools.go
  for c in "$@"; do go get -tool "k8s.io/kubernetes/cmd/$c@v$KUBE_VERSION"; done
}

kube_ldflags() {  # the version stamp: kubectl's skew warning and helm's kubeVersion checks read it
  local p minor ld=""
  minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=v$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld="$ld -X $p.gitTreeState=clean -X $p.buildDate=2026-01-01T00:00:00Z"
  done
  echo "-s -w$ld"
}

kube_source() {  # the directory of the k8s.io/kubernetes module (for files that are not Go: pause.c)
  go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}
