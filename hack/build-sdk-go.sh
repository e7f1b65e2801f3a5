#!/usr/bin/env bash
# Builds the Go SDK's two programs (sdk/conformance/README.md):
#   .run/sdk/go/conformance     the conformance program (worker / start)
#   .run/sdk/go/example-worker  examples/go: every task type of examples/workers.py
# Idempotent and quiet on success: modules come through the Go module proxy
# into Go's module cache, builds are cached by Go's build cache, and the
# binaries are only replaced when they changed. Prints nothing; exits non-zero
# on failure with Go's message.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT="$ROOT/.run/sdk/go"
# GOTOOLCHAIN=local: never download another toolchain (go.mod asks for 1.26).
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
mkdir -p "$OUT"
cd "$ROOT/sdk/go"
go build -o "$OUT/conformance" ./cmd/conformance
cd "$ROOT/examples/go"
go build -o "$OUT/example-worker" .
