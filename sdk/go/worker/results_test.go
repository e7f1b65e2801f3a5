package worker

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluiceway/sluiceway/sdk/go/api"
)

func testTask() *Task {
	return &Task{ID: "6f1c0000-0000-0000-0000-000000000000", Epoch: 3, Attempt: 2, logs: &logBuffer{}}
}

func TestOutcomeClassifiesHandlerErrors(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status api.ResultStatus
		reason string
	}{
		{"terminal", Terminalf("INVALID_ARGUMENT: %s", "no tenant"), statusTerminal, "INVALID_ARGUMENT: no tenant"},
		{"wrapped terminal", fmt.Errorf("charging: %w", Terminal(errors.New("declined"))), statusTerminal, "charging: declined"},
		{"plain", errors.New("flaky attempt 2"), statusFailed, "flaky attempt 2"},
		{"retry after", RetryAfter(7, nil), statusFailed, "retry after 7 s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			result := outcome(testTask(), nil, c.err, nil)
			if result.Status != c.status || result.Reason == nil || *result.Reason != c.reason {
				t.Fatalf("got %s %v, want %s %q", result.Status, deref(result.Reason), c.status, c.reason)
			}
			if result.TaskId != testTask().ID || result.Epoch != 3 {
				t.Fatalf("the result lost its lease: %+v", result)
			}
		})
	}
}

func TestRetryAfterIsASignalWithItsDelay(t *testing.T) {
	result := outcome(testTask(), nil, RetryAfter(2.5, errors.New("quota")), nil)
	if result.RetryAfterSeconds == nil || *result.RetryAfterSeconds != 2.5 {
		t.Fatalf("retryAfterSeconds = %v", result.RetryAfterSeconds)
	}
	if result.RetryAfterSource == nil || *result.RetryAfterSource != "signal" {
		t.Fatalf("retryAfterSource = %v", result.RetryAfterSource)
	}
}

func TestSnoozeIsInProgressWithACallback(t *testing.T) {
	result := outcome(testTask(), nil, Snooze(30), nil)
	if result.Status != statusInProgress || result.CallbackAfterSeconds == nil || *result.CallbackAfterSeconds != 30 {
		t.Fatalf("got %+v", result)
	}
	if result.Reason != nil {
		t.Fatalf("a snooze carries no reason: %q", *result.Reason)
	}
}

func TestDelaysAreClampedToTheAPIsBounds(t *testing.T) {
	for seconds, want := range map[float64]float32{1e12: MaxDelaySeconds, -5: 0, math.NaN(): 0, math.Inf(1): MaxDelaySeconds, 0.5: 0.5} {
		if got := *outcome(testTask(), nil, Snooze(seconds), nil).CallbackAfterSeconds; got != want {
			t.Errorf("Snooze(%v): callbackAfterSeconds %v, want %v", seconds, got, want)
		}
	}
}

func TestCompletedOutputs(t *testing.T) {
	result := outcome(testTask(), nil, nil, nil)
	if result.Status != statusCompleted || result.Output == nil || len(*result.Output) != 0 {
		t.Fatalf("a nil output is reported as {}: %+v", result)
	}
	result = outcome(testTask(), map[string]any{"x": math.NaN()}, nil, nil)
	if result.Status != statusFailed || !strings.HasPrefix(*result.Reason, "the output is not JSON: ") {
		t.Fatalf("an output that is not JSON is reported FAILED saying so: %+v", result)
	}
}

func TestReasonsAreCutToTheAPIsBound(t *testing.T) {
	long := strings.Repeat("é", MaxReason+50)
	reason := *outcome(testTask(), nil, errors.New(long), nil).Reason
	if n := len([]rune(reason)); n != MaxReason {
		t.Fatalf("reason of %d characters, want %d", n, MaxReason)
	}
	if !strings.HasSuffix(reason, " [truncated]") {
		t.Fatalf("a cut reason says so: ...%q", reason[len(reason)-20:])
	}
	short := "exactly as it was"
	if got := *outcome(testTask(), nil, errors.New(short), nil).Reason; got != short {
		t.Fatalf("a short reason is kept: %q", got)
	}
}

func TestClassifierVerdicts(t *testing.T) {
	delay := 12.0
	indefinite := func(error, int) *Verdict { return &Verdict{Kind: Indefinite, Delay: &delay} }
	terminal := func(error, int) *Verdict { return &Verdict{Kind: NonRetryable} }
	none := func(error, int) *Verdict { return nil }

	result := outcome(testTask(), nil, errors.New("429"), ComposeClassifiers(none, indefinite, terminal))
	if result.Status != statusFailed || result.RetryKind == nil || *result.RetryKind != "indefinite" || *result.RetryAfterSeconds != 12 {
		t.Fatalf("the first verdict wins: %+v", result)
	}
	if result.RetryAfterSource != nil {
		t.Fatalf("a classifier's delay is a hint, the server's default source: %v", *result.RetryAfterSource)
	}
	result = outcome(testTask(), nil, errors.New("400"), ComposeClassifiers(nil, terminal))
	if result.Status != statusTerminal {
		t.Fatalf("nonRetryable is FAILED_WITH_TERMINAL_ERROR: %+v", result)
	}
	result = outcome(testTask(), nil, Terminalf("bad"), func(error, int) *Verdict { return &Verdict{Kind: Transient} })
	if result.Status != statusTerminal {
		t.Fatalf("a TerminalError is never reclassified: %+v", result)
	}
}

func TestRefusedResultsBecomeABareFailedWithTheServersReason(t *testing.T) {
	lines := []api.LogLine{notice("kept")}
	attributes := map[string]any{"stage": "x"}
	original := outcome(testTask(), map[string]any{"a": "b\x00"}, nil, nil)
	original.Logs, original.SearchAttributes = &lines, &attributes
	bare := refused(original, "output: NUL character")
	if bare.Status != statusFailed || *bare.Reason != "the server refused the worker's result: output: NUL character" {
		t.Fatalf("got %+v", bare)
	}
	if bare.Output != nil || bare.SearchAttributes != nil || bare.Logs == nil {
		t.Fatalf("a bare FAILED keeps the lease and the logs only: %+v", bare)
	}
}

func TestBackoffGrowsWithJitterUnderItsCap(t *testing.T) {
	low, high := func() float64 { return 0 }, func() float64 { return 0.999999 }
	if got := backoff(0, low); got != 100*time.Millisecond {
		t.Fatalf("first retry waits 0.1-0.2 s, got %v", got)
	}
	if got := backoff(0, high); got < 199*time.Millisecond || got > 200*time.Millisecond {
		t.Fatalf("first retry at most 0.2 s, got %v", got)
	}
	if got := backoff(3, low); got != 800*time.Millisecond {
		t.Fatalf("doubling: 1.6 s ceiling, half of it at least, got %v", got)
	}
	for _, attempt := range []int{8, 40, 1000} {
		if got := backoff(attempt, high); got > 30*time.Second || got < 15*time.Second {
			t.Fatalf("attempt %d: capped at 30 s, got %v", attempt, got)
		}
	}
}
