package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Error is a request the server refused as a whole: its HTTP status and the
// error body every refusal has ({error, message, fields?}), which names
// fields, never payloads. Hand-written; the rest of this package is generated.
type Error struct {
	Status            int
	Code              string // the body's "error", e.g. TOO_MANY_WAITERS
	Message           string
	Fields            []FieldError
	RetryAfterSeconds float64 // a 429's Retry-After, when it gave one
}

func (e *Error) Error() string {
	if e.Code == "" && e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("HTTP %d: %s: %s", e.Status, e.Code, e.Message)
}

// Retryable says whether the same request is worth sending again later: the
// server or the path to it failed, it asked to slow down, or a rotating
// credential was momentarily refused.
func (e *Error) Retryable() bool {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	}
	return e.Status >= 500
}

// ErrorFrom reads a refusal (status >= 400) into an *Error; nil for success.
// It consumes the body of a refusal.
func ErrorFrom(resp *http.Response) error {
	if resp.StatusCode < 400 {
		return nil
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &Error{Status: resp.StatusCode}
	var body struct {
		Error             string       `json:"error"`
		Message           string       `json:"message"`
		Fields            []FieldError `json:"fields"`
		RetryAfterSeconds float64      `json:"retryAfterSeconds"`
	}
	if json.Unmarshal(raw, &body) == nil {
		e.Code, e.Message, e.Fields, e.RetryAfterSeconds = body.Error, body.Message, body.Fields, body.RetryAfterSeconds
	} else {
		e.Message = strings.TrimSpace(string(raw[:min(len(raw), 200)]))
	}
	if seconds, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); err == nil && seconds >= 0 {
		e.RetryAfterSeconds = seconds
	}
	return e
}

// DecodeJSON reads a JSON answer into v, keeping numbers exact (json.Number)
// where v holds them as interface{} values: task inputs and run outputs may
// carry integers past 2^53.
func DecodeJSON(resp *http.Response, v any) error {
	decoder := json.NewDecoder(resp.Body)
	decoder.UseNumber()
	if err := decoder.Decode(v); err != nil && err != io.EOF {
		return fmt.Errorf("sluiceway: reading the answer to %s %s: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return nil
}
