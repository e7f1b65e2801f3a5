package worker

import (
	"errors"
	"fmt"
)

// TerminalError says the input will never succeed: the task is reported
// FAILED_WITH_TERMINAL_ERROR and never retried, whatever its retry policy.
// Create one with Terminal or Terminalf, test with errors.As.
type TerminalError struct {
	Err error
}

func (e *TerminalError) Error() string { return e.Err.Error() }
func (e *TerminalError) Unwrap() error { return e.Err }

// Terminal wraps err (or a message) as a non-retryable failure.
func Terminal(err error) error { return &TerminalError{Err: err} }

// Terminalf is Terminal with a formatted message (%w wraps as in fmt.Errorf).
func Terminalf(format string, args ...any) error {
	return &TerminalError{Err: fmt.Errorf(format, args...)}
}

// RetryAfterError asks for the next attempt after exactly Seconds (the
// handler's own direction, a "signal": only the task's deadline gates it).
// The attempt is spent like any failure.
type RetryAfterError struct {
	Seconds float64
	Err     error // the reason; nil says "retry after N s"
}

func (e *RetryAfterError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("retry after %g s", e.Seconds)
}
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter fails this attempt and asks for the next one after seconds.
func RetryAfter(seconds float64, reason error) error {
	return &RetryAfterError{Seconds: seconds, Err: reason}
}

// SnoozeError hands the task back to be leased again after Seconds,
// spending no attempt (scheduleToCloseTimeout still bounds it).
type SnoozeError struct {
	Seconds float64
}

func (e *SnoozeError) Error() string { return fmt.Sprintf("snooze %g s", e.Seconds) }

// Snooze returns the error that snoozes the task for seconds.
func Snooze(seconds float64) error { return &SnoozeError{Seconds: seconds} }

// ErrNoHandlers is returned by Run when nothing was registered.
var ErrNoHandlers = errors.New("sluiceway: no task handlers registered")

// Kind is a classifier's verdict on a failure.
type Kind string

const (
	// NonRetryable reports the failure FAILED_WITH_TERMINAL_ERROR.
	NonRetryable Kind = "nonRetryable"
	// Transient reports FAILED: the retry policy applies.
	Transient Kind = "transient"
	// Indefinite is retried with no attempt ceiling until the task's deadline.
	Indefinite Kind = "indefinite"
)

// Verdict refines how a failure is reported. Delay, when set, is sent as
// retryAfterSeconds (a hint, clamped by the operator's ceiling).
type Verdict struct {
	Kind  Kind
	Delay *float64
}

// Classifier looks at a handler's error (not a TerminalError, RetryAfterError
// or SnoozeError: those say what they want) and may return a verdict; nil
// leaves the default, FAILED with the error's message.
type Classifier func(err error, attempt int) *Verdict

// ComposeClassifiers asks each classifier in turn; the first verdict wins.
// A classifier that panics is skipped: a broken one degrades to the policy.
func ComposeClassifiers(classifiers ...Classifier) Classifier {
	return func(err error, attempt int) *Verdict {
		for _, classify := range classifiers {
			if verdict := safely(classify, err, attempt); verdict != nil {
				return verdict
			}
		}
		return nil
	}
}

func safely(classify Classifier, err error, attempt int) (verdict *Verdict) {
	if classify == nil {
		return nil
	}
	defer func() {
		if recover() != nil {
			verdict = nil
		}
	}()
	return classify(err, attempt)
}
