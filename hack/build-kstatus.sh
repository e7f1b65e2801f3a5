#!/usr/bin/env bash
# Builds hack/kstatus (kstatus and Argo CD health checks run over real objects,
# for e2e/test_health.py) through the Go module proxy. Cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway by a hash of its sources, so only a
# change to the program or its go.sum rebuilds it. Prints the binary's path.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/kstatus" && pwd)
CACHE=${SLUICEWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway}
HASH=$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC"/*.go | cksum | cut -d' ' -f1)
BIN="$CACHE/bin/kstatus-$HASH/kstatus"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
mkdir -p "$(dirname "$BIN")"
cd "$SRC"
CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -o "$BIN.tmp" . >&2
mv "$BIN.tmp" "$BIN"  # last: a build cut short leaves nothing to trust
echo "$BIN"
