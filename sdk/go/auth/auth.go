// Package auth gives requests to the Sluiceway API their identity: a bearer
// token (fixed, or read from a file on every request, as projected
// ServiceAccount tokens rotate), or an API key.
package auth

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/sluiceway/sluiceway/sdk/go/api"
)

// Credentials sets a request's identity headers. The zero value sends none.
type Credentials struct {
	Token     string // sent as "Authorization: Bearer <Token>"
	TokenFile string // re-read on every request; wins over Token
	APIKey    string // sent as "X-API-Key" when there is no token
}

// FromEnv reads SLUICEWAY_TOKEN, SLUICEWAY_TOKEN_FILE and SLUICEWAY_API_KEY.
func FromEnv() Credentials {
	return Credentials{
		Token:     os.Getenv("SLUICEWAY_TOKEN"),
		TokenFile: os.Getenv("SLUICEWAY_TOKEN_FILE"),
		APIKey:    os.Getenv("SLUICEWAY_API_KEY"),
	}
}

// Editor is the generated client's hook that adds the headers to each request.
func (c Credentials) Editor() api.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		return c.apply(req)
	}
}

func (c Credentials) apply(req *http.Request) error {
	switch {
	case c.TokenFile != "":
		raw, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return fmt.Errorf("sluiceway: reading the token file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(raw)))
	case c.Token != "":
		req.Header.Set("Authorization", "Bearer "+c.Token)
	case c.APIKey != "":
		req.Header.Set("X-API-Key", c.APIKey)
	}
	return nil
}
