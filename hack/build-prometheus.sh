#!/usr/bin/env bash
# Builds promtool and the Prometheus server from the official Prometheus Go
# module through the Go module proxy (github.com/prometheus/prometheus has no
# replace lines, so a plain `go install pkg@version` works). `make test` checks
# the syntax of every PromQL expression of the chart's dashboard and alert rules
# with promtool, and evaluates them in a real Prometheus scraping the operator.
#
# The build tag `remove_all_sd` leaves out the cloud service discoveries
# (AWS, Azure, GCE, Kubernetes, ...): promtool checks rule files, and those
# SDKs are most of the cold build time. The server is built without its web UI. Cached by version under
# ${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway like the control plane, so only the
# first run on a machine pays for it. Prints the bin dir.
set -euo pipefail

# The Go module keeps a v0 major: module v0.3XX.Y is Prometheus v3.XX.Y.
PROMETHEUS_MODULE_VERSION=${PROMETHEUS_MODULE_VERSION:-0.316.0}
IFS=. read -r _ module_minor patch <<<"$PROMETHEUS_MODULE_VERSION"
PROMETHEUS_VERSION="$((module_minor / 100)).$((module_minor % 100)).$patch"

CACHE=${SLUICEWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway}
BIN="$CACHE/bin/prometheus-$PROMETHEUS_VERSION"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
log() { printf '[build-prometheus] %s\n' "$*" >&2; }

built() { [ -x "$BIN/promtool" ] && [ -x "$BIN/prometheus" ]; }
if built; then echo "$BIN"; exit 0; fi
mkdir -p "$BIN"
# Two checkouts testing side by side: the second waits for the first's build.
exec 9>"$CACHE/.build-prometheus.lock"
flock 9
if built; then echo "$BIN"; exit 0; fi
WORK=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

start=$(date +%s)
log "building promtool and prometheus v$PROMETHEUS_VERSION (first run on this machine only)"
stamp=github.com/prometheus/common/version
GOBIN="$WORK" go install -trimpath -tags remove_all_sd,netgo -ldflags "-s -w \
  -X $stamp.Version=$PROMETHEUS_VERSION -X $stamp.Revision=v$PROMETHEUS_MODULE_VERSION \
  -X $stamp.Branch=release -X $stamp.BuildUser=sluiceway -X $stamp.BuildDate=20260101-00:00:00" \
  "github.com/prometheus/prometheus/cmd/promtool@v$PROMETHEUS_MODULE_VERSION" \
  "github.com/prometheus/prometheus/cmd/prometheus@v$PROMETHEUS_MODULE_VERSION"
mv "$WORK/promtool" "$WORK/prometheus" "$BIN/"  # last: a build cut short leaves nothing `built` trusts
log "built in $(( $(date +%s) - start )) s into $BIN"
echo "$BIN"
