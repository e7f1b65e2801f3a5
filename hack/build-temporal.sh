#!/usr/bin/env bash
# Builds the Temporal CLI, whose `temporal server start-dev` is Temporal's
# development server, from its Go module through the module proxy: the peer
# of bench/workflows.py (issue 15, goal 3). Only `make bench` needs it.
#
# v1.5.1 is the newest release `go install` takes: from v1.9 the CLI's go.mod
# replaces its `cliext` module with a local folder, which `go install
# pkg@version` refuses and the proxy does not serve on its own.
#
# Cached by version under ${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway, so only the
# first run on a machine pays for the build (2.5 minutes on 2 cores with the
# modules already downloaded).
# Prints the binary's path.
set -euo pipefail

TEMPORAL_CLI_VERSION=${TEMPORAL_CLI_VERSION:-1.5.1}
CACHE=${SLUICEWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway}
BIN="$CACHE/temporal/cli-$TEMPORAL_CLI_VERSION"
log() { printf '[build-temporal] %s\n' "$*" >&2; }

if [ -x "$BIN/temporal" ]; then echo "$BIN/temporal"; exit 0; fi
mkdir -p "$BIN"
exec 9>"$CACHE/.build-temporal.lock"
flock 9
if [ -x "$BIN/temporal" ]; then echo "$BIN/temporal"; exit 0; fi
log "building the Temporal CLI v$TEMPORAL_CLI_VERSION (its development server): several minutes, once"
CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN="$BIN" go install "github.com/temporalio/cli/cmd/temporal@v$TEMPORAL_CLI_VERSION"
echo "$BIN/temporal"
