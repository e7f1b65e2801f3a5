package worker

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluiceway/sluiceway/sdk/go/api"
)

// The API's bounds (docs/workers.md, "Bounds"): what the SDK sends stays inside them.
const (
	MaxReason       = 8192     // characters of a result's reason
	MaxDelaySeconds = 31536000 // a year: retryAfterSeconds and callbackAfterSeconds
	MaxBatch        = 1000     // items of one results or heartbeats request
	truncatedMark   = " [truncated]"
)

const (
	statusCompleted   api.ResultStatus = "COMPLETED"
	statusFailed      api.ResultStatus = "FAILED"
	statusTerminal    api.ResultStatus = "FAILED_WITH_TERMINAL_ERROR"
	statusInProgress  api.ResultStatus = "IN_PROGRESS"
	statusInterrupted api.ResultStatus = "INTERRUPTED"
)

// truncate cuts text to MaxReason characters, ending with " [truncated]".
func truncate(text string, limit int, mark string) string {
	runes := []rune(text)
	if len(runes) <= limit {
		return text
	}
	return string(runes[:limit-len([]rune(mark))]) + mark
}

// boundedDelay clamps a delay to the API's range; NaN becomes 0.
func boundedDelay(seconds float64) float32 {
	if math.IsNaN(seconds) || seconds < 0 {
		return 0
	}
	return float32(math.Min(seconds, MaxDelaySeconds))
}

// reasonOf is what a failure reports: the error's message (what
// nonRetryableErrors substrings match), its type when it has none.
func reasonOf(err error) string {
	text := err.Error()
	if text == "" {
		text = "error without a message"
	}
	return truncate(text, MaxReason, truncatedMark)
}

// outcome turns what a handler returned into the result to report. Pure: the
// task's logs and attributes are added by the caller.
func outcome(task *Task, output map[string]any, err error, classifier Classifier) api.TaskResult {
	result := api.TaskResult{TaskId: task.ID, Epoch: task.Epoch}
	var (
		terminal *TerminalError
		retry    *RetryAfterError
		snooze   *SnoozeError
	)
	switch {
	case err == nil:
		if output == nil {
			output = map[string]any{}
		}
		if _, marshalErr := json.Marshal(output); marshalErr != nil {
			return failed(result, "the output is not JSON: "+marshalErr.Error())
		}
		result.Status, result.Output = statusCompleted, &output
	case errors.As(err, &terminal):
		result.Status, result.Reason = statusTerminal, ptr(reasonOf(err))
	case errors.As(err, &snooze):
		result.Status, result.CallbackAfterSeconds = statusInProgress, ptr(boundedDelay(snooze.Seconds))
	case errors.As(err, &retry):
		source := api.DelaySource("signal")
		result = failed(result, reasonOf(err))
		result.RetryAfterSeconds, result.RetryAfterSource = ptr(boundedDelay(retry.Seconds)), &source
	default:
		result = classified(result, err, task.Attempt, classifier)
	}
	return result
}

func classified(result api.TaskResult, err error, attempt int, classifier Classifier) api.TaskResult {
	var verdict *Verdict
	if classifier != nil {
		verdict = classifier(err, attempt)
	}
	if verdict != nil && verdict.Kind == NonRetryable {
		result.Status, result.Reason = statusTerminal, ptr(reasonOf(err))
		return result
	}
	result = failed(result, reasonOf(err))
	if verdict == nil {
		return result
	}
	if verdict.Kind == Indefinite {
		kind := api.RetryKind(Indefinite)
		result.RetryKind = &kind
	}
	if verdict.Delay != nil {
		result.RetryAfterSeconds = ptr(boundedDelay(*verdict.Delay))
	}
	return result
}

func failed(result api.TaskResult, reason string) api.TaskResult {
	return api.TaskResult{
		TaskId: result.TaskId, Epoch: result.Epoch, Logs: result.Logs,
		Status: statusFailed, Reason: ptr(truncate(reason, MaxReason, truncatedMark)),
	}
}

// refused is the bare FAILED that replaces a result the server refused as
// invalid: the task fails now, its retry policy applies, instead of waiting
// out its lease.
func refused(result api.TaskResult, serverReason string) api.TaskResult {
	return failed(result, "the server refused the worker's result: "+serverReason)
}

// Backoff between retries of a request: exponential from 0.2 s, capped at
// 30 s, with equal jitter (random01 gives [0, 1)) so many workers spread out.
func backoff(attempt int, random01 func() float64) time.Duration {
	const base, limit = 0.2, 30.0
	ceiling := math.Min(limit, base*math.Pow(2, float64(min(attempt, 32))))
	seconds := ceiling/2 + random01()*ceiling/2
	return time.Duration(seconds * float64(time.Second))
}

func jittered(attempt int) time.Duration { return backoff(attempt, rand.Float64) }

func ptr[T any](v T) *T { return &v }
