#!/usr/bin/env bash
# `make lint` for the Go SDK: gofmt (no file may need formatting), go vet,
# and drift: the code generated from sdk/openapi.json, regenerated into a
# temporary directory with the pinned oapi-codegen (go.mod's tool), must
# equal the committed sdk/go/api/api.gen.go. After `python -m sluiceway
# openapi --write`, run `cd sdk/go && go generate ./api` and commit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
cd "$ROOT"
unformatted=$(gofmt -l sdk/go examples/go)
if [ -n "$unformatted" ]; then
	printf 'gofmt would change:\n%s\n' "$unformatted" >&2
	exit 1
fi
(cd examples/go && go vet ./...)
cd sdk/go
go vet ./...
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The config names its output file: a copy of it writes into $tmp instead.
sed "s|^output: .*|output: $tmp/api.gen.go|" api/oapi-codegen.yaml >"$tmp/config.yaml"
go tool oapi-codegen -config "$tmp/config.yaml" ../openapi.json
if ! diff -u api/api.gen.go "$tmp/api.gen.go" >"$tmp/diff"; then
	head -40 "$tmp/diff" >&2
	echo "sdk/go/api/api.gen.go is stale: sdk/openapi.json changed; run 'cd sdk/go && go generate ./api' and commit it" >&2
	exit 1
fi
