package worker

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	good := map[string]float64{"120": 120, " 0.5 ": 0.5, "Wed, 02 Dec 2026 12:00:30 GMT": 30}
	for value, want := range good {
		got, ok := ParseRetryAfter(value, now)
		if !ok || got != want {
			t.Errorf("%q: got %v %v, want %v", value, got, ok, want)
		}
	}
	for _, value := range []string{"0", "-5", "+5", "1,5", "1e3", "1_000", "1e99999", "٣", "", "Wed, 02 Dec 2026 11:00:00 GMT"} {
		if got, ok := ParseRetryAfter(value, now); ok {
			t.Errorf("%q: read as %v, want no delay", value, got)
		}
	}
	if got, _ := ParseRetryAfter("99999999999999999999", now); got != maxHintSeconds {
		t.Errorf("saturates at %v, got %v", maxHintSeconds, got)
	}
}

func TestRateLimitAwareHonoursRetryAfter(t *testing.T) {
	classify := RateLimitAware(Indefinite)
	limited := fmt.Errorf("partner: %w", &HTTPError{Status: 429, Header: http.Header{"Retry-After": {"7"}, "X-Retry-After": {"9"}}})
	verdict := classify(limited, 1)
	if verdict == nil || verdict.Kind != Indefinite || verdict.Delay == nil || *verdict.Delay != 7 {
		t.Fatalf("got %+v", verdict)
	}
	verdict = classify(&HTTPError{Status: 429, Header: http.Header{"X-Retry-After": {"9"}}}, 1)
	if verdict == nil || *verdict.Delay != 9 {
		t.Fatalf("X-Retry-After when there is no Retry-After: %+v", verdict)
	}
	if verdict := classify(&HTTPError{Status: 429}, 1); verdict == nil || verdict.Delay != nil {
		t.Fatalf("no hint: the policy's curve: %+v", verdict)
	}
	if classify(&HTTPError{Status: 503}, 1) != nil {
		t.Fatal("only 429 is claimed")
	}
}

func TestFailureTaxonomy(t *testing.T) {
	classify := FailureTaxonomy()
	cases := map[string]struct {
		err  error
		want Kind
	}{
		"503":          {&HTTPError{Status: 503}, Transient},
		"408":          {&HTTPError{Status: 408}, Transient},
		"425":          {&HTTPError{Status: 425}, Transient},
		"404":          {&HTTPError{Status: 404}, NonRetryable},
		"429":          {&HTTPError{Status: 429}, ""},
		"refused":      {fmt.Errorf("dial: %w", syscall.ECONNREFUSED), Transient},
		"net timeout":  {&net.DNSError{IsTimeout: true}, Transient},
		"plain":        {errors.New("bad input"), ""},
		"200 no error": {&HTTPError{Status: 200}, ""},
	}
	for name, c := range cases {
		verdict := classify(c.err, 1)
		got := Kind("")
		if verdict != nil {
			got = verdict.Kind
		}
		if got != c.want {
			t.Errorf("%s: got %q, want %q", name, got, c.want)
		}
	}
}

func TestABrokenClassifierIsSkipped(t *testing.T) {
	broken := func(error, int) *Verdict { panic("oops") }
	verdict := ComposeClassifiers(broken, FailureTaxonomy())(&HTTPError{Status: 500}, 1)
	if verdict == nil || verdict.Kind != Transient {
		t.Fatalf("got %+v", verdict)
	}
}
