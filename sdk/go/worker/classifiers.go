package worker

import (
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StatusError is an error that carries an HTTP status: the classifiers
// below read it through errors.As, so wrapping keeps it visible.
type StatusError interface {
	error
	HTTPStatus() int
}

// HeaderError is an error that carries the response's headers (for Retry-After).
type HeaderError interface {
	error
	HTTPHeader() http.Header
}

// HTTPError is a ready StatusError and HeaderError for handlers that call
// HTTP services: return &worker.HTTPError{Status: resp.StatusCode, Header: resp.Header}.
type HTTPError struct {
	Status int
	Header http.Header
	Err    error // what went wrong, if more than the status says
}

func (e *HTTPError) Error() string {
	text := "HTTP " + strconv.Itoa(e.Status)
	if e.Err != nil {
		text += ": " + e.Err.Error()
	}
	return text
}
func (e *HTTPError) Unwrap() error           { return e.Err }
func (e *HTTPError) HTTPStatus() int         { return e.Status }
func (e *HTTPError) HTTPHeader() http.Header { return e.Header }

// statusOf is the HTTP status an error carries, or 0.
func statusOf(err error) int {
	var carrier StatusError
	if errors.As(err, &carrier) {
		return carrier.HTTPStatus()
	}
	return 0
}

// Decimal seconds, ASCII digits only: a comma decimal, scientific notation,
// a sign or underscores are garbage (a rate-limit hint is a human-scale count).
var retryAfterSeconds = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// maxHintSeconds is representability saturation, not a policy: the server clamps.
const maxHintSeconds = 1e15

// ParseRetryAfter reads a Retry-After value (decimal seconds or an HTTP
// date) as seconds from now; ok is false for anything that is not a
// positive delay (the retry policy's own curve then decides).
func ParseRetryAfter(value string, now time.Time) (seconds float64, ok bool) {
	text := strings.TrimSpace(value)
	if retryAfterSeconds.MatchString(text) {
		seconds, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return 0, false
		}
		seconds = math.Min(seconds, maxHintSeconds)
		return seconds, seconds > 0
	}
	when, err := http.ParseTime(text)
	if err != nil {
		return 0, false
	}
	seconds = when.Sub(now).Seconds()
	return seconds, seconds > 0
}

// retryAfterHint is the delay an error's headers ask for: Retry-After wins
// over X-Retry-After.
func retryAfterHint(err error, now time.Time) *float64 {
	var carrier HeaderError
	if !errors.As(err, &carrier) || carrier.HTTPHeader() == nil {
		return nil
	}
	for _, name := range []string{"Retry-After", "X-Retry-After"} {
		if value := carrier.HTTPHeader().Get(name); value != "" {
			if seconds, ok := ParseRetryAfter(value, now); ok {
				return &seconds
			}
			return nil
		}
	}
	return nil
}

// RateLimitAware claims HTTP 429 with kind (Indefinite: wait it out with no
// attempt ceiling until the task's deadline; or Transient), honouring the
// server's Retry-After exactly as the delay.
func RateLimitAware(kind Kind) Classifier {
	return func(err error, _ int) *Verdict {
		if statusOf(err) != http.StatusTooManyRequests {
			return nil
		}
		return &Verdict{Kind: kind, Delay: retryAfterHint(err, time.Now())}
	}
}

// FailureTaxonomy: connection errors, timeouts and 5xx/408/425 are
// Transient; other 4xx are NonRetryable; anything else has no verdict.
// Never Indefinite. Put RateLimitAware first to treat 429 apart (here it is
// neither: the policy decides).
func FailureTaxonomy() Classifier {
	return func(err error, _ int) *Verdict {
		status := statusOf(err)
		switch {
		case transientError(err), status == http.StatusRequestTimeout, status == http.StatusTooEarly, status >= 500 && status < 600:
			return &Verdict{Kind: Transient}
		case status >= 400 && status < 500 && status != http.StatusTooManyRequests:
			return &Verdict{Kind: NonRetryable}
		}
		return nil
	}
}

// transientError: the shapes of a failed connection or a timeout.
func transientError(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true // timeouts, refused or reset connections, DNS failures
	}
	for _, target := range []error{io.ErrUnexpectedEOF, syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
