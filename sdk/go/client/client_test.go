package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestTypedRunErrors(t *testing.T) {
	var err error = fmt.Errorf("checkout: %w", &RunFailedError{RunID: "r", Status: "TIMED_OUT"})
	var failed *RunFailedError
	if !errors.Is(err, ErrRunFailed) || !errors.As(err, &failed) || failed.Status != "TIMED_OUT" {
		t.Fatalf("RunFailedError: %v", err)
	}
	if err.Error() != "checkout: run r TIMED_OUT: no reason given" {
		t.Fatalf("message %q", err)
	}
	err = &StillRunningError{RunID: "r", Status: "RUNNING", Timeout: time.Minute}
	if !errors.Is(err, ErrStillRunning) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrRunFailed) {
		t.Fatalf("StillRunningError: %v", err)
	}
}

func TestWaitStepsStayWithinTheAPIsBound(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &Client{now: func() time.Time { return now }}
	for left, want := range map[time.Duration]time.Duration{
		10 * time.Minute: time.Minute, 1500 * time.Millisecond: 1500 * time.Millisecond, -time.Second: 0,
	} {
		if got := c.step(now.Add(left)); got != want {
			t.Errorf("%v left: step %v, want %v", left, got, want)
		}
	}
	if waitParam(0) != nil || *waitParam(1500 * time.Millisecond) != "1.500s" {
		t.Fatal("wait=1.500s, none for 0")
	}
}
