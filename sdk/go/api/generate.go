// Package api holds the Sluiceway API's types and HTTP client, generated
// from sdk/openapi.json by oapi-codegen (pinned in go.mod as a tool).
// Regenerate with `go generate ./api` after `python -m sluiceway openapi --write`.
package api

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../openapi.json
